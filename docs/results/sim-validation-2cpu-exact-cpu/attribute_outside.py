"""Which side of each ratio outside the band the model gets wrong: for every ignorant/pool
ratio of `sim validate` more than 25 % from the real one, the real and simulated figures of the
ignorant pool and of the pool (medians: the real run's repeats, the simulation's 5 streams),
and a verdict: `pool` if only the pool's own figure is more than 25 % off, `ignorant` if only
the ignorant pool's is, `both` otherwise.

Usage: cotenant sim validate --real DIR/results.json --scheduler linux --submit-us 10 --json > sim.json
       python3 attribute_outside.py DIR/results.json sim.json
"""
import collections
import json
import statistics
import sys

real = json.load(open(sys.argv[1]))
sim = json.load(open(sys.argv[2]))
measured = {}
for s in real["summary"]:
    k = s["key"]
    measured[(k["setting"], k["load"], k["processes"], k["kind"])] = s["median"]
simulated = collections.defaultdict(list)
for r in sim["rows"]:
    setting = "one-cgroup" if r["setting"] == "one cgroup" else "per-process"
    simulated[(setting, r["load"], r["processes"], r["pool"])].append(r)

counts = collections.Counter()
print("| setting | load | P | pool | ratio | real | sim | ignorant real (ms) | sim | pool real (ms) | sim | off |")
print("|---|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---|")
for c in sim["compared"]:
    setting = "one-cgroup" if c["setting"] == "one cgroup" else "per-process"
    kind = "adaptive" if c["pool"] == "default" else "plain"
    for i, (name, metric) in enumerate((("p99", "service_p99_us"), ("max", "service_max_us"))):
        if c["within"][i]:
            continue
        ki = (setting, c["load"], c["processes"], "ignorant")
        kp = (setting, c["load"], c["processes"], kind)
        ri, rp = measured[ki][metric] / 1e3, measured[kp][metric] / 1e3
        si = statistics.median(x[metric] for x in simulated[ki]) / 1e3
        sp = statistics.median(x[metric] for x in simulated[kp]) / 1e3
        ignorant_off, pool_off = abs(si / ri - 1) > 0.25, abs(sp / rp - 1) > 0.25
        off = "both" if ignorant_off and pool_off else "ignorant" if ignorant_off else "pool" if pool_off else "neither"
        side = ("pool too short" if sp < rp else "pool too long") if off == "pool" else off
        counts[(off, name, c["pool"])] += 1
        print(f"| {c['setting']} | {c['load'] * 100:.0f} % | {c['processes']} | {c['pool']} | {name} | "
              f"{c['real'][name]:.2f} | {c['simulated'][name]:.2f} | {ri:.1f} | {si:.1f} | {rp:.1f} | {sp:.1f} | {side} |")
print()
for (off, name, pool), n in sorted(counts.items()):
    print(f"{off} off: {name} of {pool}: {n}")
print("outside in all:", sum(counts.values()), "of", sim["total"])
