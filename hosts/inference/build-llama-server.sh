#!/usr/bin/env bash
# Build llama-server from an unpacked llama.cpp source tree on the inference host.
#
# Usage: build-llama-server.sh BUILD_DIR SRC_SUBDIR -- CMAKE_FLAG...
#
#   BUILD_DIR   <runtime>/builds/<build key>; must already contain src/ (the unpacked source).
#   SRC_SUBDIR  path inside BUILD_DIR/src holding llama.cpp's CMakeLists.txt (may be ".").
#   CMAKE_FLAG  extra flags passed verbatim to the cmake configure step.
#
# Produces BUILD_DIR/{build,bin,version.txt,.complete}. BUILD_DIR/.complete is written last, so
# its presence means bin/ and version.txt are whole; a rerun then does nothing. Callers hold an
# exclusive flock on BUILD_DIR.lock while filling src/ and while running this, so builds of one
# key (from hosts sharing the builds folder, or overlapping deployments) take turns.
set -euo pipefail

log() { printf 'build-llama-server: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

[[ $# -ge 3 && $3 == "--" ]] || die "usage: $0 BUILD_DIR SRC_SUBDIR -- CMAKE_FLAG..."
build_dir=$1
src_subdir=$2
shift 3
cmake_flags=("$@")

[[ -d $build_dir ]] || die "build dir $build_dir does not exist"
if [[ -e $build_dir/.complete ]]; then
    echo "reused $build_dir"
    exit 0
fi
build_dir=$(cd "$build_dir" && pwd -P)

source_dir=$build_dir/src/$src_subdir
[[ -f $source_dir/CMakeLists.txt ]] || die "no CMakeLists.txt in $source_dir"

# llama.cpp builds libllama's model sources as CMake unity files, which #include them by absolute
# path, so their __FILE__ (used by GGML_ASSERT) would embed BUILD_DIR and with it the build key.
# Mapping BUILD_DIR away keeps the binary free of the key and lets ccache share those objects
# between build dirs. CMake uses CFLAGS/CXXFLAGS only as the initial CMAKE_C(XX)_FLAGS, so a
# CMAKE_FLAG setting those replaces this.
export CFLAGS="-fmacro-prefix-map=$build_dir/= ${CFLAGS:-}"
export CXXFLAGS="-fmacro-prefix-map=$build_dir/= ${CXXFLAGS:-}"

# ccache hashes these locale variables (they change compiler messages); fixing them lets builds
# started from different sessions (SSH without a locale, a dev shell with LANG=C.UTF-8) share
# cache entries.
export LANG=C LC_ALL=C LC_CTYPE=C LC_MESSAGES=C

launcher_flags=()
if command -v ccache >/dev/null; then
    # Paths under BUILD_DIR are hashed relative to the compiler's working directory (inside
    # BUILD_DIR/build), so they never contain the build key and another build dir with the same
    # sources hits the cache. Hashing the compiler's content instead of its mtime keeps hits
    # across hosts and compiler reinstalls. CCACHE_DIR, if set by the caller, is left as is.
    export CCACHE_BASEDIR=$build_dir
    export CCACHE_COMPILERCHECK=content
    launcher_flags=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
    log "using ccache (cache dir: $(ccache -k cache_dir))"
else
    log "ccache not found; building without a compiler cache"
fi

log "configuring $source_dir"
# RPATH $ORIGIN lets bin/llama-server find the shared libraries next to it after bin/ is copied.
cmake -S "$source_dir" -B "$build_dir/build" \
    -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_BUILD_RPATH_USE_ORIGIN=ON \
    "${launcher_flags[@]}" \
    "${cmake_flags[@]}" \
    || die "cmake configure failed"

log "building llama-server with $(nproc) jobs"
cmake --build "$build_dir/build" --target llama-server -j"$(nproc)" \
    || die "cmake build failed"

[[ -x $build_dir/build/bin/llama-server ]] || die "build produced no build/bin/llama-server"

# Copy via a temporary folder so an interrupted copy never leaves a half-filled bin/ behind.
rm -rf "${build_dir:?}/bin" "${build_dir:?}/bin.tmp"
cp -a "$build_dir/build/bin" "$build_dir/bin.tmp"
mv "$build_dir/bin.tmp" "$build_dir/bin"

# llama-server prints its version to stderr.
"$build_dir/bin/llama-server" --version >"$build_dir/version.txt" 2>&1 \
    || die "bin/llama-server --version failed: $(cat "$build_dir/version.txt")"

touch "$build_dir/.complete"
log "built $build_dir/bin/llama-server: $(head -n 1 "$build_dir/version.txt")"
