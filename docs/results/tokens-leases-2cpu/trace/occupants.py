"""For the given threads' wait episodes (woken or preempted until they run) in an ftrace sched
trace: who occupied the CPU they waited on, and for how long, summed over episodes > 1 ms;
and whether the other CPU (2-CPU host) idled meanwhile. Usage: occupants.py TRACE TID,... T0"""
import sys,collections
from schedtrace import wait_episodes, comm
path=sys.argv[1]; tids=set(int(x) for x in sys.argv[2].split(',')); t0=float(sys.argv[3])
occ=collections.defaultdict(collections.Counter)
total=collections.Counter(); n=0; tot=0.0
for ev in wait_episodes(path, tids, t0):
    if ev[0]=='span':
        _,dt,where,running=ev
        for t,c in where.items():
            occ[t][running[c]]+=dt
            if running[1-c]==0: occ[t]['other-idle']+=dt
    elif ev[0]=='start':
        occ[ev[1]]=collections.Counter()
    else:
        _,t,d,_,_=ev; o=occ.pop(t)
        if d>0.001:
            n+=1; tot+=d
            for k,v in o.items(): total[k]+=v
print(f'episodes > 1 ms: {n}, {tot*1000:.1f} ms in all')
for k,v in total.most_common(12):
    name=k if isinstance(k,str) else f"{comm.get(k,'?')}[{k}]{' (pool)' if k in tids else ''}"
    print(f'  {name}: {v*1000:.1f} ms')
