#!/bin/bash
# The same two workers inside one v1 cpu cgroup (as lab neighbours --setting one-cgroup does).
set -u
B=/work/main/target/release/cotenant
CG=/sys/fs/cgroup/cpu/cotenant-trace
mkdir $CG || exit 1
trap 'for p in $(cat $CG/cgroup.procs); do kill -9 $p; done; sleep 0.2; rmdir $CG' EXIT INT TERM HUP
perf record -k CLOCK_MONOTONIC -e sched:sched_switch -e sched:sched_wakeup -e sched:sched_migrate_task -e sched:sched_wakeup_new -a -o perf.data -- sleep 16 > perf.log 2>&1 &
PERF=$!
sleep 1
T=$(( $(date +%s%N) + 2000000000 ))
python3 -c "import time; print(time.clock_gettime_ns(time.CLOCK_REALTIME)-time.clock_gettime_ns(time.CLOCK_MONOTONIC))" > realtime_minus_monotonic_ns
echo $T > start_at_ns
for i in 1 2; do
  bash -c "echo \$\$ > $CG/cgroup.procs && exec $B lab-worker --pool adaptive --processes 2 --load 0.7 --service-ms 5 --duration-ms 10000 --start-at-ns $T --parent $$ --items --exact-cpu --seed 1" > worker-$i.json 2> worker-$i.err &
done
wait %2 %3
wait $PERF
