#!/bin/bash
# Landed (a kept token's next task moves back to the leased CPU) vs. not moving back; one binary.
set -u
B=/work/main/target/release/cotenant
O=/work/notes/s14/ab
for round in 1 2; do
  $B lab neighbours --setting one-cgroup --processes 2 --load 0.7 --repeats 5 --seconds 20 --out $O/return-$round > $O-return-$round.log 2>&1
  COTENANT_EXP_NO_RETURN=1 $B lab neighbours --setting one-cgroup --processes 2 --load 0.7 --repeats 5 --seconds 20 --out $O/noreturn-$round > $O-noreturn-$round.log 2>&1
done
