#!/usr/bin/env bash
# Build libzsmem with cargo, then build and run the C tests, the
# multi-threaded store stress (stress_store.c, bounded by operation count:
# ZSMEM_STRESS_OPS per writer thread, default 20000) and the example
# three ways: against libzsmem.a, against libzsmem.so, and against an
# install into a temporary prefix found through pkg-config; and a test
# built against each earlier header in old-headers/ run against today's
# libzsmem.so. With valgrind installed, the tests and the example run under
# it too (memcheck; a definite leak or a memory error fails).
#
#   crates/zsmem-capi/c/run-tests.sh [--release]
#
# Honours CARGO_TARGET_DIR (default: the workspace's target/) and CC;
# ZSMEM_NO_VALGRIND=1 skips the valgrind runs.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
profile=debug
cargo_flags=(--locked)
case "${1:-}" in
  "") ;;
  --release) profile=release; cargo_flags+=(--release) ;;
  *) echo "usage: $0 [--release]" >&2; exit 2 ;;
esac
target=${CARGO_TARGET_DIR:-$root/target}
case "$target" in /*) ;; *) target=$root/$target ;; esac
libdir=$target/$profile
out=$target/zsmem-capi-c/$profile

echo "-- cargo build -p zsmem-capi (${profile})"
(cd "$root" && cargo build -p zsmem-capi "${cargo_flags[@]}")

# libzsmem.so's SONAME is libzsmem.so.0: give the shared builds that name
# next to cargo's output, as install.sh does in a prefix.
ln -sfn libzsmem.so "$libdir/libzsmem.so.0"

echo "-- building the C tests and example (static and shared), and against each earlier header"
make -s -C "$here" LIBDIR="$libdir" OUT="$out" static shared old-headers
old_headers=()
for h in "$here"/old-headers/*/zsmem.h; do
  old_headers+=("$out/test_old_header-$(basename "$(dirname "$h")")")
done

failed=0
run() {
  echo "-- $*"
  if ! "$@"; then
    echo "FAILED: $*" >&2
    failed=1
  fi
}

run "$out/test_zsmem-static"
run "$out/test_zsmem-shared"
run "$out/test_region-static"
run "$out/test_region-shared"
run "$out/example-static" >/dev/null
run "$out/example-shared"
# Writes, reads, discards, compaction, idle marking, recompression and
# writeback at once, every byte checked; bounded by operation count.
run "$out/stress_store-static"
run env ZSMEM_STRESS_THREADS=8 ZSMEM_STRESS_OPS=5000 "$out/stress_store-shared"
# Memory back after destroy (natively only: valgrind's malloc has no malloc_trim).
run "$out/test_destroy_memory-static"
# Programs built against an older header, run against today's library.
for t in "${old_headers[@]}"; do
  run "$t"
done

# The static build must not need the shared library.
if readelf -d "$out/test_zsmem-static" | grep -q 'NEEDED.*libzsmem'; then
  echo "FAILED: test_zsmem-static needs libzsmem.so" >&2
  failed=1
fi

echo "-- install.sh into a temporary prefix, then build through pkg-config"
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
"$here/../install.sh" "$prefix" "$libdir"
if command -v pkg-config >/dev/null 2>&1; then
  export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
  want=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$root/Cargo.toml" | head -n 1)
  got=$(pkg-config --modversion zsmem)
  if [[ $got != "$want" ]]; then
    echo "FAILED: pkg-config says zsmem $got, the workspace is $want" >&2
    failed=1
  fi
  # A clean environment: only pkg-config and PKG_CONFIG_PATH, no
  # LD_LIBRARY_PATH; the installed library is found through the rpath the
  # .pc file's Libs give.
  env -u LD_LIBRARY_PATH make -s -C "$here" OUT="$out" pkgconfig
  run env -u LD_LIBRARY_PATH "$out/test_zsmem-pkgconfig"
  run env -u LD_LIBRARY_PATH "$out/example-pkgconfig" >/dev/null
  if ! readelf -d "$out/example-pkgconfig" | grep -q "R.*PATH.*$prefix/lib"; then
    echo "FAILED: the pkg-config build does not use the installed library" >&2
    failed=1
  fi
  if ! readelf -d "$out/example-pkgconfig" | grep -q 'NEEDED.*\[libzsmem\.so\.0\]'; then
    echo "FAILED: the pkg-config build does not record the SONAME libzsmem.so.0" >&2
    failed=1
  fi
  for f in libzsmem.so libzsmem.so.0; do
    if [[ ! -L $prefix/lib/$f ]]; then
      echo "FAILED: install.sh made no link $f" >&2
      failed=1
    fi
  done
  if readelf -S "$prefix/lib/libzsmem.so.0."* | grep -q '\.debug_info'; then
    echo "FAILED: the installed libzsmem.so is not stripped" >&2
    failed=1
  fi
else
  echo "skipping the pkg-config build: pkg-config is not installed"
fi

echo "-- uninstall.sh removes exactly what install.sh put there"
touch "$prefix/lib/not-ours" "$prefix/include/not-ours.h"
"$here/../uninstall.sh" "$prefix" >/dev/null
left=$(cd "$prefix" && find . -type f -o -type l | sort | tr '\n' ' ')
if [[ $left != "./include/not-ours.h ./lib/not-ours " ]]; then
  echo "FAILED: after uninstall.sh the prefix holds: $left" >&2
  failed=1
fi
if "$here/../uninstall.sh" "$prefix" 2>/dev/null; then
  echo "FAILED: uninstall.sh of an empty prefix did not refuse" >&2
  failed=1
fi

if [[ ${ZSMEM_NO_VALGRIND:-0} != 1 ]] && command -v valgrind >/dev/null 2>&1; then
  # Definite leaks are errors. "Possibly lost" is not shown: the page
  # returner thread (zsmem-return) lingers a second after its last work, so
  # a program that exits sooner leaves its thread-local block "possibly lost".
  # Fair scheduling: valgrind runs threads one at a time, and by default a
  # thread that makes no system call keeps running (destroy_while_in_use's
  # racers, storing without a pause, starved the thread that waits to
  # destroy the pool for over 10 minutes).
  vg=(valgrind -q --fair-sched=yes --error-exitcode=99 --leak-check=full
    --errors-for-leak-kinds=definite --show-possibly-lost=no)
  # Fewer operations per thread: valgrind runs threads one at a time.
  run env ZSMEM_TEST_OPS=3000 "${vg[@]}" "$out/test_zsmem-shared"
  run env ZSMEM_STRESS_OPS=1500 "${vg[@]}" "$out/stress_store-shared"
  run "${vg[@]}" "$out/example-static" >/dev/null
  for t in "${old_headers[@]}"; do
    run "${vg[@]}" "$t" >/dev/null
  done
else
  echo "skipping valgrind: not installed (or ZSMEM_NO_VALGRIND=1)"
fi

if [[ $failed != 0 ]]; then
  echo "C API tests FAILED" >&2
  exit 1
fi
echo "C API tests passed"
