"""Medians of run.sh's output (three runs per variant) as a Markdown table."""
import collections
import statistics as st
import sys

runs = collections.OrderedDict()
for line in open(sys.argv[1]):
    f = line.split()
    runs.setdefault(f[0], []).append({f[i]: float(f[i + 1]) for i in range(1, len(f), 2)})
print("| variant | p99 µs (each run) | p99 median | p99.9 median | max median |")
print("|---|---|---:|---:|---:|")
for name, rs in runs.items():
    each = ", ".join("%.0f" % r["p99_us"] for r in rs)
    med = lambda key: st.median(r[key] for r in rs)
    print(f"| {name} | {each} | {med('p99_us'):.0f} | {med('p999_us'):.0f} | {med('max_us'):.0f} |")
