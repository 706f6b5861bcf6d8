#!/bin/bash
# The round-trip sweep behind RESULTS.md "Where the seed's shape holds" (one timing run at a
# time, nothing compiling). Writes OUT/rt-<µs>/spin/{report.md,results.json,...}.
set -eu
out=${1:?usage: sweep.sh OUT}
for rt in 120 160 200 250 300 450; do
  target/release/cotenant lab spin --quick --seconds 9 --repeats 2 --round-trip-us "$rt" --out "$out/rt-$rt" > /dev/null
done
python3 "$(dirname "$0")/summarise.py" $(for rt in 120 160 200 250 300 450; do echo "$rt=$out/rt-$rt"; done)
