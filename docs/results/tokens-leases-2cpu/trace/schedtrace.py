"""The scheduler events that episodes.py and occupants.py read from trace.sh's trace.txt."""
import re

SWITCH = re.compile(r'\[(\d+)\].* (\d+\.\d+): sched_switch: prev_comm=(.*) prev_pid=(\d+) prev_prio=\d+ prev_state=(\S+) ==> next_comm=(.*) next_pid=(\d+)')
WAKEUP = re.compile(r'\[(\d+)\].* (\d+\.\d+): sched_wakeup: comm=(.*) pid=(\d+) prio=\d+ target_cpu=(\d+)')
MIGRATE = re.compile(r'\[(\d+)\].* (\d+\.\d+): sched_migrate_task: comm=(.*) pid=(\d+) prio=\d+ orig_cpu=(\d+) dest_cpu=(\d+)')


def events(path):
    """Yields (kind, ts, groups) per sched_switch ('switch'), sched_wakeup ('wakeup') and
    sched_migrate_task ('migrate') line, in file order; groups as the patterns above capture
    them (CPU, timestamp, then the event's fields)."""
    for line in open(path):
        for kind, pattern in (('switch', SWITCH), ('wakeup', WAKEUP), ('migrate', MIGRATE)):
            match = pattern.search(line)
            if match:
                groups = match.groups()
                yield kind, float(groups[1]), groups
                break


def wait_episodes(path, tids, t0):
    """Replays the trace from `t0` (trace clock, seconds) for the threads `tids` and yields what
    episodes.py and occupants.py account for. A wait episode of a thread starts when it is woken
    or preempted while runnable and ends when it is switched in; it follows the thread across
    migrations. Yields, in trace order:
      ('span', dt, where, running): `dt` seconds passed with `where` {tid: CPU waited on} the
        open episodes and `running` {CPU: pid, 0 = idle} what ran (CPUs 0 and 1 only);
      ('start', tid): an episode of `tid` (re)started: reset its accumulators;
      ('end', tid, seconds, cpu, ts): it ended, switched in on `cpu` at `ts`.
    `comm` (filled as it goes) maps pids to names."""
    running = {0: 0, 1: 0}
    since = {}
    where = {}
    last = None
    for kind, ts, g in events(path):
        if ts < t0:
            if kind == 'switch':
                running[int(g[0])] = int(g[6])
            continue
        if last is not None and since:
            yield 'span', ts - last, {t: where.get(t, 0) for t in since}, running
        last = ts
        if kind == 'switch':
            cpu, _, pc, pp, ps, nc, npid = g
            cpu = int(cpu); pp = int(pp); npid = int(npid)
            comm[pp] = pc; comm[npid] = nc
            running[cpu] = npid
            if npid in since:
                yield 'end', npid, ts - since.pop(npid), cpu, ts
            if pp in tids and ps.startswith('R'):
                since[pp] = ts; where[pp] = cpu
                yield 'start', pp
        elif kind == 'wakeup':
            _, _, c, pid, tc = g
            pid = int(pid)
            if pid in tids:
                since[pid] = ts; where[pid] = int(tc)
                yield 'start', pid
        else:
            _, _, c, pid, oc, dc = g
            pid = int(pid)
            if pid in since:
                where[pid] = int(dc)


comm = {0: 'idle'}
