"""What Linux 6.18 does when it reweights a group entity on a CPU's root queue, from the
group-entity trace (events.tsv.gz, written by gs; see README.md). Prints, for the reweights the
trace catches cleanly, how well each candidate rule predicts the entity's lag afterwards.

A snapshot (one line of events.tsv) holds, for each watched group entity on that CPU,
se:v-V:deadline-V:vlag:weight:flags:queued:sum_exec:slice, with V the root queue's average
vruntime computed from cfs_rq->zero_vruntime, sum_w_vruntime, sum_weight and curr. A reweight
is seen as two consecutive snapshots on one CPU between which one entity's weight changed.
Only pairs with exactly the two group entities on the root queue are used (their weighted
offsets from V sum to zero), so that V - v follows from the two entities alone.
Run: python3 fit_reweights.py [events.tsv.gz]
"""
import gzip
import statistics
import sys

TICK_NS = 4_000_000  # CONFIG_HZ=250 on the traced kernel


def snapshots(path):
    with gzip.open(path, "rt") as f:
        for line in f:
            fields = line.rstrip("\n").split("\t")
            if fields[0] == "G":
                continue
            ents = []
            for x in fields[7:]:
                se, v, dl, vlag, w, flags, nq, ex, sl = x.split(":")
                ents.append(dict(se=se, rel=float(v), dlrel=float(dl), w=int(w), onrq=flags[0] == "1",
                                 cur=flags[2] == "1", ex=int(ex), slice=int(sl)))
            yield fields[2], int(fields[1]), ents


def two_entities_only(ents):
    return abs(ents[0]["w"] * ents[0]["rel"] + ents[1]["w"] * ents[1]["rel"]) <= 0.01 * (ents[0]["w"] + ents[1]["w"]) * 1e5


def reweights(path):
    """(running, w0, w1, w_other, lag0, lag1, request0, request1, ran_ns, slice_ns) per reweight."""
    prev = {}
    for cpu, t, ents in snapshots(path):
        p = prev.get(cpu)
        prev[cpu] = ents
        if not p or len(ents) != 2 or len(p) != 2 or not (two_entities_only(p) and two_entities_only(ents)):
            continue
        for i in range(2):
            o = 1 - i
            A0, A1, O0, O1 = p[i], ents[i], p[o], ents[o]
            if A0["se"] != A1["se"] or A0["w"] == A1["w"] or O0["w"] != O1["w"]:
                continue
            if not all(e["onrq"] for e in (A0, A1, O0, O1)):
                continue
            running = A0["cur"] and A1["cur"]
            if running and O0["ex"] != O1["ex"]:
                continue
            if not running and not (O0["cur"] and O1["cur"] and A0["ex"] == A1["ex"]):
                continue
            # Whichever entity ran between the snapshots moved by its CPU time / its weight
            # (update_curr, done before the reweight): bring the first snapshot up to then.
            runner = A0 if running else O0
            ran = (A1 if running else O1)["ex"] - runner["ex"]
            moved = ran * 1024.0 / runner["w"]
            d0 = A0["rel"] - O0["rel"] + (moved if running else -moved)  # v_A - v_other before
            d1 = A1["rel"] - O1["rel"]
            wo = O0["w"]
            lag0 = -wo * d0 / (A0["w"] + wo)
            lag1 = -wo * d1 / (A1["w"] + wo)
            req0 = A0["dlrel"] - A0["rel"] - (moved if running else 0.0)
            req1 = A1["dlrel"] - A1["rel"]
            yield running, A0["w"], A1["w"], wo, lag0, lag1, req0, req1, ran, A1["slice"]


def lag_conserving(w0, w1, wo, lag0, slice_ns):
    return lag0 * w0 / w1


def as_traced(w0, w1, wo, lag0, slice_ns):
    """Clamp (slice + tick, update_entity_lag), rescale by w0/w1, then place from a V that still
    counts the entity at its old vruntime with its new weight, inflating by (W + 2w) / (W + w)."""
    limit = (slice_ns + TICK_NS) * 1024.0 / w0
    vlag = max(-limit, min(limit, lag0)) * w0 / w1
    gap = lag0 * (w0 + wo) / wo  # v_other - v_entity before
    v_place_minus_v_other = -gap * w1 / (w1 + wo)
    inflated = vlag * (wo + 2 * w1) / (wo + w1)
    # v' = V_place - inflated; lag after = V' - v' with both entities at their new weights.
    v_new_minus_v_other = v_place_minus_v_other - inflated
    return -wo * v_new_minus_v_other / (w1 + wo)


