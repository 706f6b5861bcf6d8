#!/bin/sh
# Builds and runs the examples (issue 36), one line of verdict per example; part of `make test`
# through `make examples`. Run from anywhere: it works from the repository's root.
#   CARGO  cargo to use (default: cargo)
#   GO     go to use (default: go on the PATH, else /usr/local/go/bin/go; skipped if absent)
set -eu

cd "$(dirname "$0")/.."
CARGO=${CARGO:-cargo}
GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}

"$CARGO" run --locked -q -p cotenant-examples --bin http_service -- --once
echo "examples: Rust HTTP service (examples/rust/src/bin/http_service.rs): ok"

"$CARGO" run --locked -q -p cotenant-examples --bin async_service -- --once
"$CARGO" run --locked -q -p cotenant-examples --bin async_service -- --once --reactor thread
echo "examples: Rust HTTP service on the cotenant executor, tokio's reactor driven by the pool's idle workers and by a thread of its own (examples/rust/src/bin/async_service.rs): ok"

"$CARGO" run --locked -q -p cotenant-examples --bin rayon_sized
echo "examples: Rust rayon pool (examples/rust/src/bin/rayon_sized.rs): ok"

if [ -x "$GO" ]; then
    # As `make go-test` runs the Go package: no downloads, the local toolchain.
    (cd examples/go && GOFLAGS=-mod=mod GOPROXY=off GOTOOLCHAIN=local "$GO" run . -once)
    echo "examples: Go service (examples/go): ok"
else
    echo "examples: Go example SKIPPED: go not found (install Go 1.25 or later, https://go.dev/dl)"
fi

echo "examples: C program (examples/c/example.c): runs in \`make c-abi\` and, through pkg-config, in \`make install-check\`"
