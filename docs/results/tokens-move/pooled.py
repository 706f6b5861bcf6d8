"""Pools the per-repeat rows of every lab-70-*.csv here: median and quartiles of each pool
kind's end-to-end p99, service p99 and worst item over all repeats (each repeat a 20 s run)."""
import csv, glob, statistics as st

rows = [r for f in sorted(glob.glob("lab-70-*.csv")) for r in csv.DictReader(open(f))]
kinds = ["ignorant", "optimal", "share", "adaptive", "tokens"]
ms = lambda r, k: float(r[k]) / 1000
print("| pool | repeats | e2e p99 ms, median (quartiles) | vs ignorant | service p99 ms | worst item ms |")
print("|---|---:|---:|---:|---:|---:|")
med = {}
for k in kinds:
    sel = [r for r in rows if r["pool"] == k]
    e2e = [ms(r, "e2e_p99_us") for r in sel]
    med[k] = st.median(e2e)
    q = st.quantiles(e2e, n=4)
    print(f"| {k} | {len(sel)} | {med[k]:.1f} ({q[0]:.1f}–{q[2]:.1f}) | {med[k] / med['ignorant']:.2f}x "
          f"| {st.median(ms(r, 'service_p99_us') for r in sel):.1f} | {st.median(ms(r, 'service_max_us') for r in sel):.1f} |")
