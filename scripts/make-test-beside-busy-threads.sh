#!/bin/bash
# Runs `make test` N times in a row (default 5) while two shell loops keep two CPUs busy: the
# robustness check of issue 34 ("5 green in a row beside 2 busy threads"). Run it from a clean
# clone, on an otherwise quiet host. Logs go to LOGDIR (default: a fresh private folder made
# with mktemp -d); one line per run goes to LOGDIR/summary.txt. Stops at the first red run.
set -u
runs=${1:-5}
logdir=${2:-$(mktemp -d)}
sh -c 'while :; do :; done' & b1=$!
sh -c 'while :; do :; done' & b2=$!
trap 'kill $b1 $b2 2>/dev/null' EXIT
trap 'exit 143' INT TERM HUP
echo "commit $(git rev-parse --short HEAD), $runs runs, logs in $logdir" | tee -a "$logdir/summary.txt"
for i in $(seq 1 "$runs"); do
  start=$(date +%s)
  make test > "$logdir/run-$i.log" 2>&1; rc=$?
  echo "run $i: rc=$rc $(( $(date +%s) - start )) s" | tee -a "$logdir/summary.txt"
  [ "$rc" -eq 0 ] || exit "$rc"
done
