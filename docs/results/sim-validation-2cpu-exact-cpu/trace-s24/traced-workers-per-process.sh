#!/bin/bash
# Two lab-workers of the ignorant pool (2 workers each), each in a v1 cpu cgroup of its own (as
# lab neighbours --setting per-process does), 90 % load, exact-CPU items, under a scheduler trace.
# Usage: traced-workers-per-process.sh POOL LOAD (run in an empty scratch folder). With
# SAMPLE_WEIGHTS=1 (debugfs mounted at /sys/kernel/debug), sample_group_weights.py records each
# cgroup's per-CPU group entity every 2 ms meanwhile (group-weights.tsv).
set -u
POOL=${1:-ignorant}
LOAD=${2:-0.9}
B=/work/main/target/release/cotenant
CGS="/sys/fs/cgroup/cpu/cotenant-trace-1 /sys/fs/cgroup/cpu/cotenant-trace-2"
for cg in $CGS; do mkdir $cg || exit 1; done
cleanup() { for cg in $CGS; do for p in $(cat $cg/cgroup.procs 2>/dev/null); do kill -9 $p; done; done; sleep 0.2; for cg in $CGS; do rmdir $cg 2>/dev/null; done; }
trap cleanup EXIT INT TERM HUP
perf record -k CLOCK_MONOTONIC -e sched:sched_switch -e sched:sched_wakeup -e sched:sched_migrate_task -e sched:sched_wakeup_new -a -o perf.data -- sleep 16 > perf.log 2>&1 &
PERF=$!
sleep 1
T=$(( $(date +%s%N) + 2000000000 ))
python3 -c "import time; print(time.clock_gettime_ns(time.CLOCK_REALTIME)-time.clock_gettime_ns(time.CLOCK_MONOTONIC))" > realtime_minus_monotonic_ns
echo $T > start_at_ns
if [ -n "${SAMPLE_WEIGHTS:-}" ]; then
  python3 "$(dirname "$0")/sample_group_weights.py" 0.002 group-weights.tsv &
  SAMPLER=$!
fi
i=0
WORKERS=""
for cg in $CGS; do
  i=$((i+1))
  bash -c "echo \$\$ > $cg/cgroup.procs && exec $B lab-worker --pool $POOL --processes 2 --load $LOAD --service-ms 5 --duration-ms 10000 --start-at-ns $T --parent $$ --items --exact-cpu --seed $i" > worker-$i.json 2> worker-$i.err &
  WORKERS="$WORKERS $!"
done
wait $WORKERS
[ -n "${SAMPLER:-}" ] && kill $SAMPLER
wait $PERF
