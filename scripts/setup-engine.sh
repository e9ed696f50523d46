#!/usr/bin/env bash
# Prints a folder holding a Pulumi engine for this project, building it first if needed, and makes
# sure the engine has what it runs this project with: the `command` provider plugin (pulumi-command
# in requirements.txt), and the policy pack's virtualenv.
#
# A `pulumi` already on PATH at a recent enough version is used as it is. Otherwise the CLI (module
# github.com/pulumi/pulumi/pkg/v3, every module pinned by engine/pulumi-cli) and the upstream Python
# language host (engine/pulumi-language-python pins its modules) are built with the ordinary `go`
# client. The Go module proxy refuses the module paths of the upstream host and of the command
# provider, so their sources come from a folder laid out like ../shared/upstream:
# $SPEAR_UPSTREAM_SRC, else <repo>/../shared/upstream, else a git clone at the commits below (kept
# in $SPEAR_CACHE/upstream). Builds are cached by content under $SPEAR_CACHE/engine, so a second run
# is instant.
# Progress goes to stderr; the folder is the only line on stdout.
set -euo pipefail
shopt -s inherit_errexit # a failure inside $(...) stops the script too

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${SPEAR_CACHE:-$HOME/.cache/spear-fleet}
pulumi_version=3.274.1
command_version=1.2.1
# The upstream sources built here. github.com/pulumi/pulumi: sdk/python/cmd/pulumi-language-python;
# github.com/pulumi/pulumi-command (tag v1.2.1): provider/.
pulumi_commit=1b5949891b3cefcb9974752b24a5ecef0acc86c8
command_commit=7f3eb6f3b77cd0fa3895ba437a695dd393f7dd25
# The Python SDK in requirements.txt must not be newer than the engine that runs it.
min_version=$(sed -n 's/^pulumi==//p' "$repo/requirements.txt")
# Where the CLI keeps installed plugins; a .partial file beside it marks an unfinished install.
# Named, because without PULUMI_HOME the CLI takes the account's home from the password database,
# not $HOME: under another HOME it installed where this check never looked, and every source of
# env.sh installed the plugin again (a cold run with a new HOME, 2026-12-06).
export PULUMI_HOME=${PULUMI_HOME:-$HOME/.pulumi}
command_plugin=$PULUMI_HOME/plugins/resource-command-v$command_version

say() { echo "setup-engine: $*" >&2; }

version_at_least() { # $1 >= $2, both x.y.z
  [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -n1)" = "$2" ]
}

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

clone_folder() { # $1 repository URL, $2 commit, $3 folder in it, $4 where to put that folder
  local checkout=$scratch/clone
  rm -rf "$checkout"
  git init -q "$checkout"
  git -C "$checkout" remote add origin "$1"
  # Only that commit, and only the blobs of that folder.
  git -C "$checkout" fetch -q --depth 1 --filter=blob:none origin "$2"
  git -C "$checkout" sparse-checkout set "$3"
  git -C "$checkout" checkout -q FETCH_HEAD
  mkdir -p "$(dirname "$4")"
  mv "$checkout/$3" "$4"
}

upstream_src() { # prints the folder holding the upstream sources
  if [ -n "${SPEAR_UPSTREAM_SRC:-}" ]; then
    (cd "$SPEAR_UPSTREAM_SRC" && pwd)
  elif [ -d "$repo/../shared/upstream" ]; then
    (cd "$repo/../shared/upstream" && pwd)
  else
    local src=$cache/upstream/pulumi-${pulumi_commit:0:12}-command-${command_commit:0:12}
    if [ ! -d "$src" ]; then
      say "cloning the upstream language host and command provider (first time only)"
      clone_folder https://github.com/pulumi/pulumi.git "$pulumi_commit" \
        sdk/python/cmd/pulumi-language-python "$scratch/upstream/pulumi-language-python"
      clone_folder https://github.com/pulumi/pulumi-command.git "$command_commit" \
        provider "$scratch/upstream/pulumi-command/provider"
      mkdir -p "$(dirname "$src")"
      mv "$scratch/upstream" "$src.tmp.$$" # then renamed: a folder at $src is complete
      mv "$src.tmp.$$" "$src"
    fi
    echo "$src"
  fi
}

need_go() {
  command -v go >/dev/null || { say "needs Go (https://go.dev/dl) to build $1"; exit 1; }
  set -a
  # shellcheck source=engine/go-build.env
  source "$repo/engine/go-build.env"
  set +a
  go_version=$(go env GOVERSION)
}

content_key() { # short sha256 over the named files plus the version stamped into the build
  local stamp=$1; shift
  { cat "$@" "$repo/engine/go-build.env"; echo "$stamp $go_version"; } | sha256sum | cut -c1-16
}

build_once() { # $1 output binary, $2 module folder, $3 package, then `go build` flags
  local out=$1 dir=$2 pkg=$3; shift 3
  mkdir -p "$(dirname "$out")"
  say "building $(basename "$out") (first time only; minutes on 2 cores)"
  local started=$SECONDS said=$SECONDS
  (cd "$dir" && go build "$@" -o "$out.tmp.$$" "$pkg") &
  local build=$!
  # A minute of silence reads as a hang: say it is still building.
  while kill -0 "$build" 2>/dev/null; do
    sleep 2
    if ((SECONDS - said >= 60)); then
      said=$SECONDS
      say "still building $(basename "$out") ($(((SECONDS - started) / 60)) min)"
    fi
  done
  wait "$build"
  mv "$out.tmp.$$" "$out" # complete binaries only
  say "built $(basename "$out") in $((SECONDS - started)) s"
}

