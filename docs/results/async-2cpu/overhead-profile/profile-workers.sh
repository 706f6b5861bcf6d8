#!/bin/bash
# Two lab workers of one kind (70 %, P = 2, exact-CPU items) in one cgroup, under perf record -g.
set -u
KIND=$1
B=/work/main/target/release/cotenant
CG=/sys/fs/cgroup/cpu/cotenant-prof
mkdir $CG || exit 1
trap 'for p in $(cat $CG/cgroup.procs); do kill -9 $p; done; sleep 0.2; rmdir $CG' EXIT INT TERM HUP
T=$(( $(date +%s%N) + 1500000000 ))
for i in 1 2; do
  bash -c "echo \$\$ > $CG/cgroup.procs && exec $B lab-worker --pool $KIND --processes 2 --load 0.7 --service-ms 5 --duration-ms 10000 --start-at-ns $T --parent $$ --exact-cpu --seed 1" > $KIND-$i.json 2> $KIND-$i.err &
done
sleep 1.5
perf record -g -a -o $KIND.data -- sleep 10 > $KIND.perf.log 2>&1
wait %1 %2
