#!/bin/bash
# Wake-up latency of a thread in cgroup A (sleeps 0.5-1.5 ms, then 200 us of work; 5 s) while
# B spins on 2 threads, per variant: where B sits (A's sibling cgroup or A's own cgroup), B's
# policy / nice / EEVDF slice (sched_setattr sched_runtime), A's slice, B's cgroup cpu.idle.
# Needs root and the v1 cpu controller at /sys/fs/cgroup/cpu (this repository's test VM).
# Creates cotenant-wl-a and cotenant-wl-b there and removes them on every exit path.
#   usage: run.sh > wl.out      then: python3 summarize.py wl.out
cd "$(dirname "$0")"
gcc -O2 -pthread -o wl wl.c || exit 1
CG=/sys/fs/cgroup/cpu
A=$CG/cotenant-wl-a; B=$CG/cotenant-wl-b
BPID=
cleanup() { [ -n "$BPID" ] && kill $BPID 2>/dev/null; wait 2>/dev/null; sleep 0.2; rmdir $A $B 2>/dev/null; }
trap 'cleanup; exit 1' INT TERM; trap cleanup EXIT
mkdir -p $A $B || exit 1
[ -w $B/cpu.idle ] || { echo "run.sh: $B/cpu.idle missing (needs Linux 5.15+ and root)" >&2; exit 1; }
SECS=${SECS:-5}
run() { # name bcg bpolicy bnice bslice aslice bidle
  local name=$1 bcg=$2 bp=$3 bn=$4 bs=$5 as=$6 bidle=$7
  echo $bidle > $B/cpu.idle || exit 1
  if [ "$bp" != none ]; then
    # A deadline, and not the timing lock's descriptor: a spinner outliving a killed script
    # stops by itself and holds no lock.
    timeout $((SECS + 30)) ./wl b $bp $bn $bs 9>&- & BPID=$!
    sleep 0.1
    echo $(pgrep -P $BPID -x wl || echo $BPID) > $bcg/cgroup.procs || exit 1
    sleep 0.3
  fi
  local out=$(bash -c "echo \$\$ > $A/cgroup.procs || exit 1; exec ./wl a $as $SECS 200" 9>&-)
  [ -n "$BPID" ] && { kill $BPID; wait $BPID 2>/dev/null; BPID=; }
  echo "$name $out"
}
exec 9>/tmp/cotenant-timing.lock; flock 9
for rep in 1 2 3; do
  run alone         $B none 0 0 0 0
  run normal        $B 0 0 0 0 0
  run normal-aslice $B 0 0 0 100000 0
  run idle          $B 5 0 0 0 0
  run idle-aslice   $B 5 0 0 100000 0
  run batch19-long  $B 3 19 100000000 0 0
  run nice19        $B 0 19 0 0 0
  run cgroup-idle   $B 0 0 0 0 1
  run idle-samecg   $A 5 0 0 0 0
  run normal-samecg $A 0 0 0 0 0
done