build_engine() { # prints the folder holding the CLI, the language host and the host's two scripts
  need_go "the Pulumi engine"
  local src cli_dir=$repo/engine/pulumi-cli host_dir=$repo/engine/pulumi-language-python
  src=$(upstream_src)
  local host_main=$src/pulumi-language-python/main.go
  [ -f "$host_main" ] || { say "no upstream language host source at $host_main"; exit 1; }
  local host_version=v$pulumi_version+upstream.${pulumi_commit:0:7}
  local cli host
  cli=$cache/engine/cli-$(content_key "$pulumi_version" "$cli_dir"/go.mod "$cli_dir"/go.sum)/pulumi
  host=$cache/engine/langhost-$(content_key "$host_version" \
    "$host_dir"/go.mod "$host_dir"/go.sum "$host_main")/pulumi-language-python

  [ -x "$cli" ] || build_once "$cli" "$cli_dir" github.com/pulumi/pulumi/pkg/v3/cmd/pulumi \
    -ldflags "-X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=v$pulumi_version"
  if [ ! -x "$host" ]; then
    # The upstream main.go, built as its own module against the CLI's pkg/sdk version.
    mkdir "$scratch/langhost"
    cp "$host_dir/go.mod" "$host_dir/go.sum" "$host_main" "$scratch/langhost/"
    build_once "$host" "$scratch/langhost" . \
      -ldflags "-X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$host_version"
  fi

  # One folder on PATH, as in a release. Hard links, not symlinks: the CLI and the host look
  # beside their own resolved path for the language host and the exec script.
  local bin
  bin=$cache/engine/bin-$(echo "$cli $host" | sha256sum | cut -c1-16)
  if [ ! -x "$bin/pulumi-language-python-exec" ]; then
    local sdk
    sdk=$(cd "$host_dir" && go list -m -f '{{.Dir}}' github.com/pulumi/pulumi/sdk/v3)
    mkdir -p "$bin.tmp.$$"
    ln -f "$cli" "$bin.tmp.$$/pulumi"
    ln -f "$host" "$bin.tmp.$$/pulumi-language-python"
    # The release ships these two scripts from sdk/v3 next to the language host.
    install -m 0755 "$sdk/python/cmd/pulumi-language-python-exec" "$bin.tmp.$$/"
    install -m 0755 "$sdk/python/dist/pulumi-resource-pulumi-python" "$bin.tmp.$$/"
    rm -rf "$bin" && mv "$bin.tmp.$$" "$bin"
  fi
  echo "$bin"
}

install_command_plugin() { # $1 the pulumi binary
  need_go "the command provider plugin"
  local src files provider mod_dir=$repo/engine/pulumi-command
  src=$(upstream_src)/pulumi-command/provider
  [ -f "$src/go.mod" ] || { say "no upstream command provider source at $src"; exit 1; }
  mapfile -t files < <(find "$src" "$mod_dir" -type f | LC_ALL=C sort)
  provider=$cache/engine/command-$(content_key "$command_version" "${files[@]}")
  provider=$provider/pulumi-resource-command
  if [ ! -x "$provider" ]; then
    # Built in a scratch copy, outside any git checkout, so the binary depends on the content only,
    # with engine/pulumi-command's go.mod (the engine's versions) and the patched
    # pulumi-go-provider its replace names (../pulumi-go-provider).
    cp -r "$src" "$scratch/provider"
    cp "$mod_dir/go.mod" "$mod_dir/go.sum" "$scratch/provider/"
    local go_provider=github.com/pulumi/pulumi-go-provider
    go_provider=$go_provider@$(awk -v m="$go_provider" '$1 == m && $2 ~ /^v/ {print $2; exit}' "$mod_dir/go.mod")
    cp -r "$(cd "$scratch" && go mod download -json "$go_provider" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')" \
      "$scratch/pulumi-go-provider"
    chmod -R u+w "$scratch/provider" "$scratch/pulumi-go-provider"
    (cd "$scratch/pulumi-go-provider" && git apply "$mod_dir/go-provider-schema-pointer.patch")
    build_once "$provider" "$scratch/provider" ./cmd/pulumi-resource-command \
      -ldflags "-X github.com/pulumi/pulumi-command/provider/pkg/version.Version=v$command_version"
  fi
  say "installing the command provider plugin v$command_version"
  PULUMI_SKIP_UPDATE_CHECK=true "$1" plugin install resource command "v$command_version" \
    --file "$provider" >&2
}

bin=
if existing=$(command -v pulumi 2>/dev/null) && [[ $existing != "$cache"/* ]]; then
  have=$(pulumi version 2>/dev/null | sed 's/^v//')
  if version_at_least "$have" "$min_version"; then
    say "using the pulumi $have already on PATH ($existing)"
    bin=$(dirname "$existing")
  else
    say "pulumi $have on PATH is older than $min_version; building $pulumi_version for this project"
  fi
fi
[ -n "$bin" ] || bin=$(build_engine)

if [ ! -x "$command_plugin/pulumi-resource-command" ] || [ -e "$command_plugin.partial" ]; then
  install_command_plugin "$bin/pulumi"
fi

# The policy pack's own virtualenv: without it a `--policy-pack policies` preview hangs. Reinstalled
# only when policies/requirements.txt changed.
stamp=$repo/policies/.venv/.requirements.sha256
want=$(sha256sum "$repo/policies/requirements.txt" | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  say "installing the policy pack's virtualenv (policies/.venv)"
  (cd "$repo/policies" && PATH=$bin:$PATH PULUMI_SKIP_UPDATE_CHECK=true pulumi install >&2)
  echo "$want" > "$stamp"
fi
echo "$bin"
