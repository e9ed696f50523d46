#!/usr/bin/env bash
# serve-vllm.sh: start vLLM on the RunPod pod (installed as <runtime>/bin/serve-vllm.sh and run by
# spear-fleet in the tmux session spear-vllm).
#
# It holds no deployment values. The command line comes from vllm.args ($SPEAR_VLLM_ARGS,
# default <runtime>/config/vllm.args: one argument per line, rendered from the stack by
# spear/vllm.py); the API key from vllm.env ($SPEAR_VLLM_ENV, default <runtime>/config/vllm.env,
# mode 0600: VLLM_API_KEY=...), which vLLM reads from its environment, so the key is never on a
# command line where anyone listing processes would read it.
set -euo pipefail

die() {  # a deployment problem: exit 2, naming it
    echo "serve-vllm.sh: $*" >&2
    exit 2
}

case ${BASH_SOURCE[0]} in
    */*) script_dir=${BASH_SOURCE[0]%/*} ;;
    *) script_dir=. ;;
esac
runtime=$(cd "$script_dir/.." && pwd)
args_file=${SPEAR_VLLM_ARGS:-$runtime/config/vllm.args}
env_file=${SPEAR_VLLM_ENV:-$runtime/config/vllm.env}

[[ -f $args_file ]] || die "no $args_file"
[[ -f $env_file ]] || die "no $env_file"
mode=$(stat -c %a "$env_file")
[[ $mode == 600 ]] || die "$env_file holds the API key: its mode must be 600, not $mode"

set -a
# shellcheck source=/dev/null
source "$env_file" || die "cannot read $env_file"
set +a
[[ -n ${VLLM_API_KEY-} ]] || die "$env_file sets no VLLM_API_KEY"

mapfile -t argv <"$args_file"
((${#argv[@]} > 0)) || die "$args_file is empty"
for arg in "${argv[@]}"; do
    case $arg in
        --api-key | --api-key=*) die "$args_file puts the API key on the command line" ;;
    esac
done

# The pod's volume outlives a restart and its container disk does not: the weights go on the
# volume, next to this runtime folder, unless the image says otherwise.
export HF_HOME=${HF_HOME:-$runtime/huggingface}

echo "serve-vllm.sh: starting ${argv[*]}" >&2
exec "${argv[@]}"
