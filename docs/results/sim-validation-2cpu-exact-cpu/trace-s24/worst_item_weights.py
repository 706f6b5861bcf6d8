# The worst item of the two workers (worker-1.json, worker-2.json), which thread ran it and how
# long it waited runnable (perf sched timehist), and the per-CPU group entities' weights
# sampled meanwhile (group-weights.tsv). Run in the folder of traced-workers-per-process.sh
# after `perf sched timehist -i perf.data > timehist.txt`.
import json
T = int(open("start_at_ns").read())
off = int(open("realtime_minus_monotonic_ns").read())
items = []
for i in (1, 2):
    r = json.load(open("worker-%d.json" % i))
    for it in r["items"]:
        items.append((it[2] - it[1], r["pid"], i, it))
items.sort(reverse=True)
print("worst items (ms, pid):", [(round(d / 1e6, 1), pid) for d, pid, _, _ in items[:8]])
d, pid, i, worst = items[0]
s, e = (T - off + worst[1]), (T - off + worst[2])
print("worst: pid %d, %.2f ms, window %.6f-%.6f s (monotonic)" % (pid, d / 1e6, s / 1e9, e / 1e9))
# Runs of the process's threads (and the other's) in the window, from timehist.
runs = {}
for line in open("timehist.txt"):
    f = line.split()
    try:
        t = float(f[0]) * 1e9
        run = float(f[-1]) * 1e6
        wait = float(f[-3]) * 1e6
    except (ValueError, IndexError):
        continue
    if "lab-" not in f[2]:
        continue
    if s - 2e6 <= t <= e + 40e6:
        runs.setdefault(f[2], []).append((t, f[1], wait, run))
for name, rs in sorted(runs.items()):
    inside = sum(r for t, c, w, r in rs if s <= t - r and t <= e)
    longest_wait = max(rs, key=lambda x: x[2])
    print("%-22s ran %.1f ms inside the window; longest wait %.1f ms, ended %.6f on %s" % (
        name, inside / 1e6, longest_wait[2] / 1e6, longest_wait[0] / 1e9, longest_wait[1]))
print("\ngroup entities sampled in the window (t ms from the item's start; cpu; cgroup; runnable; load_avg; tg_load_avg; weight; the group entity ahead of V, ms):")
rows = [l.rstrip("\n").split("\t") for l in open("group-weights.tsv")][1:]
for r in rows:
    t = int(r[0])
    if s - 4e6 <= t <= e:
        print("%7.1f  cpu %s  %-22s %s %6s %6s %6s %9s" % ((t - s) / 1e6, r[1], r[2], r[3], r[4], r[5], r[6], r[7]))
