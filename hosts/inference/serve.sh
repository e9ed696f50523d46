#!/usr/bin/env bash
# serve.sh: start llama-server for this deployment (installed as <runtime>/bin/serve.sh and run
# by spear-inference.service).
#
# It holds no deployment values. Model, context size, threads, port, ... come from server.conf
# ($SPEAR_SERVER_CONF, default <runtime>/config/server.conf) or from SPEAR_SERVER_* in the
# environment, which win over the file; server.conf.example documents every key. The script adds
# only what is a property of the build: the q8_0 KV cache, flash attention, --jinja, the MoE
# offload default, and the YaRN flags when the window exceeds the trained length.
#
# SPEAR_SERVE_PRINT=1 prints the command line, one argument per line, instead of running it,
# and skips the file checks: spear-fleet previews the real command line that way.
# SPEAR_LLAMA_SERVER overrides the binary (default <runtime>/current/bin/llama-server).
set -euo pipefail

die() {  # a config problem: exit 2, naming the key
    echo "serve.sh: $*" >&2
    exit 2
}

case ${BASH_SOURCE[0]} in
    */*) script_dir=${BASH_SOURCE[0]%/*} ;;
    *) script_dir=. ;;
esac
runtime=$(cd "$script_dir/.." && pwd)
conf=${SPEAR_SERVER_CONF:-$runtime/config/server.conf}
server=${SPEAR_LLAMA_SERVER:-$runtime/current/bin/llama-server}
print=${SPEAR_SERVE_PRINT:-0}

# Non-empty SPEAR_SERVER_* from the environment win over the file: remember them, read the
# file, put them back.
keys=(MODEL LORA CTX NATIVE_CTX ARCH HOST PORT THREADS NGL NCPUMOE MOE PARALLEL)
declare -A from_env=()
for key in "${keys[@]}"; do
    name=SPEAR_SERVER_$key
    if [[ -n ${!name-} ]]; then
        from_env[$name]=${!name}
    fi
done
if [[ -f $conf ]]; then
    # shellcheck source-path=SCRIPTDIR source=server.conf.example
    source "$conf" || die "cannot read $conf"
else
    echo "serve.sh: no $conf; using SPEAR_SERVER_* from the environment only" >&2
fi
for name in "${!from_env[@]}"; do
    printf -v "$name" '%s' "${from_env[$name]}"
done

integer() {  # integer NAME MIN: check $NAME (if set) and normalise it (no leading zeros)
    local name=$1 value=${!1-}
    if [[ -z $value ]]; then
        return
    fi
    if ! [[ $value =~ ^[0-9]+$ ]] || ((10#$value < $2)); then
        die "$name must be an integer >= $2, got '$value'"
    fi
    printf -v "$name" '%d' "$((10#$value))"
}

ratio() {  # ratio N D: N/D, an integer when D divides N, else a decimal rounded to 6 places
    local micro frac
    if (($1 % $2 == 0)); then
        echo "$(($1 / $2))"
        return
    fi
    micro=$((($1 * 2000000 + $2) / (2 * $2)))
    printf -v frac '%06d' "$((micro % 1000000))"
    while [[ $frac == *0 ]]; do frac=${frac%0}; done
    echo "$((micro / 1000000))${frac:+.$frac}"
}

[[ -n ${SPEAR_SERVER_CTX-} ]] \
    || die "SPEAR_SERVER_CTX is not set: the context size has no default; state it in $conf or the environment"
[[ -n ${SPEAR_SERVER_MODEL-} ]] || die "SPEAR_SERVER_MODEL is not set (the first GGUF shard)"
integer SPEAR_SERVER_CTX 1
integer SPEAR_SERVER_NATIVE_CTX 1
integer SPEAR_SERVER_PORT 1
integer SPEAR_SERVER_THREADS 1
integer SPEAR_SERVER_NGL 0
integer SPEAR_SERVER_NCPUMOE 0
integer SPEAR_SERVER_PARALLEL 1
[[ ${SPEAR_SERVER_MOE:-0} =~ ^[01]$ ]] || die "SPEAR_SERVER_MOE must be 1 or 0, got '$SPEAR_SERVER_MOE'"
if [[ -n ${SPEAR_SERVER_ARCH-} && ! $SPEAR_SERVER_ARCH =~ ^[a-z0-9_]+$ ]]; then
    die "SPEAR_SERVER_ARCH must be a llama.cpp architecture name, got '$SPEAR_SERVER_ARCH'"
fi

model=$SPEAR_SERVER_MODEL
ctx=$SPEAR_SERVER_CTX
native=${SPEAR_SERVER_NATIVE_CTX-}
ncpumoe=${SPEAR_SERVER_NCPUMOE-}
lora=${SPEAR_SERVER_LORA:-none}

if [[ $print != 1 && ! (-f $model && -r $model) ]]; then
    echo "serve.sh: model not readable: $model" >&2
    exit 1
fi

args=(--model "$model" --ctx-size "$ctx")
if [[ -n ${SPEAR_SERVER_PARALLEL-} ]]; then args+=(--parallel "$SPEAR_SERVER_PARALLEL"); fi
if [[ -n ${SPEAR_SERVER_NGL-} ]]; then args+=(--n-gpu-layers "$SPEAR_SERVER_NGL"); fi
args+=(--flash-attn on --cache-type-k q8_0 --cache-type-v q8_0)
args+=(--host "${SPEAR_SERVER_HOST:-127.0.0.1}" --port "${SPEAR_SERVER_PORT:-8080}")
args+=(--jinja)
if [[ -n ${SPEAR_SERVER_THREADS-} ]]; then args+=(--threads "$SPEAR_SERVER_THREADS"); fi

# YaRN is static: it would rescale every prompt, so it is only added past the trained length,
# and then the GGUF's context_length must be raised too or llama-server caps each slot at it.
if [[ -n $native ]] && ((ctx > native)); then
    [[ -n ${SPEAR_SERVER_ARCH-} ]] \
        || die "SPEAR_SERVER_ARCH is not set: needed for the context_length override since SPEAR_SERVER_CTX $ctx > SPEAR_SERVER_NATIVE_CTX $native"
    args+=(--rope-scaling yarn --rope-scale "$(ratio "$ctx" "$native")" --yarn-orig-ctx "$native")
    args+=(--override-kv "$SPEAR_SERVER_ARCH.context_length=int:$ctx")
fi

# Mixture-of-experts offload: with no SPEAR_SERVER_NCPUMOE every expert stays in system RAM
# (--cpu-moe: fits any card); N > 0 keeps the experts of the first N layers there; 0 puts
# everything on the card.
if [[ ${SPEAR_SERVER_MOE:-0} == 1 ]]; then
    if [[ -z $ncpumoe ]]; then
        args+=(--cpu-moe)
    elif ((ncpumoe > 0)); then
        args+=(--n-cpu-moe "$ncpumoe")
    fi
elif [[ -n $ncpumoe ]]; then
    echo "serve.sh: SPEAR_SERVER_NCPUMOE=$ncpumoe ignored: SPEAR_SERVER_MOE is not 1" >&2
fi

if [[ $lora != none ]]; then
    if [[ $print == 1 || (-f $lora && -r $lora) ]]; then
        args+=(--lora "$lora")
    else
        echo "serve.sh: adapter not readable: $lora; serving the base model" >&2
    fi
fi

if [[ $print == 1 ]]; then
    printf '%s\n' "$server" "${args[@]}"
    exit 0
fi
exec "$server" "${args[@]}"
