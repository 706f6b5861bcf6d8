"""Prints RESULTS.md's 16-, 64- and 192-CPU tables (issue 40) from the JSON files beside it.

Made by, in this folder (both models, the same runs):
  cotenant sim neighbours --cpus 16 --processes 8 --pools ignorant,plain,adaptive --load 0.7,1,1.5 \
      --setting both --repeats 3 --scheduler MODEL --json > sim-16-MODEL.json
  cotenant sim neighbours --cpus 64|192 --processes 32 --pools ignorant,adaptive --load 1,1.5 \
      --setting both --repeats 1 --scheduler MODEL --json > sim-64|192-MODEL.json
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
    data = {m: rows(cpus, m) for m in ("idealised", "linux")}
    print(f"\n{cpus} CPUs\n")
    print("| cell | pool | service p99 ign/pool, idealised | Linux | service max ign/pool, idealised | Linux "
          "| throughput pool/ign, idealised | Linux | holders' wait beside an idle CPU, Linux (ms) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    cells = sorted({(r["setting"], r["load"]) for r in data["linux"]}, key=lambda c: (c[0] != "one cgroup", c[1]))
    for setting, load in cells:
        for pool in pools:
            def median(model, kind, key):
                return st.median(r[key] for r in data[model]
                                 if r["setting"] == setting and r["load"] == load and r["pool"] == kind)
            out = []
            for key in ("service_p99_us", "service_max_us", "throughput_per_s"):
                for model in ("idealised", "linux"):
                    ignorant, mine = median(model, "ignorant", key), median(model, pool, key)
                    if key == "throughput_per_s":
                        out.append(f"{mine / ignorant:.2f}x")
                    else:
                        out.append(f"{ignorant / mine:.2f}x ({mine / 1000:.1f} ms)")
            beside = median("linux", pool, "holder_wait_beside_idle_ms")
            name = "default" if pool == "adaptive" else pool
            print(f"| {setting}, {load * 100:.0f} % | {name} | " + " | ".join(out) + f" | {beside:.1f} |")
