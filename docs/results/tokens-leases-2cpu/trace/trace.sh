#!/bin/bash
# Traces the scheduler (ftrace sched_switch/wakeup/migrate events) during one lab run of
# `neighbours` at 70 % load, P = 2, one cgroup, 1 repeat of 5 s per pool kind, as root.
#   usage: trace.sh OUTDIR        (COTENANT: the binary, default target/release/cotenant)
# Writes OUTDIR/trace.txt (the raw trace), OUTDIR/ps.txt (the lab workers' threads, polled),
# OUTDIR/log.txt and OUTDIR/neighbours/. Then, for the last pool kind run (tokens), with its
# four pool threads' ids (the last four `lab-N` pids in the trace) and the time the first one
# appears:
#   python3 episodes.py OUTDIR/trace.txt TID,TID,TID,TID T0
# prints how long the pool threads waited runnable and for how much of it the other CPU idled;
# occupants.py, same arguments, who ran on the CPU they waited for. Both parse with schedtrace.py.
# Tracing perturbs the run: compare pool kinds within one trace, not with untraced runs.
# Needs tracefs (mount -t tracefs nodev /sys/kernel/tracing).
set -e
OUT=$1; mkdir -p $OUT
T=/sys/kernel/tracing
echo 0 > $T/tracing_on; echo > $T/trace
echo 0 > $T/events/enable
for e in sched_switch sched_wakeup sched_migrate_task sched_waking; do echo 1 > $T/events/sched/$e/enable; done
OLD_BUFFER=$(sed 's/ .*//' $T/buffer_size_kb)
echo 200000 > $T/buffer_size_kb
( while true; do ps -eLo pid,tid,comm,args | grep lab-worker | grep -v grep >> $OUT/ps.txt || true; sleep 0.3; done ) & PSL=$!
# Tracing off, the poller stopped and the buffer size restored however the run ends (the
# events enabled above are turned off: this script assumes none were on before it).
trap 'echo 0 > $T/tracing_on; kill $PSL 2>/dev/null; echo 0 > $T/events/enable; echo $OLD_BUFFER > $T/buffer_size_kb' EXIT
echo 1 > $T/tracing_on
flock /tmp/cotenant-timing.lock ${COTENANT:-target/release/cotenant} lab neighbours --setting one-cgroup --processes 2 --load 0.7 --seconds 5 --repeats 1 --out $OUT > $OUT/log.txt 2>&1
echo 0 > $T/tracing_on
cat $T/trace > $OUT/trace.txt
wc -l $OUT/trace.txt
