// Group-entity tracer (session 25). At every sched_switch, sched_wakeup (of a task queued on
// this CPU), change of the CPU's nr_running and PELT update of a top-level group entity, one
// record: for up to 4 watched group entities on this CPU (the top-level groups of cgroups named
// cotenant*, found at switches) their vruntime, deadline, vlag, weight, flags, queued threads,
// CPU time and slice, and the root queue's inputs to V (zero_vruntime, sum_w_vruntime,
// sum_weight, curr). Written without waking the reader (BPF_RB_NO_WAKEUP), which polls every
// 20 ms, so that tracing adds no switches of its own at each event. The watch map holds 4
// entities for each of 4 CPUs: gs refuses to run on more.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
char LICENSE[] SEC("license") = "GPL";

struct ent { u64 se; s64 v; s64 dl; s64 vlag; u64 w; u8 on_rq; u8 delayed; u8 curr; u8 pad; u32 nq; u64 exec; s64 slice; };
struct ev {
  u32 kind; u32 cpu; u64 ts;
  u64 rq_zero; s64 rq_sum_wv; u64 rq_sum_w; u64 rq_curr; s64 rq_curr_v; u64 rq_curr_w; u8 rq_curr_onrq;
  u64 arg2;
  u64 arg; // new weight (R) / flags (P) / prev pid<<32|next pid (S)
  struct ent e[4];
  char name[24];
};
struct { __uint(type, BPF_MAP_TYPE_RINGBUF); __uint(max_entries, 1 << 26); } rb SEC(".maps");
// watched group entities per cpu: key cpu*4+i -> se pointer (filled by us on reweight of a depth-0 group se)
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 16); __type(key, u32); __type(value, u64); } watch SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY); __uint(max_entries, 1); __type(key, u32); __type(value, struct ev); } scratch SEC(".maps");
const volatile char prefix[9] = "cotenant";
// Records the ring buffer refused (full): the reader prints the count at exit.
struct { __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY); __uint(max_entries, 1); __type(key, u32); __type(value, u64); } dropped SEC(".maps");
static __always_inline void output(void *e, u64 size) {
  if (bpf_ringbuf_output(&rb, e, size, BPF_RB_NO_WAKEUP)) {
    u32 z = 0; u64 *d = bpf_map_lookup_elem(&dropped, &z);
    if (d) *d += 1;
  }
}

static __always_inline void fill_ent(struct ent *o, struct sched_entity *se) {
  o->se = (u64)se;
  if (!se) return;
  o->v = BPF_CORE_READ(se, vruntime);
  o->dl = BPF_CORE_READ(se, deadline);
  o->vlag = BPF_CORE_READ(se, vlag);
  o->w = BPF_CORE_READ(se, load.weight);
  o->on_rq = BPF_CORE_READ(se, on_rq);
  o->exec = BPF_CORE_READ(se, sum_exec_runtime);
  o->slice = BPF_CORE_READ(se, slice);
  o->delayed = BPF_CORE_READ(se, sched_delayed);
  struct cfs_rq *q = BPF_CORE_READ(se, my_q);
  if (q) o->nq = BPF_CORE_READ(q, h_nr_queued);
  struct cfs_rq *parent = BPF_CORE_READ(se, cfs_rq);
  o->curr = parent && BPF_CORE_READ(parent, curr) == se;
}
static __always_inline void fill_rq(struct ev *e, struct cfs_rq *q) {
  e->rq_zero = BPF_CORE_READ(q, zero_vruntime);
  e->rq_sum_wv = BPF_CORE_READ(q, sum_w_vruntime);
  e->rq_sum_w = BPF_CORE_READ(q, sum_weight);
  struct sched_entity *c = BPF_CORE_READ(q, curr);
  e->rq_curr = (u64)c;
  if (c) { e->rq_curr_v = BPF_CORE_READ(c, vruntime); e->rq_curr_w = BPF_CORE_READ(c, load.weight); e->rq_curr_onrq = BPF_CORE_READ(c, on_rq); }
}
static __always_inline int group_name(struct sched_entity *se, char *out) {
  struct cfs_rq *q = BPF_CORE_READ(se, my_q);
  if (!q) return 0;
  const char *n = BPF_CORE_READ(q, tg, css.cgroup, kn, name);
  bpf_probe_read_kernel_str(out, 24, n);
  for (int i = 0; i < 8; i++) if (out[i] != prefix[i]) return 0;
  return 1;
}
static __always_inline int remember(u32 cpu, struct sched_entity *se) {
  for (u32 i = 0; i < 4; i++) {
    u32 k = (cpu & 3) * 4 + i;
    u64 *p = bpf_map_lookup_elem(&watch, &k);
    if (!p) return 0;
    if (*p == (u64)se) return 0;
    if (*p == 0) { *p = (u64)se; return 1; }
  }
  return 0;
}

