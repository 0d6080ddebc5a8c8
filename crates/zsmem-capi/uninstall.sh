#!/usr/bin/env bash
# Remove what install.sh put under PREFIX: include/zsmem.h, lib/libzsmem.a,
# lib/libzsmem.so.<version> with the links libzsmem.so.<major> and
# libzsmem.so, and lib/pkgconfig/zsmem.pc.
#
#   crates/zsmem-capi/uninstall.sh /usr/local          # the PREFIX given to install.sh
#
# Only zsmem's files go: the versions are read from PREFIX's zsmem.pc (so
# a library installed by an older checkout goes too), a link is removed
# only if it points at a libzsmem file, and nothing else in PREFIX is
# touched (directories stay, even if empty). Without a zsmem.pc in PREFIX
# it removes nothing and says so. Under /usr or /usr/local (as root)
# ldconfig is run afterwards, as install.sh does.
set -euo pipefail

if [[ $# -ne 1 ]]; then
  echo "usage: $0 PREFIX" >&2
  exit 2
fi
prefix=$(realpath -m "$1")
lib=$prefix/lib
pc=$lib/pkgconfig/zsmem.pc

if [[ ! -f $pc ]] || ! grep -q '^Name: zsmem$' "$pc"; then
  echo "no zsmem installed under $prefix ($pc is not zsmem's): nothing removed" >&2
  exit 1
fi
version=$(sed -n 's/^Version: //p' "$pc")
major=${version%%.*}

removed=0
remove() {
  if [[ -e $1 || -L $1 ]]; then
    rm -f -- "$1"
    removed=$((removed + 1))
  fi
}
# A link goes only if it names a libzsmem file.
remove_link() {
  if [[ -L $1 ]]; then
    case $(readlink -- "$1") in
      libzsmem.so*) remove "$1" ;;
      *) echo "left $1: it does not point at a libzsmem file" >&2 ;;
    esac
  elif [[ -e $1 ]]; then
    echo "left $1: not a link as install.sh makes it" >&2
  fi
}

remove_link "$lib/libzsmem.so"
remove_link "$lib/libzsmem.so.$major"
remove "$lib/libzsmem.so.$version"
remove "$lib/libzsmem.a"
if [[ -f $prefix/include/zsmem.h ]] && grep -q 'zsmem_pool_new' "$prefix/include/zsmem.h"; then
  remove "$prefix/include/zsmem.h"
fi
remove "$pc"
case "$prefix" in
  /usr | /usr/local)
    if [[ $(id -u) == 0 ]] && command -v ldconfig >/dev/null 2>&1; then
      ldconfig
    fi
    ;;
esac
echo "removed zsmem $version C API from $prefix ($removed files)"
