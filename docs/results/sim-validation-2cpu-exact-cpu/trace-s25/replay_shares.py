"""Replays the traced runnable counts (threads queued under each group entity, per CPU) through
two rules for a group's weight on each CPU, and compares with the weights the kernel gave at
the records taken right after an enqueue or a dequeue (kind N). Rules: `calc_group_shares`
from load averages (PELT: 32-ms half-life; each queue's report to the group's total refreshed
past a 1/64 change and at most once a millisecond; load = max(instantaneous, average)), and
the simulator's counts (1024 x runnable here / runnable in all). Run: python3 replay_shares.py
"""
import gzip
import math

HALF_LIFE_NS = 32 * 1.024e6
names, events = {}, []
for line in gzip.open("events.tsv.gz", "rt"):
    f = line.rstrip("\n").split("\t")
    if f[0] == "G":
        names[f[4]] = f[3]
        continue
    ents = [(x.split(":")[0], int(x.split(":")[4]), int(x.split(":")[6])) for x in f[7:]]
    events.append((int(f[1]), int(f[2]), f[0], ents))
events.sort()


def summary(errs):
    errs.sort()
    return "n %d, relative error: median %.3f, 90th percentile %.3f" % (
        len(errs), errs[len(errs) // 2], errs[int(0.9 * len(errs))])


def loads():
    avg, at, queued, contrib, contrib_at, errs = {}, {}, {}, {}, {}, []
    for t, cpu, kind, ents in events:
        for se, w, nq in ents:
            key = (names[se], cpu)
            if key in avg:
                target = 1024 * queued[key]
                avg[key] = target + (avg[key] - target) * math.exp(-(t - at[key]) * math.log(2) / HALF_LIFE_NS)
            else:
                avg[key] = contrib[key] = 1024 * nq
                contrib_at[key] = t
            at[key] = t
            if abs(avg[key] - contrib[key]) > contrib[key] / 64 and t - contrib_at[key] >= 1e6:
                contrib[key], contrib_at[key] = avg[key], t
            if kind == "N" and nq > 0:
                load = max(1024 * nq, avg[key])
                total = sum(v for (g, _), v in contrib.items() if g == key[0]) - contrib[key] + load
                errs.append(abs(max(2, min(1024, 1024 * load / total)) - w) / w)
            queued[key] = nq
    return errs


def counts():
    latest, errs = {}, []
    for t, cpu, kind, ents in events:
        for se, w, nq in ents:
            latest[(names[se], cpu)] = nq
        if kind == "N":
            for se, w, nq in ents:
                if nq:
                    total = sum(v for (g, _), v in latest.items() if g == names[se])
                    errs.append(abs(max(2, 1024 * nq / total) - w) / w)
    return errs


print("load averages (calc_group_shares):", summary(loads()))
print("counts of runnable threads (the simulator's default):", summary(counts()))
