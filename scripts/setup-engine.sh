#!/usr/bin/env bash
# Prints a folder holding a Pulumi engine for this project, building it first if needed.
#
# A `pulumi` already on PATH at a recent enough version is used as it is. Otherwise the CLI
# (module github.com/pulumi/pulumi/pkg/v3) and the Python language host (engine/pulumi-language-python,
# built against sdk/v3 because the upstream host module is not served here) are built with the
# ordinary `go` client, and cached by content under $SPEAR_CACHE/engine, so a second run is instant.
# Progress goes to stderr; the folder is the only line on stdout.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${SPEAR_CACHE:-$HOME/.cache/spear-fleet}
pulumi_version=3.274.1
# The Python SDK in requirements.txt must not be newer than the engine that runs it.
min_version=$(sed -n 's/^pulumi==//p' "$repo/requirements.txt")

say() { echo "setup-engine: $*" >&2; }

version_at_least() { # $1 >= $2, both x.y.z
  [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -n1)" = "$2" ]
}

if existing=$(command -v pulumi 2>/dev/null) && [[ $existing != "$cache"/* ]]; then
  have=$(pulumi version 2>/dev/null | sed 's/^v//')
  if version_at_least "$have" "$min_version"; then
    say "using the pulumi $have already on PATH ($existing)"
    dirname "$existing"
    exit 0
  fi
  say "pulumi $have on PATH is older than $min_version; building $pulumi_version for this project"
fi

command -v go >/dev/null || { say "needs Go (https://go.dev/dl) to build the Pulumi engine"; exit 1; }

content_key() { # short sha256 over the named files plus extra words
  { cat "$@"; echo "$pulumi_version $(go env GOVERSION)"; } | sha256sum | cut -c1-16
}

build_once() { # $1 output binary, $2 package, then `go build` flags; renamed into place when done
  local out=$1 pkg=$2; shift 2
  [ -x "$out" ] && return 0
  mkdir -p "$(dirname "$out")"
  say "building $(basename "$out") (first time only; several minutes on 2 cores)"
  local started=$SECONDS
  go build "$@" -o "$out.tmp.$$" "$pkg"
  mv "$out.tmp.$$" "$out"
  say "built $(basename "$out") in $((SECONDS - started)) s"
}

export CGO_ENABLED=0 GOFLAGS=-mod=readonly
cli_dir=$repo/engine/pulumi-cli
host_dir=$repo/engine/pulumi-language-python
cli=$cache/engine/cli-$(content_key "$cli_dir"/go.mod "$cli_dir"/go.sum)/pulumi
host=$cache/engine/langhost-$(content_key "$host_dir"/go.mod "$host_dir"/go.sum "$host_dir"/main.go)/pulumi-language-python

(cd "$cli_dir" && build_once "$cli" github.com/pulumi/pulumi/pkg/v3/cmd/pulumi \
  -trimpath -tags osusergo,grpcnotrace \
  -ldflags "-X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=v$pulumi_version")
(cd "$host_dir" && build_once "$host" . -trimpath -ldflags "-X main.version=$pulumi_version")

# One folder on PATH. Hard links, not symlinks: the CLI and the host look beside their own
# resolved path for the language host and the exec script.
bin=$cache/engine/bin-$(echo "$cli $host" | sha256sum | cut -c1-16)
if [ ! -x "$bin/pulumi-language-python-exec" ]; then
  sdk=$(cd "$cli_dir" && go list -m -f '{{.Dir}}' github.com/pulumi/pulumi/sdk/v3)
  mkdir -p "$bin.tmp.$$"
  ln -f "$cli" "$bin.tmp.$$/pulumi"
  ln -f "$host" "$bin.tmp.$$/pulumi-language-python"
  # The release ships these two scripts from sdk/v3 next to the language host.
  install -m 0755 "$sdk/python/cmd/pulumi-language-python-exec" "$bin.tmp.$$/"
  install -m 0755 "$sdk/python/dist/pulumi-resource-pulumi-python" "$bin.tmp.$$/"
  rm -rf "$bin" && mv "$bin.tmp.$$" "$bin"
fi
echo "$bin"
