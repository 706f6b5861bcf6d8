# The worst item of worker-1.json and what `perf sched timehist` shows on both CPUs meanwhile.
# Run in the folder of traced-workers.sh after `perf sched timehist -i perf.data > timehist.txt`.
import json
T = int(open("start_at_ns").read())
off = int(open("realtime_minus_monotonic_ns").read())
r = json.load(open("worker-1.json"))
worst = max(r["items"], key=lambda x: x[2] - x[1])
s, e = (T - off + worst[1]) / 1e9, (T - off + worst[2]) / 1e9
print("worst item of pid", r["pid"], "service %.2f ms" % ((worst[2] - worst[1]) / 1e6), "window %.6f-%.6f" % (s, e))
lines = open("timehist.txt").read().splitlines()
print("\n".join(lines[:3]))
for l in lines[3:]:
    f = l.split()
    try:
        t = float(f[0])
    except (ValueError, IndexError):
        continue
    if s - 0.002 <= t <= e + 0.001:
        print(l)
