"""Wait episodes of the given threads in an ftrace sched trace (see trace.sh): each time a
thread is woken or preempted until it runs again, its length, and for how much of it the other
CPU of a 2-CPU host was idle (CPUs 0 and 1 only: written for this repository's test VM). Usage: episodes.py TRACE TID,TID,... T0 (seconds, trace clock)."""
import sys,collections
from schedtrace import events
path=sys.argv[1]; tids=set(int(x) for x in sys.argv[2].split(',')); t0=float(sys.argv[3])
running={0:0,1:0}; since={}; where={}
# per cpu: time idle accumulated while episode open
idle_acc=collections.defaultdict(float); last=None
hist=collections.Counter(); long_eps=[]
comm={}
for kind,ts,g in events(path):
    m=kind=='switch'; w=kind=='wakeup'
    if ts<t0:
        if m: running[int(g[0])]=int(g[6])
        continue
    if last is not None:
        dt=ts-last
        for t in since:
            oc=1-where.get(t,0)
            if running[oc]==0: idle_acc[t]+=dt
    last=ts
    if m:
        cpu,_,pc,pp,ps,nc,npid=g; cpu=int(cpu); pp=int(pp); npid=int(npid); comm[pp]=pc; comm[npid]=nc
        running[cpu]=npid
        if npid in since:
            d=ts-since.pop(npid); hist[min(int(d*1000),20)]+=1
            if d>0.002: long_eps.append((round(d*1000,2), round(idle_acc[npid]*1000,2), npid, cpu, round(ts-t0,4)))
            idle_acc.pop(npid,None)
        if pp in tids and ps.startswith('R'):
            since[pp]=ts; where[pp]=cpu; idle_acc[pp]=0
    elif w:
        _,_,c,pid,tc=g; pid=int(pid)
        if pid in tids: since[pid]=ts; where[pid]=int(tc); idle_acc[pid]=0
    else:
        _,_,c,pid,oc,dc=g; pid=int(pid)
        if pid in since: where[pid]=int(dc)
print('wait episode length ms histogram (bucket=floor ms):', sorted(hist.items()))
print('episodes >2ms:', len(long_eps), ' total ms', round(sum(e[0] for e in long_eps),1), ' of which other CPU idle ms', round(sum(e[1] for e in long_eps),1))
for e in long_eps[:25]: print(e)
