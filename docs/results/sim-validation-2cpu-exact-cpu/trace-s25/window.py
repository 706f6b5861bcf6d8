"""The traced window of the worst item, event by event: usage window.py START_S END_S [KINDS]
(monotonic seconds, as worst.py prints them; KINDS from S W N L, default S). Per line: ms from
START, CPU, kind, and per watched group entity: which (g1 = cotenant-trace-1), * if it is the
root queue's curr, vruntime - V and deadline - V (ms of virtual time), weight, flags
(on_rq, delayed, curr) and the threads queued under it."""
import gzip
import sys
s, e = float(sys.argv[1]) * 1e9, float(sys.argv[2]) * 1e9
kinds = sys.argv[3] if len(sys.argv) > 3 else "S"
names = {}
for l in gzip.open("events.tsv.gz", "rt"):
    f = l.rstrip("\n").split("\t")
    if f[0] == "G":
        names[f[4]] = f[3][-1]
for l in gzip.open("events.tsv.gz", "rt"):
    f = l.rstrip("\n").split("\t")
    if f[0] not in kinds: continue
    t = int(f[1])
    if t < s or t > e: continue
    out = "%8.2f c%s %s" % ((t - s) / 1e6, f[2], f[0])
    if f[0] == "S":
        a, b = int(f[4]), int(f[5])
        out += " %6d>%-6d %-9s" % ((a >> 32) & 0xffffffff, a & 0xffffffff, f[3][:9])
    elif f[0] == "W":
        out += " wake %d %s" % (int(f[4]), f[3][:9])
    elif f[0] == "N":
        out += " nr%+d" % int(f[4])
    cur = f[6]
    for x in f[7:]:
        se, v, dl, vlag, w, flags, nq = x.split(":")[:7]
        out += " | g%s%s v%+6.2f d%+6.2f w%4s %s q%s" % (names.get(se, "?"), "*" if se == cur else " ", float(v) / 1e6, float(dl) / 1e6, w, flags, nq)
    print(out)
