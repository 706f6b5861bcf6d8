#!/bin/bash
# Does an idle cgroup *inside* B's cgroup protect A in a sibling cgroup? (A library could make
# such a child for its background workers; it cannot mark B's own cgroup idle without lowering
# the whole process.) Same probe as run.sh: A's thread sleeps 0.5-1.5 ms, works 200 us, 5 s;
# B spins on 2 threads. Variants: B normal in its own cgroup; B's cgroup idle; B normal in a
# child of its cgroup marked idle; the same child with B at SCHED_IDLE.
# Needs root and the v1 cpu controller at /sys/fs/cgroup/cpu. Creates cotenant-wl-a,
# cotenant-wl-b and cotenant-wl-b/cotenant-wl-idle and removes them on every exit path.
#   usage: child-idle.sh > child-idle.out      then: python3 summarize.py child-idle.out
cd "$(dirname "$0")"
gcc -O2 -pthread -o wl wl.c || exit 1
CG=/sys/fs/cgroup/cpu
A=$CG/cotenant-wl-a; B=$CG/cotenant-wl-b; C=$B/cotenant-wl-idle
BPID=
cleanup() { [ -n "$BPID" ] && kill $BPID 2>/dev/null; wait 2>/dev/null; sleep 0.2; rmdir $C 2>/dev/null; rmdir $A $B 2>/dev/null; }
trap 'cleanup; exit 1' INT TERM; trap cleanup EXIT
mkdir -p $A $B $C || exit 1
[ -w $C/cpu.idle ] || { echo "child-idle.sh: $C/cpu.idle missing (needs Linux 5.15+ and root)" >&2; exit 1; }
echo 1 > $C/cpu.idle || exit 1
SECS=${SECS:-5}
run() { # name bcg bpolicy bidle
  local name=$1 bcg=$2 bp=$3 bidle=$4
  echo $bidle > $B/cpu.idle || exit 1
  timeout $((SECS + 30)) ./wl b $bp 0 0 9>&- & BPID=$!
  sleep 0.1
  echo $(pgrep -P $BPID -x wl || echo $BPID) > $bcg/cgroup.procs || exit 1
  sleep 0.3
  local out=$(bash -c "echo \$\$ > $A/cgroup.procs || exit 1; exec ./wl a 0 $SECS 200" 9>&-)
  kill $BPID; wait $BPID 2>/dev/null; BPID=
  echo "$name $out"
}
exec 9>/tmp/cotenant-timing.lock; flock 9
for rep in 1 2 3; do
  run normal          $B 0 0
  run cgroup-idle     $B 0 1
  run child-idle      $C 0 0
  run child-idle-idle $C 5 0
done
