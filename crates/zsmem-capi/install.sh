#!/usr/bin/env bash
# Install the zsmem C API under PREFIX: include/zsmem.h, lib/libzsmem.a,
# lib/libzsmem.so.0.1.0 (SONAME libzsmem.so.0) with the links
# libzsmem.so.0 and libzsmem.so, and lib/pkgconfig/zsmem.pc.
#
#   cargo build --release -p zsmem-capi
#   crates/zsmem-capi/install.sh /usr/local            # or any prefix
#   cc app.c $(pkg-config --cflags --libs zsmem)
#   crates/zsmem-capi/uninstall.sh /usr/local          # removes it again
#
# The installed libraries are stripped of debug information and local
# symbols. zsmem.pc's Libs carry an rpath to PREFIX/lib, so a program built
# through pkg-config runs without LD_LIBRARY_PATH from any prefix; under
# /usr or /usr/local (as root) ldconfig is run as well.
#
# The libraries are taken from BUILD_DIR (second argument), by default
# $CARGO_TARGET_DIR/release, or target/release of the workspace.
set -euo pipefail

if [[ $# -lt 1 || $# -gt 2 ]]; then
  echo "usage: $0 PREFIX [BUILD_DIR]" >&2
  exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
prefix=$(realpath -m "$1")
build=${2:-${CARGO_TARGET_DIR:-$root/target}/release}

for lib in libzsmem.a libzsmem.so; do
  if [[ ! -f $build/$lib ]]; then
    echo "$build/$lib not found: build it first (cargo build --release -p zsmem-capi)" >&2
    exit 1
  fi
done
# The workspace's version (the first `version =` is [workspace.package]'s).
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$root/Cargo.toml" | head -n 1)
major=${version%%.*}
lib=$prefix/lib

install -d "$prefix/include" "$lib/pkgconfig"
install -m 644 "$here/include/zsmem.h" "$prefix/include/zsmem.h"
install -m 644 "$build/libzsmem.a" "$lib/libzsmem.a"
install -m 755 "$build/libzsmem.so" "$lib/libzsmem.so.$version"
if command -v strip >/dev/null 2>&1; then
  strip --strip-unneeded "$lib/libzsmem.so.$version"
  # Debug information only: the archive's symbols are what links.
  strip --strip-debug "$lib/libzsmem.a"
else
  echo "strip not found: the installed libraries keep their debug information" >&2
fi
ln -sfn "libzsmem.so.$version" "$lib/libzsmem.so.$major"
ln -sfn "libzsmem.so.$major" "$lib/libzsmem.so"
sed -e "s|@PREFIX@|$prefix|" -e "s|@VERSION@|$version|" "$here/zsmem.pc.in" \
  >"$lib/pkgconfig/zsmem.pc"
case "$prefix" in
  /usr | /usr/local)
    if [[ $(id -u) == 0 ]] && command -v ldconfig >/dev/null 2>&1; then
      ldconfig
    fi
    ;;
esac
echo "installed zsmem $version C API under $prefix"
