"""The workers' worst items and their windows in monotonic seconds (the tracer's clock)."""
import json, sys
T = int(open("start_at_ns").read()); off = int(open("realtime_minus_monotonic_ns").read())
items = []
for i in (1, 2):
    r = json.load(open("worker-%d.json" % i))
    print("worker", i, "pid", r["pid"], "service p99 %.1f ms max %.1f ms" % (r["summary"]["service_p99_us"]/1e3, r["summary"]["service_max_us"]/1e3))
    for it in r["items"]:
        items.append((it[2] - it[1], r["pid"], i, T - off + it[1], T - off + it[2]))
items.sort(reverse=True)
for d, pid, i, s, e in items[:6]:
    print("%.1f ms pid %d window %.6f-%.6f" % (d/1e6, pid, s/1e9, e/1e9))
