#!/usr/bin/env bash
# Installs what the project needs on this machine, idempotently: the Python virtualenv and the
# Pulumi engine (scripts/setup-engine.sh). The local hosts install their own host tools
# (debootstrap, systemd-container, zstd) when one is first booted (scripts/nspawn_host.py).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
say() { echo "setup: $*" >&2; }

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