static __always_inline void discover(u32 cpu, struct task_struct *t) {
  struct sched_entity *g = BPF_CORE_READ(t, se.parent);
  if (!g || BPF_CORE_READ(g, depth) != 0) return;
  u32 z = 0; struct ev *e = bpf_map_lookup_elem(&scratch, &z); if (!e) return;
  __builtin_memset(e, 0, sizeof(*e));
  if (group_name(g, e->name) && remember(cpu, g)) {
    e->kind = 7; e->cpu = cpu; e->ts = bpf_ktime_get_ns(); e->e[0].se = (u64)g;
    output(e, sizeof(*e));
  }
}
static __always_inline int snap(u32 kind, u64 arg, const char *comm, u64 arg2) {
  u32 cpu = bpf_get_smp_processor_id();
  u32 z = 0; struct ev *e = bpf_map_lookup_elem(&scratch, &z); if (!e) return 0;
  __builtin_memset(e, 0, sizeof(*e));
  int any = 0;
  for (u32 i = 0; i < 4; i++) {
    u32 k = (cpu & 3) * 4 + i;
    u64 *p = bpf_map_lookup_elem(&watch, &k);
    if (!p || !*p) break;
    fill_ent(&e->e[i], (struct sched_entity *)*p);
    any = 1;
  }
  if (!any) return 0;
  struct sched_entity *s0 = (struct sched_entity *)e->e[0].se;
  struct cfs_rq *root = BPF_CORE_READ(s0, cfs_rq);
  fill_rq(e, root);
  e->kind = kind; e->cpu = cpu; e->ts = bpf_ktime_get_ns(); e->arg = arg; e->arg2 = arg2;
  if (comm) bpf_probe_read_kernel_str(e->name, 24, comm);
  output(e, sizeof(*e));
  return 0;
}
SEC("tp_btf/sched_switch")
int BPF_PROG(sw, bool preempt, struct task_struct *prev, struct task_struct *next) {
  u32 cpu = bpf_get_smp_processor_id();
  discover(cpu, prev); discover(cpu, next);
  return snap(3, ((u64)BPF_CORE_READ(prev, pid) << 32) | (u32)BPF_CORE_READ(next, pid), next->comm,
              ((u64)BPF_CORE_READ(prev, tgid) << 32) | (u32)BPF_CORE_READ(next, tgid));
}
SEC("tp_btf/sched_wakeup")
int BPF_PROG(wk, struct task_struct *p) {
  // traced on the waking CPU; only snapshot if the woken task's rq is this CPU
  if (BPF_CORE_READ(p, thread_info.cpu) != bpf_get_smp_processor_id()) return 0;
  return snap(4, BPF_CORE_READ(p, pid), p->comm, BPF_CORE_READ(p, tgid));
}
SEC("tp_btf/sched_update_nr_running_tp")
int BPF_PROG(nr, struct rq *rq, int change) {
  if (BPF_CORE_READ(rq, cpu) != bpf_get_smp_processor_id()) return 0;
  return snap(5, (u64)(s64)change, 0, 0);
}
SEC("tp_btf/pelt_se_tp")
int BPF_PROG(pelt, struct sched_entity *se) {
  if (BPF_CORE_READ(se, depth) != 0 || !BPF_CORE_READ(se, my_q)) return 0;
  return snap(6, 0, 0, 0);
}
