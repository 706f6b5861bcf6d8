// Loads gs.bpf.c, then prints its records as lines (V computed here) until SIGINT, SIGTERM or SIGHUP:
// G (a watched group entity found), S (switch), W (wake-up), N (nr_running change), L (PELT).
#include <stdio.h>
#include <signal.h>
#include <stdint.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "gs.skel.h"
typedef uint64_t u64; typedef int64_t s64; typedef uint32_t u32; typedef uint8_t u8;
struct ent { u64 se; s64 v; s64 dl; s64 vlag; u64 w; u8 on_rq; u8 delayed; u8 curr; u8 pad; u32 nq; u64 exec; s64 slice; };
struct ev { u32 kind; u32 cpu; u64 ts; u64 rq_zero; s64 rq_sum_wv; u64 rq_sum_w; u64 rq_curr; s64 rq_curr_v; u64 rq_curr_w; u8 rq_curr_onrq; u64 arg2; u64 arg; struct ent e[4]; char name[24]; };
static volatile int stop;
static void on_sig(int s) { (void)s; stop = 1; }
static double V(const struct ev *e) {
  double avg = (double)e->rq_sum_wv, load = (double)e->rq_sum_w;
  /* rq_zero is a u64 virtual time; read as s64 like the vruntimes it is compared with. */
  if (e->rq_curr && e->rq_curr_onrq) { double w = (double)(e->rq_curr_w >> 10); avg += (double)(e->rq_curr_v - (s64)e->rq_zero) * w; load += w; }
  return (double)(s64)e->rq_zero + (load > 0 ? avg / load : 0);
}
static void pe(const struct ent *x, double v) {
  printf("\t%llx:%.0f:%.0f:%lld:%llu:%u%u%u:%u:%llu:%lld", (unsigned long long)(x->se & 0xffffff), (double)x->v - v, (double)x->dl - v,
         (long long)x->vlag, (unsigned long long)(x->w >> 10), x->on_rq, x->delayed, x->curr, x->nq, (unsigned long long)x->exec, (long long)x->slice);
}
static int handle(void *ctx, void *data, size_t n) {
  const struct ev *e = data; (void)ctx; (void)n;
  double v = V(e);
  if (e->kind == 7) { printf("G\t%llu\t%u\t%.23s\t%llx\n", (unsigned long long)e->ts, e->cpu, e->name, (unsigned long long)(e->e[0].se & 0xffffff)); return 0; }
  const char *k = e->kind == 3 ? "S" : e->kind == 4 ? "W" : e->kind == 5 ? "N" : "L";
  printf("%s\t%llu\t%u\t%.23s\t%lld\t%lld\t%llx", k, (unsigned long long)e->ts, e->cpu, e->name, (long long)e->arg, (long long)e->arg2,
         (unsigned long long)(e->rq_curr & 0xffffff));
  for (int i = 0; i < 4 && e->e[i].se; i++) pe(&e->e[i], v);
  printf("\n");
  return 0;
}
int main(void) {
  int cpus = libbpf_num_possible_cpus();
  if (cpus < 1 || cpus > 4) { fprintf(stderr, "gs: %d possible CPUs; the watch map holds 4\n", cpus); return 1; }
  signal(SIGINT, on_sig); signal(SIGTERM, on_sig); signal(SIGHUP, on_sig);
  struct gs_bpf *s = gs_bpf__open_and_load();
  if (!s) { fprintf(stderr, "gs: load failed\n"); return 1; }
  if (gs_bpf__attach(s)) { fprintf(stderr, "gs: attach failed\n"); gs_bpf__destroy(s); return 1; }
  struct ring_buffer *r = ring_buffer__new(bpf_map__fd(s->maps.rb), handle, NULL, NULL);
  if (!r) { fprintf(stderr, "gs: ring buffer failed\n"); gs_bpf__destroy(s); return 1; }
  fprintf(stderr, "attached\n");
  while (!stop) { usleep(20000); ring_buffer__consume(r); }
  ring_buffer__consume(r);
  fflush(stdout);
  u64 per_cpu[4] = {0}, total = 0;
  u32 zero = 0;
  if (bpf_map_lookup_elem(bpf_map__fd(s->maps.dropped), &zero, per_cpu) == 0)
    for (int i = 0; i < cpus; i++) total += per_cpu[i];
  fprintf(stderr, "dropped %llu\n", (unsigned long long)total);
  ring_buffer__free(r); gs_bpf__destroy(s);
  return 0;
}
