#!/usr/bin/env bash
# Installs the LiteLLM proxy into a virtualenv with everything its database mode needs, and
# generates its Prisma client; runs on the gateway host as root (and on a test machine).
#
# Usage: install-litellm.sh --venv DIR --version VERSION
#          (--index-url URL | --wheelhouse DIR)
#          (--engine offline --prisma-offline DIR | --engine native)
#   --venv DIR            where the virtualenv is reached: a symlink to DIR.builds/<key>, switched
#                         in one rename once a build is complete (a virtualenv cannot be moved)
#   --version VERSION     litellm[proxy]==VERSION
#   --index-url URL       install from this package index
#   --wheelhouse DIR      install from this folder only (--no-index), e.g. made by
#                         localhosts/wheelhouse.py for hosts without registry access
#   --engine offline      Prisma's WebAssembly query engine: DIR is a prisma-offline bundle
#                         (hosts/gateway/prisma-offline with its node_modules); needs node >= 18
#   --engine native       Prisma's native engines, downloaded from Prisma's binary host
# The requirements besides litellm are requirements.txt beside this script. Idempotent: a build
# with the same key (version, requirements, engine, this script, Python) is reused; prints
# "install-litellm: up to date <dir>" or "install-litellm: installed <dir>".
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
say() { echo "install-litellm: $*" >&2; }
die() { say "$*"; exit 2; }
usage="usage: $0 --venv DIR --version VERSION (--index-url URL | --wheelhouse DIR) (--engine offline --prisma-offline DIR | --engine native)"

venv="" version="" index_url="" wheelhouse="" engine="" bundle=""
while [ "$#" -gt 0 ]; do
  [ "$#" -ge 2 ] || die "$1 needs a value; $usage"
  case "$1" in
    --venv) venv=$2 ;;
    --version) version=$2 ;;
    --index-url) index_url=$2 ;;
    --wheelhouse) wheelhouse=$2 ;;
    --engine) engine=$2 ;;
    --prisma-offline) bundle=$2 ;;
    *) die "unknown argument $1; $usage" ;;
  esac
  shift 2
done
[ -n "$venv" ] || die "--venv is required; $usage"
venv=$(realpath -m -s "$venv")
[[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+([.a-z0-9]*)$ ]] || die "--version must be a LiteLLM release like 1.91.1, got '$version'"
if [ -n "$index_url" ] && [ -n "$wheelhouse" ]; then die "give --index-url or --wheelhouse, not both"; fi
if [ -z "$index_url" ] && [ -z "$wheelhouse" ]; then die "a package source is required: --index-url URL or --wheelhouse DIR"; fi
if [ -n "$wheelhouse" ] && [ ! -d "$wheelhouse" ]; then die "--wheelhouse $wheelhouse is not a folder"; fi
case "$engine" in
  offline)
    [ -n "$bundle" ] || die "--engine offline needs --prisma-offline DIR (the bundle with node_modules)"
    bundle=$(cd "$bundle" 2>/dev/null && pwd) || die "--prisma-offline folder does not exist"
    if [ ! -x "$bundle/query-engine" ] || [ ! -d "$bundle/node_modules/@prisma/query-engine-wasm" ]; then
      die "--prisma-offline $bundle is not a prisma-offline bundle (query-engine and node_modules expected)"
    fi
    command -v node >/dev/null || die "--engine offline needs node (>= 18) on PATH" ;;
  native) [ -z "$bundle" ] || die "--prisma-offline is only for --engine offline" ;;
  *) die "--engine must be offline or native, got '$engine'" ;;
esac
requirements=$here/requirements.txt
[ -f "$requirements" ] || die "$requirements is missing"
python=${PYTHON:-python3}

# The content key: what the build is made of (not where the packages came from).
key=$(
  {
    echo "litellm[proxy]==$version engine=$engine"
    cat "$requirements" "${BASH_SOURCE[0]}"
    "$python" -c 'import sys; print(sys.version)'
    if [ "$engine" = offline ]; then
      # What `prisma generate` runs: the Prisma CLI (pinned by the lock) and the schema engine.
      # The query engine is only run by the proxy, from the bundle: changing it needs no reinstall.
      (cd "$bundle" && sha256sum package-lock.json schema-engine)
    fi
  } | sha256sum | cut -c1-16
)
builds=$venv.builds
build=$builds/$key

switch_to_build() {
  # ln + rename: the link changes in one step, never points at a half-made build.
  ln -sfn "$build" "$venv.new.$$"
  mv -T "$venv.new.$$" "$venv"
  # Keep the build the link pointed to before (a rollback), drop older ones.
  for old in "$builds"/*; do
    [ "$old" = "$build" ] || [ "$old" = "${previous:-}" ] || rm -rf "$old"
  done
}

# One install at a time per venv (two would build the same folder).
mkdir -p "$(dirname "$venv")"
exec 9>"$venv.lock"
flock 9
if [ -e "$venv" ] && [ ! -L "$venv" ]; then
  die "$venv exists and is not the symlink this script manages; move it away first"
fi
previous=$(readlink "$venv" 2>/dev/null || true)
if [ "$(cat "$build/.complete" 2>/dev/null)" = "$key" ]; then
  [ "$previous" = "$build" ] || switch_to_build
  echo "install-litellm: up to date $venv -> $build"
  exit 0
fi

elapsed() { echo "$(( $(date +%s) - $1 )) s"; }
rm -rf "$build"
mkdir -p "$builds"
t=$(date +%s)
"$python" -m venv "$build"
source_args=()
if [ -n "$wheelhouse" ]; then
  source_args=(--no-index --find-links "$wheelhouse")
else
  source_args=(--index-url "$index_url")
fi
"$build/bin/pip" install -q --disable-pip-version-check --no-cache-dir "${source_args[@]}" \
  "litellm[proxy]==$version" -r "$requirements" >&2
say "venv with litellm[proxy]==$version in $(elapsed "$t")"

# prisma-client-py generates the client from LiteLLM's schema, in the folder that holds it.
t=$(date +%s)
shopt -s nullglob
proxy_dirs=("$build"/lib/python3*/site-packages/litellm/proxy)
shopt -u nullglob
[ "${#proxy_dirs[@]}" -eq 1 ] || die "litellm/proxy not found in $build"
generate_env=(PATH="$build/bin:$PATH" PRISMA_HIDE_UPDATE_MESSAGE=true)
if [ "$engine" = offline ]; then
  # The bundle holds the Prisma CLI (node_modules/prisma) where prisma-client-py looks for its
  # CLI cache, so nothing is downloaded; the schema engine is only asked for --version.
  generate_env+=(PRISMA_BINARY_CACHE_DIR="$bundle" PRISMA_USE_NODEJS_BIN=false
    PRISMA_QUERY_ENGINE_BINARY="$bundle/query-engine"
    PRISMA_SCHEMA_ENGINE_BINARY="$bundle/schema-engine"
    PRISMA_ENGINES_CHECKSUM_IGNORE_MISSING=1)
fi
(cd "${proxy_dirs[0]}" && env "${generate_env[@]}" "$build/bin/prisma" generate >&2)
say "prisma generate in $(elapsed "$t")"

echo "$key" > "$build/.complete"
switch_to_build
echo "install-litellm: installed $venv -> $build"
