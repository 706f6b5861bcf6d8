"""Prints effect.md (RESULTS.md's table of the shared-CPU-while-another-idles effect) from the
effect-*.json beside it, made by
  cotenant sim neighbours --cpus 2 --processes 2 --pools adaptive --load 0.7,1 --setting both \
      --repeats 3 --scheduler linux [--no-leases] --json > effect-2-[no-]leases.json
and the same with --cpus 16 --processes 8 (effect-16-*.json). Run: python3 effect.py
"""
import json
import os
import statistics as st

HERE = os.path.dirname(os.path.abspath(__file__))


def rows(cpus, leases):
    with open(os.path.join(HERE, f"effect-{cpus}-{leases}.json")) as f:
        return json.load(f)["rows"]


print("| CPUs, P | cell | holders' wait beside an idle CPU, no leases (ms, 10 s) | with leases "
      "| worst item, no leases | with leases | service p99, no leases | with leases |")
print("|---|---|---:|---:|---:|---:|---:|---:|")
for cpus, processes in ((2, 2), (16, 8)):
    data = {leases: rows(cpus, leases) for leases in ("no-leases", "leases")}
    cells = sorted({(r["setting"], r["load"]) for r in data["leases"]}, key=lambda c: (c[0] != "one cgroup", c[1]))
    for setting, load in cells:
        def median(leases, key):
            return st.median(r[key] for r in data[leases] if r["setting"] == setting and r["load"] == load)
        print(f"| {cpus}, {processes} | {setting}, {load * 100:.0f} % "
              f"| {median('no-leases', 'holder_wait_beside_idle_ms'):.1f} | {median('leases', 'holder_wait_beside_idle_ms'):.1f} "
              f"| {median('no-leases', 'service_max_us') / 1000:.2f} ms | {median('leases', 'service_max_us') / 1000:.2f} ms "
              f"| {median('no-leases', 'service_p99_us') / 1000:.2f} ms | {median('leases', 'service_p99_us') / 1000:.2f} ms |")
