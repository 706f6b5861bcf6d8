#!/bin/bash
# Two arms, one binary: leases pin for the task (as landed) vs. nudge (move, then unpin at once).
set -u
B=/work/main/target/release/cotenant
O=/work/notes/s14/nudge
for round in 1 2; do
  $B lab neighbours --setting one-cgroup --processes 2 --load 0.7 --repeats 5 --seconds 20 --out $O/pin-$round > $O-pin-$round.log 2>&1
  COTENANT_EXP_NUDGE=1 $B lab neighbours --setting one-cgroup --processes 2 --load 0.7 --repeats 5 --seconds 20 --out $O/nudge-$round > $O-nudge-$round.log 2>&1
done
