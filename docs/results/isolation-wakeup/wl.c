// Wake-up latency probe (A) and spinner (B) for the slice / SCHED_IDLE / cgroup experiment.
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
struct attr { uint32_t size, policy; uint64_t flags; int32_t nice; uint32_t prio; uint64_t runtime, deadline, period; };
static void setattr(int policy, int nice, uint64_t slice) {
  struct attr a = {48, policy, 0, nice, 0, slice, 0, 0};
  if (syscall(SYS_sched_setattr, 0, &a, 0)) { perror("sched_setattr"); exit(1); }
}
static uint64_t now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1000000000ull + t.tv_nsec; }
static int cmp(const void *a, const void *b) { uint64_t x = *(uint64_t *)a, y = *(uint64_t *)b; return x < y ? -1 : x > y; }
static volatile uint64_t sink;
static void *spin(void *arg) { (void)arg; for (;;) sink++; }
int main(int argc, char **argv) {
  if (argc >= 5 && !strcmp(argv[1], "a")) {  // a SLICE_NS SECONDS WORK_US
    uint64_t slice = strtoull(argv[2], 0, 10); int secs = atoi(argv[3]); int work = atoi(argv[4]);
    if (slice) setattr(SCHED_OTHER, 0, slice);
    size_t n = secs * 1000, i = 0; uint64_t *lat = calloc(n, 8);
    uint64_t next = now() + 1000000; unsigned seed = 1;
    for (i = 0; i < n; i++) {
      next += 500000 + rand_r(&seed) % 1000000;  // 0.5-1.5 ms apart
      struct timespec t = {next / 1000000000ull, next % 1000000000ull};
      clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, 0);
      uint64_t w = now(); lat[i] = w - next;
      while (now() - w < work * 1000ull) sink++;
    }
    qsort(lat, n, 8, cmp);
    printf("p50_us %.1f p99_us %.1f p999_us %.1f max_us %.1f\n", lat[n / 2] / 1e3, lat[n * 99 / 100] / 1e3, lat[n * 999 / 1000] / 1e3, lat[n - 1] / 1e3);
    return 0;
  }
  if (argc >= 5 && !strcmp(argv[1], "b")) {  // b POLICY NICE SLICE_NS
    int policy = atoi(argv[2]), nice = atoi(argv[3]); uint64_t slice = strtoull(argv[4], 0, 10);
    pthread_t t; setattr(policy, nice, slice);
    pthread_create(&t, 0, spin, 0); spin(0);
  }
  fprintf(stderr, "usage: wl a SLICE_NS SECONDS WORK_US | wl b POLICY NICE SLICE_NS\n"); return 2;
}
