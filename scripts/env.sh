# Source this file: it puts the project's Pulumi engine on PATH and sets the embedded defaults
# (a local file backend and a passphrase secrets provider) unless the caller chose otherwise.
# scripts/setup-engine.sh builds or installs what is missing (the engine, the command plugin, the
# policy pack's virtualenv) and takes a fraction of a second when nothing is. The project's
# virtualenv .venv is not needed first: the language host creates it from requirements.txt on the
# first `pulumi` command that runs the program.
# shellcheck shell=bash
_spear_repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export SPEAR_CACHE=${SPEAR_CACHE:-$HOME/.cache/spear-fleet}
# The CLI's plugins and settings under $HOME, where setup-engine.sh and the tests look for them
# (the CLI alone would take the password database's home).
export PULUMI_HOME=${PULUMI_HOME:-$HOME/.pulumi}
_spear_engine=$("$_spear_repo/scripts/setup-engine.sh") || return 1
case ":$PATH:" in *":$_spear_engine:"*) ;; *) export PATH="$_spear_engine:$PATH" ;; esac
# Plugins come from this machine only: a missing one fails fast instead of trying the internet.
export PULUMI_SKIP_UPDATE_CHECK=true PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true
export PULUMI_BACKEND_URL=${PULUMI_BACKEND_URL:-file://$HOME/.spear-fleet/state}
case $PULUMI_BACKEND_URL in file://*) mkdir -p "${PULUMI_BACKEND_URL#file://}" ;; esac
# The committed example stacks encrypt their placeholder secrets with this passphrase; a real
# deployment sets its own (docs/OPERATING.md, "Stacks"). Only the local stack may be deployed
# under it: the program refuses any other's `up` (config/load.py), and so does this file when
# PULUMI_STACK names another stack.
export PULUMI_CONFIG_PASSPHRASE=${PULUMI_CONFIG_PASSPHRASE-spear-fleet-example}
unset _spear_repo _spear_engine
if [ "$PULUMI_CONFIG_PASSPHRASE" = spear-fleet-example ] && [ -n "${PULUMI_STACK:-}" ] \
    && [ "$PULUMI_STACK" != local ]; then
  echo "PULUMI_CONFIG_PASSPHRASE: the public example passphrase is for the local stack only; set your own for $PULUMI_STACK" >&2
  return 1
fi
