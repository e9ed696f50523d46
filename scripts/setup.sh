#!/usr/bin/env bash
# Installs what the project needs on this machine, idempotently: shellcheck (the launcher and
# set-up scripts are checked with it) and promtool (Debian's prometheus package; the alert rules
# are checked with it), the Python virtualenv, the Pulumi engine with the command plugin and the
# policy pack's virtualenv (scripts/setup-engine.sh), and the local Kubernetes cluster's binaries
# with the kubernetes provider plugin (scripts/setup-kubernetes.sh). The local hosts
# install their own host tools (debootstrap, systemd-container, zstd) when one is first booted
# (localhosts/rootfs.py).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
say() { echo "setup: $*" >&2; }

missing=()
command -v shellcheck >/dev/null || missing+=(shellcheck)
command -v promtool >/dev/null || missing+=(prometheus)
if [ ${#missing[@]} -gt 0 ]; then
  say "installing ${missing[*]} with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2 && apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

# Reinstall only when requirements.txt changed.
stamp=$repo/.venv/.requirements.sha256
want=$(sha256sum "$repo/requirements.txt" | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  say "installing Python packages into .venv"
  [ -x "$repo/.venv/bin/python" ] || python3 -m venv "$repo/.venv"
  "$repo/.venv/bin/pip" install -q --disable-pip-version-check -r "$repo/requirements.txt" >&2
  echo "$want" > "$stamp"
fi

"$repo/scripts/setup-engine.sh" >/dev/null
"$repo/scripts/setup-kubernetes.sh" >/dev/null
