# Samples, every PERIOD seconds until killed, each cotenant-trace cgroup's per-CPU group entity
# from /sys/kernel/debug/sched/debug (debugfs mounted): time (CLOCK_MONOTONIC ns), CPU, cgroup,
# queued threads of the cgroup on that CPU, its load_avg, the cgroup's tg_load_avg, the group
# entity's weight (se->load.weight scaled down by 1024, as the kernel scales it), and the group
# entity's virtual runtime minus the root run queue's weighted average V on that CPU, in ms
# (positive: ahead of V, so not eligible to run under EEVDF).
import sys, time
PERIOD = float(sys.argv[1]) if len(sys.argv) > 1 else 0.002
out = open(sys.argv[2] if len(sys.argv) > 2 else "group-weights.tsv", "w")
out.write("t_ns\tcpu\tcgroup\tnr_queued\tload_avg\ttg_load_avg\tse_weight\tse_vruntime_minus_V_ms\n")
KEYS = {"nr_queued": "nr_queued", "load_avg": "load_avg", "tg_load_avg": "tg_load_avg",
        "se->load.weight": "se_weight", "se->vruntime": "se_vruntime", "avg_vruntime": "avg_vruntime"}
while True:
    t = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    try:
        text = open("/sys/kernel/debug/sched/debug").read()
    except OSError:
        break
    blocks, cur = [], None
    for line in text.splitlines():
        if line.startswith("cfs_rq["):
            cpu, path = line[len("cfs_rq["):].split("]:", 1)
            cur = {"cpu": cpu, "path": path}
            blocks.append(cur)
        elif cur is not None and line.strip().startswith("."):
            key, _, value = line.strip()[1:].partition(":")
            if key.strip() in KEYS:
                cur[KEYS[key.strip()]] = value.strip()
        elif not line.strip():
            cur = None
    root_v = {b["cpu"]: float(b["avg_vruntime"]) for b in blocks if b["path"] == "/" and "avg_vruntime" in b}
    for b in blocks:
        if "cotenant-trace" not in b["path"]:
            continue
        ahead = ""
        if "se_vruntime" in b and b["cpu"] in root_v:
            ahead = "%.3f" % (float(b["se_vruntime"]) - root_v[b["cpu"]])
        weight = str(int(b.get("se_weight", "0")) // 1024)
        out.write("\t".join([str(t), b["cpu"], b["path"], b.get("nr_queued", ""), b.get("load_avg", ""),
                             b.get("tg_load_avg", ""), weight, ahead]) + "\n")
    out.flush()
    time.sleep(PERIOD)
