# Time each task ran on a CPU at once, from `perf script -F comm,tid,cpu,time,event,trace`
# (sched.txt): total, longest single run, runs over 1 ms; and who preempted the default pool's
# workers (pids given as arguments).
import collections, re, sys
pat = re.compile(r"^\s*(.+?)\s+(-?\d+)\s+\[(\d+)\]\s+([\d.]+):\s+sched:sched_switch: prev_comm=(\S+) "
                 r"prev_pid=(\d+) .*?prev_state=(\S+) ==> next_comm=(\S+) next_pid=(\d+)")
pool_tids = set(sys.argv[2:])
last, runs, preempted_by, first, end = {}, collections.defaultdict(list), collections.Counter(), None, None
for line in open(sys.argv[1]):
    m = pat.match(line)
    if not m:
        continue
    cpu, t = int(m.group(3)), float(m.group(4))
    first, end = first or t, t
    if cpu in last:
        comm, t0 = last[cpu]
        runs[comm].append((t - t0, t0, cpu))
    name = m.group(8)
    last[cpu] = (re.sub(r"\d+$", "N", name) if name.startswith("kworker") else name, t)
    if m.group(6) in pool_tids and m.group(7).startswith("R"):
        preempted_by[m.group(8)] += 1
span = end - first
for comm, v in sorted(runs.items(), key=lambda kv: -sum(x[0] for x in kv[1]))[:16]:
    total, longest = sum(x[0] for x in v), max(v)
    print("%-20s total %8.1f ms (%5.2f %% of 2 CPUs)  longest %7.2f ms  runs > 1 ms: %d"
          % (comm, total * 1e3, total / span / 2 * 100, longest[0] * 1e3, sum(1 for x in v if x[0] > 0.001)))
if pool_tids:
    print("preemptions of the given threads, by who ran next:", preempted_by.most_common(12))
