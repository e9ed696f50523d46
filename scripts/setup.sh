#!/usr/bin/env bash
# Installs what the project needs on this machine, idempotently: shellcheck (the launcher and
# set-up scripts are checked with it), the local Kubernetes node's host tools, promtool and
# prometheus (the alert rules are checked and evaluated with them), the Python virtualenv, the
# Pulumi engine with the command plugin and the policy pack's virtualenv (scripts/setup-engine.sh).
# The kubernetes provider plugin and the local cluster's binaries build with
# scripts/setup-kubernetes.sh (scripts/test builds them in the background; a stack with a vLLM fleet
# needs the plugin).
# The local hosts install their own host tools (debootstrap, systemd-container, zstd) when one is
# first booted (localhosts/hosts/rootfs.py). `--no-engine` skips the engine (scripts/test builds it
# after starting the hosts' build, which needs only the virtualenv).
set -euo pipefail
engine=1
case ${1-} in
  "") ;;
  --no-engine) engine= ;;
  *) echo "setup: unknown argument '$1'; allowed: --no-engine" >&2; exit 2 ;;
esac
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
say() { echo "setup: $*" >&2; }
export DEBIAN_FRONTEND=noninteractive
apt_updated=
apt_update() { [ -n "$apt_updated" ] || apt-get update -qq >&2; apt_updated=1; }

# The linter, libseccomp-dev (runc's build links it), what the local Kubernetes node runs:
# iptables (the kubelet's chains), nft (kube-proxy's nftables mode), conntrack; and ccache, so
# the llama-server this machine builds for the serving image fills the compiler cache the local
# inference hosts share (their rebuild after a script or source change then reuses its objects:
# without it a cold host rebuild compiled everything again, 325 s on 2 cores).
packages=()
command -v shellcheck >/dev/null || packages+=(shellcheck)
command -v ccache >/dev/null || packages+=(ccache)
[ -e /usr/include/seccomp.h ] || packages+=(libseccomp-dev)
command -v nft >/dev/null || packages+=(nftables)
command -v iptables >/dev/null || packages+=(iptables)
command -v conntrack >/dev/null || packages+=(conntrack)
# strace: a test lists every address a real harness connects to (only the gateway).
command -v strace >/dev/null || packages+=(strace)
# Java runs S3Proxy, the shared-state tests' S3 server (localhosts/servers/s3_server.py).
command -v java >/dev/null || packages+=(openjdk-17-jre-headless)
if [ ${#packages[@]} -gt 0 ]; then
  say "installing ${packages[*]} with apt-get"
  apt_update && apt-get install -y -qq --no-install-recommends "${packages[@]}" >&2
fi

# promtool and the server binary alone, from Debian's prometheus package: installing the package
# would also start a Prometheus server on machines that run systemd (the tests start their own).
if ! command -v promtool >/dev/null || ! command -v prometheus >/dev/null; then
  say "installing promtool and prometheus from Debian's prometheus package"
  deb=$(mktemp -d)
  # As root into root's folder: apt's _apt user could not write there.
  apt_update && (cd "$deb" && apt-get download -qq -o APT::Sandbox::User=root prometheus >&2)
  for tool in promtool prometheus; do
    dpkg-deb --fsys-tarfile "$deb"/prometheus_*.deb | tar -xO "./usr/bin/$tool" > "/usr/local/bin/$tool.tmp"
    chmod 0755 "/usr/local/bin/$tool.tmp" && mv "/usr/local/bin/$tool.tmp" "/usr/local/bin/$tool"
  done
  rm -rf "$deb"
fi

# Reinstall only when requirements.txt changed.
# A `.venv` link whose target is gone (another machine's, another clone's) is replaced.
if [ -L "$repo/.venv" ] && [ ! -e "$repo/.venv" ]; then
  say "replacing the dangling link .venv (-> $(readlink "$repo/.venv")) with a virtualenv"
  rm "$repo/.venv"
fi
stamp=$repo/.venv/.requirements.sha256
want=$(sha256sum "$repo/requirements.txt" | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  say "installing Python packages into .venv"
  [ -x "$repo/.venv/bin/python" ] || python3 -m venv "$repo/.venv"
  "$repo/.venv/bin/pip" install -q --disable-pip-version-check -r "$repo/requirements.txt" >&2
  echo "$want" > "$stamp"
fi

[ -z "$engine" ] || "$repo/scripts/setup-engine.sh" >/dev/null