def errors(rows, rule):
    e = sorted(abs(r[5] - rule(r[1], r[2], r[3], r[4], r[9])) / abs(r[5]) for r in rows)
    return "n %4d, relative error of the lag after: median %.4f, 90th %.4f, 99th %.4f" % (
        len(e), e[len(e) // 2], e[int(len(e) * 0.9)], e[int(len(e) * 0.99)])


path = sys.argv[1] if len(sys.argv) > 1 else "events.tsv.gz"
rows = list(reweights(path))
# Clean pairs: at most 20 µs of CPU time between the snapshots, a lag of at least 0.3 ms after.
clean = [r for r in rows if r[8] < 20_000 and abs(r[5]) > 0.3e6]
running = [r for r in clean if r[0]]
waiting = [r for r in clean if not r[0]]
print("reweights seen: %d (running entity %d, waiting entity %d); clean: %d running, %d waiting" % (
    len(rows), sum(r[0] for r in rows), sum(not r[0] for r in rows), len(running), len(waiting)))
print("\nthe running group entity (cfs_rq->curr):")
print("  lag kept (w0/w1 rescale, V unchanged):          " + errors(running, lag_conserving))
print("  as traced (own weight counted twice, clamped):  " + errors(running, as_traced))
ratio = sorted(r[5] / lag_conserving(r[1], r[2], r[3], r[4], r[9]) for r in running if abs(r[4]) < 3e6)
print("  lag after / lag kept, unclamped reweights: median %.3f, 10th %.3f, 90th %.3f" % (
    ratio[len(ratio) // 2], ratio[len(ratio) // 10], ratio[9 * len(ratio) // 10]))
req = sorted(abs(r[7] - r[6] * r[1] / r[2]) / abs(r[7]) for r in running if abs(r[7]) > 0.3e6)
print("  request left (deadline - vruntime) rescaled by w0/w1: n %d, relative error median %.4f, 99th %.4f" % (
    len(req), req[len(req) // 2], req[int(len(req) * 0.99)]))
larger = sum(abs(r[5]) > abs(lag_conserving(r[1], r[2], r[3], r[4], r[9])) for r in running)
print("  lag after larger than kept: %d of %d" % (larger, len(running)))
print("\na waiting group entity:")
print("  lag kept (w0/w1 rescale, V unchanged):          " + errors(waiting, lag_conserving))
# A waiting entity's lag is clamped too (update_entity_lag) when it exceeds slice + tick.
for r in rows:
    running_, w0, w1, wo, lag0, lag1, *_ , ran, slice_ns = r
    limit = (slice_ns + TICK_NS) * 1024.0 / w0
    if not running_ and ran < 20_000 and abs(lag0) > limit:
        clamped = max(-limit, min(limit, lag0)) * w0 / w1
        print("  clamped: weight %d->%d, lag before %.2f ms (limit %.2f), after %.2f, kept would be %.2f, "
              "clamped then rescaled %.2f" % (w0, w1, lag0 / 1e6, limit / 1e6, lag1 / 1e6,
                                              lag_conserving(w0, w1, wo, lag0, slice_ns) / 1e6, clamped / 1e6))
# The clamp: invert the traced rule where the lag before was large.
implied = []
for r in running:
    _, w0, w1, wo, lag0, lag1, *_ = r
    if lag0 * 1024 / w0 < 5e6:
        continue
    gap = lag0 * (w0 + wo) / wo
    inflated = lag1 * (w1 + wo) / wo - gap * w1 / (w1 + wo)
    vlag = inflated * (wo + w1) / (wo + 2 * w1) * w1 / w0
    implied.append(vlag * w0 / 1024 / 1e6)
if implied:
    implied.sort()
    print("\nthe lag clamp implied by %d running reweights with a lag of more than 5 ms of real time: "
          "median %.3f ms of real time (10th %.3f, 90th %.3f); slice %.2f ms + tick %.0f ms = %.2f ms" % (
              len(implied), implied[len(implied) // 2], implied[len(implied) // 10], implied[9 * len(implied) // 10],
              running[0][9] / 1e6, TICK_NS / 1e6, (running[0][9] + TICK_NS) / 1e6))
# How often the running entity's weight changes.
prev = {}
changes, same, tick_pairs, tick_changes = [], 0, 0, 0
for cpu, t, ents in snapshots(path):
    p = prev.get(cpu)
    prev[cpu] = ents
    if not p:
        continue
    for a in ents:
        for b in p:
            if a["se"] == b["se"] and a["cur"] and b["cur"]:
                if a["w"] != b["w"]:
                    changes.append(abs(a["w"] - b["w"]))
                else:
                    same += 1
                if a["ex"] - b["ex"] > 3.5e6:
                    tick_pairs += 1
                    tick_changes += a["w"] != b["w"]
changes.sort()
print("\nthe running group entity's weight between consecutive snapshots: changed %d times, unchanged %d; "
      "a change's size: median %d, 10th %d, 90th %d" % (len(changes), same, changes[len(changes) // 2],
                                                      changes[len(changes) // 10], changes[9 * len(changes) // 10]))
print("after at least 3.5 ms of running (a tick): %d pairs, weight changed in %d" % (tick_pairs, tick_changes))
