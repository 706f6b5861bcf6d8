#!/bin/bash
# As trace-s24/traced-workers-per-process.sh, with the group-entity tracer (gs) instead of perf.
# Usage: traced-bpf.sh [POOL [LOAD]]. Writes events.tsv, gs.err, worker-*.json, start_at_ns and
# realtime_minus_monotonic_ns into a new private folder (printed at the end). COTENANT names
# the cotenant binary (default: cotenant on PATH), GS the tracer (default: ./gs, from
# build-gs.sh). Removes its cgroups and stops its processes on every exit.
set -u
POOL=${1:-ignorant}
LOAD=${2:-0.9}
B=${COTENANT:-cotenant}
GS=$(realpath "${GS:-./gs}")
command -v "$B" > /dev/null || { echo "traced-bpf.sh: no $B (set COTENANT)" >&2; exit 1; }
[ -x "$GS" ] || { echo "traced-bpf.sh: no tracer at $GS (run build-gs.sh)" >&2; exit 1; }
OUT=$(mktemp -d /tmp/cotenant-trace.XXXXXX) || exit 1
cd "$OUT" || exit 1
CREATED=""
TR=""
WORKERS=""
cleanup() {
  [ -n "$TR" ] && kill -INT "$TR" 2>/dev/null && wait "$TR" 2>/dev/null
  for p in $WORKERS; do kill -9 "$p" 2>/dev/null; done
  for cg in $CREATED; do
    for p in $(cat "$cg/cgroup.procs" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
  done
  for cg in $CREATED; do
    for _ in 1 2 3 4 5 6 7 8 9 10; do rmdir "$cg" 2>/dev/null && break; sleep 0.1; done
  done
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
for n in 1 2; do
  cg=/sys/fs/cgroup/cpu/cotenant-trace-$n
  mkdir "$cg" || exit 1
  CREATED="$CREATED $cg"
done
"$GS" > events.tsv 2> gs.err &
TR=$!
for _ in $(seq 50); do grep -q attached gs.err 2>/dev/null && break; sleep 0.1; done
grep -q attached gs.err || { echo "traced-bpf.sh: the tracer did not start: $(cat gs.err)" >&2; exit 1; }
T=$(( $(date +%s%N) + 2000000000 ))
python3 -c "import time; print(time.clock_gettime_ns(time.CLOCK_REALTIME)-time.clock_gettime_ns(time.CLOCK_MONOTONIC))" > realtime_minus_monotonic_ns
echo $T > start_at_ns
i=0
for cg in $CREATED; do
  i=$((i+1))
  bash -c "echo \$\$ > $cg/cgroup.procs && exec $B lab-worker --pool $POOL --processes 2 --load $LOAD --service-ms 5 --duration-ms 10000 --start-at-ns $T --parent $$ --items --exact-cpu --seed $i" > worker-$i.json 2> worker-$i.err &
  WORKERS="$WORKERS $!"
done
wait $WORKERS
WORKERS=""
kill -INT "$TR"; wait "$TR"; TR=""
cat gs.err >&2
echo "$OUT"
