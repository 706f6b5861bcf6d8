#!/bin/sh
# Builds the C library (release), checks the shared library's SONAME, compiles
# examples/c/example.c against include/cotenant.h with gcc -Wall -Wextra -Werror, once linked
# statically and once against the shared library, and runs both. Exits non-zero if anything
# fails. Called by `make test`; `make install-check` does the same from an installed prefix.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
CARGO=${CARGO:-cargo}
CC=${CC:-gcc}
CFLAGS="-std=c11 -O2 -Wall -Wextra -Werror -pedantic"

command -v "$CC" >/dev/null 2>&1 || { echo "test-c.sh: SKIPPED: no C compiler ($CC not found)"; exit 0; }

cd "$root"
"$CARGO" build --release --locked -p cotenant-ffi
lib=${CARGO_TARGET_DIR:-$root/target}/release
for f in libcotenant_ffi.a libcotenant_ffi.so; do
    [ -f "$lib/$f" ] || { echo "test-c.sh: $lib/$f was not built" >&2; exit 1; }
done

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT INT TERM

# Static: the archive holds Rust's std, which needs these system libraries.
"$CC" $CFLAGS -I "$here/include" examples/c/example.c "$lib/libcotenant_ffi.a" \
    -lpthread -ldl -lm -lrt -o "$out/example-static"
# Shared: -l finds the .so before the .a in the same directory.
"$CC" $CFLAGS -I "$here/include" examples/c/example.c -L "$lib" -lcotenant_ffi -o "$out/example-shared"

# The SONAME (build.rs): the program records it, not the file name it was linked with, so the
# loader looks for libcotenant_ffi.so.<major>; cargo leaves only libcotenant_ffi.so, hence the
# symlink under that name in the scratch directory.
if command -v readelf >/dev/null 2>&1; then
    soname=$(readelf -d "$lib/libcotenant_ffi.so" | sed -n 's/.*(SONAME).*\[\(.*\)\].*/\1/p')
    case "$soname" in
        libcotenant_ffi.so.[0-9]*) ;;
        *) echo "test-c.sh: $lib/libcotenant_ffi.so has SONAME '$soname', expected libcotenant_ffi.so.<major>" >&2; exit 1 ;;
    esac
    if ! readelf -d "$out/example-shared" | grep -q "(NEEDED).*\[$soname\]"; then
        echo "test-c.sh: example-shared does not record $soname as needed" >&2
        exit 1
    fi
else
    echo "test-c.sh: readelf not found: the SONAME is not checked, libcotenant_ffi.so.0 assumed"
    soname=libcotenant_ffi.so.0
fi
ln -s "$lib/libcotenant_ffi.so" "$out/$soname"
if ! LD_LIBRARY_PATH="$out" ldd "$out/example-shared" | grep -q "$soname => $out/"; then
    echo "test-c.sh: example-shared does not load $out/$soname" >&2
    exit 1
fi

echo "== static =="
"$out/example-static"
echo "== shared =="
LD_LIBRARY_PATH="$out${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$out/example-shared"
echo "test-c.sh: the C example passed, static and shared"
