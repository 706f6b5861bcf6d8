#!/bin/sh
# `cargo install` alone gives a complete tool: installs the CLI into a fresh temporary root and
# checks that `cotenant run --preload` makes a program inside a 0.5-CPU cgroup see 1 CPU (the
# shim comes out of the binary into a private cache; nothing else is installed). Needs root for
# the cgroup (skips, saying so, otherwise) and python3. Removes the root and the cgroup on every
# exit path. Reuses the workspace's target folder so the release build is shared with `make
# install-check`.
set -eu
CARGO=${CARGO:-cargo}
command -v python3 >/dev/null || { echo "cargo-install-check: SKIPPED: python3 not found"; exit 0; }
[ "$(id -u)" -eq 0 ] || { echo "cargo-install-check: SKIPPED: not root: cannot create a cgroup"; exit 0; }

if grep -qw cpu /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
    parent=/sys/fs/cgroup; version=2
elif [ -f /sys/fs/cgroup/cpu/cpu.cfs_quota_us ]; then
    parent=/sys/fs/cgroup/cpu; version=1
else
    echo "cargo-install-check: SKIPPED: no cgroup with the cpu controller"; exit 0
fi

root=$(mktemp -d)
cgroup=""
cleanup() {
    if [ -n "$cgroup" ] && [ -d "$cgroup" ]; then
        # Move anything left back to the parent before removing the cgroup.
        while read -r pid; do echo "$pid" > "$parent/cgroup.procs" 2>/dev/null || true; done < "$cgroup/cgroup.procs"
        rmdir "$cgroup" 2>/dev/null || true
    fi
    rm -rf "$root"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$(pwd)/target} "$CARGO" install --locked --quiet \
    --path crates/cotenant-cli --root "$root/install"
if [ "$version" = 2 ]; then
    # A child gets cpu.max only if the parent delegates the cpu controller to its children.
    grep -qw cpu "$parent/cgroup.subtree_control" 2>/dev/null ||
        echo +cpu > "$parent/cgroup.subtree_control" 2>/dev/null || true
fi
cgroup=$(mktemp -d "$parent/cotenant-install-check-XXXXXX")
if [ "$version" = 2 ]; then
    [ -f "$cgroup/cpu.max" ] ||
        { echo "cargo-install-check: SKIPPED: the cpu controller is not enabled below $parent"; exit 0; }
    echo "50000 100000" > "$cgroup/cpu.max"
else
    echo 100000 > "$cgroup/cpu.cfs_period_us"
    echo 50000 > "$cgroup/cpu.cfs_quota_us"
fi
# Nothing of the build tree on the way: an empty cache folder and only the installed binary.
got=$(env -i PATH=/usr/bin:/bin XDG_CACHE_HOME="$root/cache" HOME="$root" sh -c \
    'echo $$ > "$1/cgroup.procs" && exec "$2" run --preload -- python3 -c "import os; print(os.cpu_count())"' \
    sh "$cgroup" "$root/install/bin/cotenant")
[ "$got" = 1 ] || { echo "cargo-install-check: FAILED: python3 saw $got CPUs in a 0.5-CPU cgroup, expected 1" >&2; exit 1; }
ls "$root"/cache/cotenant/preload-*/libcotenant_preload.so >/dev/null ||
    { echo "cargo-install-check: FAILED: the built-in shim was not written to the private cache" >&2; exit 1; }
echo "cargo-install-check: after cargo install alone, run --preload in a 0.5-CPU cgroup: os.cpu_count() = 1"
