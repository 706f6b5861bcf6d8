import json,collections,sys
for f in sys.argv[1:]:
    per={}
    for l in open(f):
        try: d=json.loads(l)
        except: continue
        if d.get('policy')!='adaptive': continue
        c=per.setdefault(d['pid'],collections.Counter())
        c['periods']+=1
        if d['target']>=2: c['at2']+=1
        c[d['reason']]+=1
    tot=collections.Counter()
    for c in per.values(): tot.update(c)
    at2=sorted(c['at2'] for c in per.values())
    print(f, 'processes',len(per),'periods',tot['periods'],'periods at 2:',tot['at2'],'(%.1f%%)'%(100*tot['at2']/tot['periods']),'per process',at2,'contention decisions',tot['contention'],'idle',tot['idle'])
