#!/bin/sh
# `make install-check`: what a C programmer does with an installed cotenant. Installs into a fresh
# temporary prefix (`make install PREFIX=...`), checks the files and the SONAME links, builds
# examples/c/example.c with the flags `pkg-config --cflags --libs cotenant` gives for that
# prefix, runs it against the installed shared library, and runs the installed command with the
# installed preload shim. Then installs again staged under DESTDIR and checks the same files
# come out, with a .pc naming the final prefix. Removes everything it made on every exit path.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
MAKE=${MAKE:-make}
CC=${CC:-gcc}
PKG_CONFIG=${PKG_CONFIG:-pkg-config}
CFLAGS="-std=c11 -O2 -Wall -Wextra -Werror -pedantic"

fail() {
    echo "install-check: $*" >&2
    exit 1
}

command -v "$CC" >/dev/null 2>&1 || { echo "install-check: SKIPPED: no C compiler ($CC not found)"; exit 0; }
command -v "$PKG_CONFIG" >/dev/null 2>&1 ||
    fail "$PKG_CONFIG not found: install pkg-config (Debian and Ubuntu: apt-get install pkg-config)"

scratch=$(mktemp -d)
# EXIT covers every ending, the signals included: their traps exit, which runs it.
trap 'rm -rf "$scratch"' EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

prefix="$scratch/prefix"
"$MAKE" -C "$root" --no-print-directory install PREFIX="$prefix"

export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
version=$("$PKG_CONFIG" --modversion cotenant) || fail "pkg-config does not find cotenant in $PKG_CONFIG_PATH"
major=${version%%.*}
# The SONAME's version: the major version, or 0.<minor> before 1.0 (build.rs).
case $major in 0) abi=${version%.*} ;; *) abi=$major ;; esac
abi_re=$(printf '%s' "$abi" | sed 's/\./\\./g')
lib="$prefix/lib"
for f in bin/cotenant "lib/libcotenant_ffi.so.$version" lib/libcotenant_ffi.a \
    lib/cotenant/libcotenant_preload.so include/cotenant.h lib/pkgconfig/cotenant.pc \
    share/man/man1/cotenant.1 share/bash-completion/completions/cotenant \
    share/zsh/site-functions/_cotenant share/fish/vendor_completions.d/cotenant.fish; do
    [ -f "$prefix/$f" ] && [ ! -L "$prefix/$f" ] || fail "$prefix/$f is not an installed file"
done
[ "$(readlink "$lib/libcotenant_ffi.so.$abi")" = "libcotenant_ffi.so.$version" ] ||
    fail "$lib/libcotenant_ffi.so.$abi does not link to libcotenant_ffi.so.$version"
[ "$(readlink "$lib/libcotenant_ffi.so")" = "libcotenant_ffi.so.$abi" ] ||
    fail "$lib/libcotenant_ffi.so does not link to libcotenant_ffi.so.$abi"

# The C example, as its users would build it.
flags=$("$PKG_CONFIG" --cflags --libs cotenant)
echo "install-check: pkg-config --cflags --libs cotenant: $flags"
# shellcheck disable=SC2086 # the flags are words
"$CC" $CFLAGS "$root/examples/c/example.c" $flags -o "$scratch/example"
if command -v readelf >/dev/null 2>&1; then
    readelf -d "$lib/libcotenant_ffi.so.$version" | grep -q "(SONAME).*\[libcotenant_ffi\.so\.$abi_re\]" ||
        fail "$lib/libcotenant_ffi.so.$version does not have the SONAME libcotenant_ffi.so.$abi"
fi
LD_LIBRARY_PATH="$lib" ldd "$scratch/example" | grep -q "libcotenant_ffi\.so\.$abi_re => $lib/" ||
    fail "the example does not load $lib/libcotenant_ffi.so.$abi"
LD_LIBRARY_PATH="$lib" "$scratch/example"

# The installed command finds the installed shim (bin/../lib/cotenant).
"$prefix/bin/cotenant" run --preload -- true || fail "$prefix/bin/cotenant run --preload failed"

# A staged install (packagers): the same files under DESTDIR, naming the final prefix.
stage="$scratch/stage"
final=/opt/cotenant-install-check
"$MAKE" -C "$root" --no-print-directory install PREFIX="$final" DESTDIR="$stage"
(cd "$prefix" && find . | sort) >"$scratch/prefix.list"
(cd "$stage$final" && find . | sort) >"$scratch/stage.list"
cmp -s "$scratch/prefix.list" "$scratch/stage.list" ||
    fail "a DESTDIR install lays out other files: $(diff "$scratch/prefix.list" "$scratch/stage.list" | tr '\n' ' ')"
grep -qx "prefix=$final" "$stage$final/lib/pkgconfig/cotenant.pc" ||
    fail "the staged cotenant.pc does not name the prefix $final"

echo "install-check: installed $version into a temporary prefix; the C example built with pkg-config passed"
