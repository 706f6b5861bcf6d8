"""Wait episodes of the given threads in an ftrace sched trace (see trace.sh): each time a
thread is woken or preempted until it runs again, its length, and for how much of it the other
CPU of a 2-CPU host was idle (CPUs 0 and 1 only: written for this repository's test VM). Usage: episodes.py TRACE TID,TID,... T0 (seconds, trace clock)."""
import sys,collections
from schedtrace import wait_episodes
path=sys.argv[1]; tids=set(int(x) for x in sys.argv[2].split(',')); t0=float(sys.argv[3])
# per thread: time the other CPU idled while its episode was open
idle_acc=collections.defaultdict(float)
hist=collections.Counter(); long_eps=[]
for ev in wait_episodes(path, tids, t0):
    if ev[0]=='span':
        _,dt,where,running=ev
        for t,c in where.items():
            if running[1-c]==0: idle_acc[t]+=dt
    elif ev[0]=='start':
        idle_acc[ev[1]]=0
    else:
        _,t,d,cpu,ts=ev; hist[min(int(d*1000),20)]+=1
        if d>0.002: long_eps.append((round(d*1000,2), round(idle_acc[t]*1000,2), t, cpu, round(ts-t0,4)))
        idle_acc.pop(t,None)
print('wait episode length ms histogram (bucket=floor ms):', sorted(hist.items()))
print('episodes >2ms:', len(long_eps), ' total ms', round(sum(e[0] for e in long_eps),1), ' of which other CPU idle ms', round(sum(e[1] for e in long_eps),1))
for e in long_eps[:25]: print(e)
