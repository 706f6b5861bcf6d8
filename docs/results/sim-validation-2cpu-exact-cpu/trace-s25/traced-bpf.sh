#!/bin/bash
# As trace-s24/traced-workers-per-process.sh, with the group-entity tracer (gs) instead of perf.
set -u
POOL=${1:-ignorant}
LOAD=${2:-0.9}
B=/work/main/target/release/cotenant
GS=${GS:-./gs}  # built by build-gs.sh
CGS="/sys/fs/cgroup/cpu/cotenant-trace-1 /sys/fs/cgroup/cpu/cotenant-trace-2"
for cg in $CGS; do mkdir $cg || exit 1; done
cleanup() { [ -n "${TR:-}" ] && kill -INT $TR 2>/dev/null; for cg in $CGS; do for p in $(cat $cg/cgroup.procs 2>/dev/null); do kill -9 $p; done; done; sleep 0.2; for cg in $CGS; do rmdir $cg 2>/dev/null; done; }
trap cleanup EXIT INT TERM HUP
$GS > events.tsv 2> gs.err &
TR=$!
sleep 1
T=$(( $(date +%s%N) + 2000000000 ))
python3 -c "import time; print(time.clock_gettime_ns(time.CLOCK_REALTIME)-time.clock_gettime_ns(time.CLOCK_MONOTONIC))" > realtime_minus_monotonic_ns
echo $T > start_at_ns
i=0
WORKERS=""
for cg in $CGS; do
  i=$((i+1))
  bash -c "echo \$\$ > $cg/cgroup.procs && exec $B lab-worker --pool $POOL --processes 2 --load $LOAD --service-ms 5 --duration-ms 10000 --start-at-ns $T --parent $$ --items --exact-cpu --seed $i" > worker-$i.json 2> worker-$i.err &
  WORKERS="$WORKERS $!"
done
wait $WORKERS
kill -INT $TR; wait $TR; TR=
