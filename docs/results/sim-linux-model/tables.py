"""Prints RESULTS.md's 16-, 64- and 192-CPU tables (issue 40) from the JSON files beside it.

Made by, in this folder (both models, the same runs):
  cotenant sim neighbours --cpus 16 --processes 8 --pools ignorant,plain,adaptive --load 0.7,1,1.5 \
      --setting both --repeats 3 --scheduler MODEL --json > sim-16-MODEL.json
  cotenant sim neighbours --cpus 64|192 --processes 32 --pools ignorant,adaptive --load 1,1.5 \
      --setting both --repeats 1 --scheduler MODEL --json > sim-64|192-MODEL.json
sim-*-linux-s24.json are the Linux model as it was before session 25 (Linux 6.6's constants,
lag clamp and reweighting; the same commands at 402ec71); sim-*-linux.json the Linux model
with what was measured on 6.18 in session 25 (0.7-ms base slice, lag clamp of slice + tick,
the running group entity reweighted as traced).
Run: python3 tables.py
"""
import json
import os
import statistics as st

HERE = os.path.dirname(os.path.abspath(__file__))


def rows(cpus, model):
    with open(os.path.join(HERE, f"sim-{cpus}-{model}.json")) as f:
        return json.load(f)["rows"]


for cpus, pools in ((16, ("plain", "adaptive")), (64, ("adaptive",)), (192, ("adaptive",))):
    models = ("idealised", "linux-s24", "linux")
    data = {m: rows(cpus, m) for m in models}
    print(f"\n{cpus} CPUs\n")
    print("| cell | pool | service p99 ign/pool, idealised | Linux, s24 | Linux, 6.18 as traced "
          "| service max ign/pool, idealised | Linux, s24 | Linux, 6.18 as traced "
          "| throughput pool/ign, idealised | Linux, s24 | Linux, 6.18 as traced "
          "| holders' wait beside an idle CPU, Linux 6.18 as traced (ms) |")
    print("|---|---|" + "---:|" * 10)
    cells = sorted({(r["setting"], r["load"]) for r in data["linux"]}, key=lambda c: (c[0] != "one cgroup", c[1]))
    for setting, load in cells:
        for pool in pools:
            def median(model, kind, key):
                return st.median(r[key] for r in data[model]
                                 if r["setting"] == setting and r["load"] == load and r["pool"] == kind)
            out = []
            for key in ("service_p99_us", "service_max_us", "throughput_per_s"):
                for model in models:
                    ignorant, mine = median(model, "ignorant", key), median(model, pool, key)
                    if key == "throughput_per_s":
                        out.append(f"{mine / ignorant:.2f}x")
                    else:
                        out.append(f"{ignorant / mine:.2f}x ({mine / 1000:.1f} ms)")
            beside = median("linux", pool, "holder_wait_beside_idle_ms")
            name = "default" if pool == "adaptive" else pool
            print(f"| {setting}, {load * 100:.0f} % | {name} | " + " | ".join(out) + f" | {beside:.1f} |")
