"""For the given threads' wait episodes (woken or preempted until they run) in an ftrace sched
trace: who occupied the CPU they waited on, and for how long, summed over episodes > 1 ms;
and whether the other CPU (2-CPU host) idled meanwhile. Usage: occupants.py TRACE TID,... T0"""
import sys,collections
from schedtrace import events
path=sys.argv[1]; tids=set(int(x) for x in sys.argv[2].split(',')); t0=float(sys.argv[3])
running={0:0,1:0}; since={}; where={}; occ={}; comm={0:'idle'}
total=collections.Counter(); other_idle=0.0; n=0; tot=0.0; last=None
for kind,ts,g in events(path):
    m=kind=='switch'; w=kind=='wakeup'
    if ts<t0:
        if m: running[int(g[0])]=int(g[6])
        continue
    if last is not None:
        dt=ts-last
        for t in since:
            c=where.get(t,0)
            occ[t][running[c]]+=dt
            if running[1-c]==0: occ[t]['other-idle']+=dt
    last=ts
    if m:
        cpu,_,pc,pp,ps,nc,npid=g; cpu=int(cpu); pp=int(pp); npid=int(npid); comm[pp]=pc; comm[npid]=nc
        running[cpu]=npid
        if npid in since:
            d=ts-since.pop(npid); o=occ.pop(npid)
            if d>0.001:
                n+=1; tot+=d
                for k,v in o.items(): total[k]+=v
        if pp in tids and ps.startswith('R'):
            since[pp]=ts; where[pp]=cpu; occ[pp]=collections.Counter()
    elif w:
        _,_,c,pid,tc=g; pid=int(pid)
        if pid in tids: since[pid]=ts; where[pid]=int(tc); occ[pid]=collections.Counter()
    else:
        _,_,c,pid,oc,dc=g; pid=int(pid)
        if pid in since: where[pid]=int(dc)
print(f'episodes > 1 ms: {n}, {tot*1000:.1f} ms in all')
for k,v in total.most_common(12):
    name=k if isinstance(k,str) else f"{comm.get(k,'?')}[{k}]{' (pool)' if k in tids else ''}"
    print(f'  {name}: {v*1000:.1f} ms')
