#!/usr/bin/env python3
"""Summarise `cotenant lab spin --round-trip-us X --out DIR` runs: one line per round trip."""
import json, sys, statistics as st
print("| round trip µs | restricted CPU used | throughput restricted / unrestricted (non-spinning) | mean latency unrestricted ms | spin: p99.9 in the nice window vs unrestricted | back-off: same | yield | park |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|")
for arg in sys.argv[1:]:
    rt, d = arg.split("=")
    r = json.load(open(d + "/spin/results.json"))
    cells = {(c["scenario"], c["strategy"]): c for c in r["summary"]["scenarios"]}
    nonspin = ["yield", "backoff", "park"]
    used = st.median(cells[("restricted", s)]["cpus_used"] for s in nonspin)
    tr = st.median(cells[("restricted", s)]["throughput"] / cells[("unrestricted", s)]["throughput"] for s in nonspin)
    mean = st.median(cells[("unrestricted", s)]["mean_ms"] for s in nonspin)
    inc = lambda s: "%+.0f%%" % (100 * cells[("inverted", s)]["window_p999_increase"])
    print(f"| {rt} | {used:.2f} | {tr:.2f} | {mean:.3f} | {inc('spin')} | {inc('backoff')} | {inc('yield')} | {inc('park')} |")
