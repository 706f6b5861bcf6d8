#!/bin/bash
# Before (1dbf2e6: leases pin for the hold) and after (move, then unpin) alternated, two runs each.
set -u
P=cotenant-adaptive,cotenant-tokens,cotenant-tokens-noleases
for i in 1 2; do
  /work/notes/s14/before-target/release/pool-bench --rounds 5 --peers $P > /work/notes/s14/bench-before-$i.md 2>&1
  /work/main/target/release/pool-bench --rounds 5 --peers $P > /work/notes/s14/bench-after-$i.md 2>&1
done
