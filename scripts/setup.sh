#!/usr/bin/env bash
# Installs everything the project needs on this machine, idempotently: the Python virtualenv,
# the Pulumi engine (scripts/setup-engine.sh) and the host tools the local hosts need.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
say() { echo "setup: $*" >&2; }

missing=()
for tool in debootstrap:debootstrap systemd-nspawn:systemd-container; do
  command -v "${tool%%:*}" >/dev/null || missing+=("${tool#*:}")
done
if [ ${#missing[@]} -gt 0 ]; then
  say "installing ${missing[*]} (apt-get)"
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2
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
