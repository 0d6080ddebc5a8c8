#!/usr/bin/env bash
# Install the zsmem C API under PREFIX: include/zsmem.h, lib/libzsmem.a,
# lib/libzsmem.so and lib/pkgconfig/zsmem.pc.
#
#   cargo build --release -p zsmem-capi
#   crates/zsmem-capi/install.sh /usr/local            # or any prefix
#   cc app.c $(pkg-config --cflags --libs zsmem)
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

install -d "$prefix/include" "$prefix/lib/pkgconfig"
install -m 644 "$here/include/zsmem.h" "$prefix/include/zsmem.h"
install -m 644 "$build/libzsmem.a" "$prefix/lib/libzsmem.a"
install -m 755 "$build/libzsmem.so" "$prefix/lib/libzsmem.so"
sed -e "s|@PREFIX@|$prefix|" -e "s|@VERSION@|$version|" "$here/zsmem.pc.in" \
  >"$prefix/lib/pkgconfig/zsmem.pc"
echo "installed zsmem $version C API under $prefix"
