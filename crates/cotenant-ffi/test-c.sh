#!/bin/sh
# Builds the C library (release), compiles examples/c/example.c against include/cotenant.h with
# gcc -Wall -Wextra -Werror, once linked statically and once against the shared library, and
# runs both. Exits non-zero if anything fails. Called by `make test`.
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
if ! ldd "$out/example-shared" | grep -q 'libcotenant_ffi\.so'; then
    echo "test-c.sh: example-shared is not linked against libcotenant_ffi.so" >&2
    exit 1
fi

echo "== static =="
"$out/example-static"
echo "== shared =="
LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$out/example-shared"
echo "test-c.sh: the C example passed, static and shared"
