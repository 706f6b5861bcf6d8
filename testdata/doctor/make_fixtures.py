# Regenerates the fixture trees of testdata/doctor (python3 make_fixtures.py). The trees are
# committed; edit the numbers here and rerun rather than editing files by hand.
import os, shutil
BASE = os.path.dirname(os.path.abspath(__file__))

def w(root, path, text):
    p = os.path.join(root, path.lstrip('/'))
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, 'w') as f:
        f.write(text)

def stat(pid, comm, ticks, nthreads, cpu):
    return (f"{pid} ({comm}) R 1 {pid} {pid} 0 -1 4194560 100 0 0 0 {ticks} 0 0 0 20 0 {nthreads} 0 "
            f"1000 1000000 100 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 {cpu} 0 0 0 0 0\n")

def status(name, allowed, vol=0, invol=0, threads=1):
    return (f"Name:\t{name}\nState:\tR (running)\nThreads:\t{threads}\nCpus_allowed_list:\t{allowed}\n"
            f"Mems_allowed_list:\t0\nvoluntary_ctxt_switches:\t{vol}\nnonvoluntary_ctxt_switches:\t{invol}\n")

def sched(comm, tid, mig):
    return (f"{comm} ({tid}, #threads: 1)\n-------------------------------------------------------------------\n"
            f"se.exec_start                                :      29118173.075654\n"
            f"se.nr_migrations                             :                 {mig}\n"
            f"nr_switches                                  :                    0\n")

def proc_stat(user, idle, running):
    half_u, half_i = user // 2, idle // 2
    return (f"cpu  {user} 0 0 {idle} 0 0 0 0 0 0\ncpu0 {half_u} 0 0 {half_i} 0 0 0 0 0 0\n"
            f"cpu1 {user-half_u} 0 0 {idle-half_i} 0 0 0 0 0 0\nintr 1\nctxt 1\nprocs_running {running}\nprocs_blocked 0\n")

def proc_stat4(busy, idle, running):
    lines = "cpu  %d 0 0 %d 0 0 0 0 0 0\n" % (busy * 4, idle * 4)
    for i in range(4):
        lines += f"cpu{i} {busy} 0 0 {idle} 0 0 0 0 0 0\n"
    return lines + f"procs_running {running}\nprocs_blocked 0\n"

def psi(some_total, avg10=0.0):
    return (f"some avg10={avg10:.2f} avg60=0.00 avg300=0.00 total={some_total}\n"
            f"full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")

def task(root, pid, tid, comm, ticks, cpu, on_ns, wait_ns, slices, mig, vol, invol, allowed):
    d = f"/proc/{pid}/task/{tid}"
    w(root, d + "/stat", stat(tid, comm, ticks, 1, cpu))
    w(root, d + "/schedstat", f"{on_ns} {wait_ns} {slices}\n")
    w(root, d + "/sched", sched(comm, tid, mig))
    w(root, d + "/status", status(comm, allowed, vol, invol))

# ---- v1-contention: victim 4242 (/victim, one busy thread + one idle) against batch 5000
# (/batch, 2 spinning threads, cpu.shares 2048) on CPUs 0-1; separate cpu and cpuset mounts.
V1_MOUNTS = ("31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
             "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
             "34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset\n"
             "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n")

def v1_contention(root, after):
    k = 1 if after else 0
    w(root, "/proc/self/mountinfo", V1_MOUNTS)
    w(root, "/proc/self/cgroup", "3:cpuset:/\n1:cpu:/\n0::/\n")
    w(root, "/proc/stat", proc_stat(10000 + 200 * k, 50000, 4))
    w(root, "/proc/loadavg", "3.10 2.50 1.20 4/300 9999\n")
    w(root, "/proc/pressure/cpu", psi(1_000_000 + 600_000 * k, 55.0))
    w(root, "/sys/devices/system/cpu/online", "0-1\n")
    w(root, "/sys/devices/system/node/node0/cpulist", "0-1\n")
    # cgroups
    for d in ["/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu/victim", "/sys/fs/cgroup/cpu/batch"]:
        w(root, d + "/cpu.cfs_quota_us", "-1\n")
        w(root, d + "/cpu.cfs_period_us", "100000\n")
        w(root, d + "/cpu.stat", "nr_periods 0\nnr_throttled 0\nthrottled_time 0\n")
    w(root, "/sys/fs/cgroup/cpu/cpu.shares", "1024\n")
    w(root, "/sys/fs/cgroup/cpu/victim/cpu.shares", "1024\n")
    w(root, "/sys/fs/cgroup/cpu/batch/cpu.shares", "2048\n")
    for d in ["", "/victim", "/batch"]:
        w(root, f"/sys/fs/cgroup/cpuset{d}/cpuset.effective_cpus", "0-1\n")
        w(root, f"/sys/fs/cgroup/cpuset{d}/cpuset.cpus", "0-1\n")
    # the victim: 1 busy thread, 1 idle
    w(root, "/proc/4242/stat", stat(4242, "victim", 1000 + 40 * k, 2, 0))
    w(root, "/proc/4242/status", status("victim", "0-1", threads=2))
    w(root, "/proc/4242/cgroup", "3:cpuset:/victim\n1:cpu:/victim\n0::/\n")
    w(root, "/proc/4242/numa_maps", "7f00 default anon=300 dirty=300 N0=300 kernelpagesize_kB=4\n")
    task(root, 4242, 4242, "victim", 1000 + 40 * k, 0, 10_000_000_000 + 400_000_000 * k,
         2_000_000_000 + 300_000_000 * k, 5000 + 300 * k, 100 + 40 * k, 10, 500 + 150 * k, "0-1")
    task(root, 4242, 4243, "victim-idle", 5, 1, 50_000_000, 1_000_000, 50, 3, 20 + k, 0, "0-1")
    # the neighbour: 2 threads, 1.6 CPUs during the 1 s sample
    w(root, "/proc/5000/stat", stat(5000, "batch", 90000 + 160 * k, 2, 1))
    w(root, "/proc/5000/status", status("batch", "0-1", threads=2))
    w(root, "/proc/5000/cgroup", "3:cpuset:/batch\n1:cpu:/batch\n0::/\n")
    # an idle process in the root cgroup
    w(root, "/proc/1/stat", stat(1, "init", 500, 1, 0))
    w(root, "/proc/1/status", status("init", "0-1"))
    w(root, "/proc/1/cgroup", "3:cpuset:/\n1:cpu:/\n0::/\n")

# ---- v2-throttling: 4242 in /app/worker; /app has cpu.max 0.2 CPU and is throttled in 9 of
# 10 periods; 2 busy threads; a neighbour 6000 in /other uses 1 CPU; 2 NUMA nodes, 30% of the
# memory on node 1 while the threads run on node 0.
V2_MOUNTS = "30 23 0:27 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 rw,nsdelegate\n"

def v2_throttling(root, after):
    k = 1 if after else 0
    w(root, "/proc/self/mountinfo", V2_MOUNTS)
    w(root, "/proc/self/cgroup", "0::/\n")
    w(root, "/proc/stat", proc_stat4(1000 + 30 * k, 9000 + 70 * k, 2))
    w(root, "/proc/loadavg", "1.10 1.00 1.00 2/300 9999\n")
    w(root, "/proc/pressure/cpu", psi(5_000_000 + 50_000 * k))
    w(root, "/sys/devices/system/cpu/online", "0-3\n")
    w(root, "/sys/devices/system/node/node0/cpulist", "0-1\n")
    w(root, "/sys/devices/system/node/node1/cpulist", "2-3\n")
    cg = "/sys/fs/cgroup"
    w(root, cg + "/cgroup.controllers", "cpuset cpu io memory pids\n")
    w(root, cg + "/cpuset.cpus.effective", "0-3\n")
    w(root, cg + "/cpu.stat", f"usage_usec {90_000_000 + 1_200_000 * k}\nuser_usec 1\nsystem_usec 1\n")
    w(root, cg + "/cpu.pressure", psi(5_000_000 + 50_000 * k))
    w(root, cg + "/app/cpu.max", "20000 100000\n")
    w(root, cg + "/app/cpu.weight", "100\n")
    w(root, cg + "/app/cpu.stat",
      f"usage_usec {2_000_000 + 200_000 * k}\nnr_periods {100 + 10 * k}\nnr_throttled {20 + 9 * k}\n"
      f"throttled_usec {4_000_000 + 720_000 * k}\n")
    w(root, cg + "/app/cpu.pressure", psi(3_000_000 + 800_000 * k))
    w(root, cg + "/app/worker/cpu.max", "max 100000\n")
    w(root, cg + "/app/worker/cpu.weight", "100\n")
    w(root, cg + "/app/worker/cpu.stat",
      f"usage_usec {2_000_000 + 200_000 * k}\nnr_periods {100 + 10 * k}\nnr_throttled 0\nthrottled_usec 0\n")
    w(root, cg + "/app/worker/cpu.pressure", psi(3_000_000 + 800_000 * k, 80.0))
    w(root, cg + "/other/cpu.max", "max 100000\n")
    w(root, cg + "/other/cpu.weight", "100\n")
    w(root, cg + "/other/cpu.stat", "usage_usec 1\nnr_periods 0\nnr_throttled 0\nthrottled_usec 0\n")
    w(root, "/proc/4242/stat", stat(4242, "app", 200 + 20 * k, 2, 0))
    w(root, "/proc/4242/status", status("app", "0-3", threads=2))
    w(root, "/proc/4242/cgroup", "0::/app/worker\n")
    w(root, "/proc/4242/numa_maps",
      "7f00 default anon=700 dirty=700 N0=700 kernelpagesize_kB=4\n"
      "7f10 default anon=300 dirty=300 N1=300 kernelpagesize_kB=4\n")
    for tid in (4242, 4243):
        task(root, 4242, tid, "app", 100 + 10 * k, 0, 1_000_000_000 + 100_000_000 * k,
             4_000_000_000 + 400_000_000 * k, 1000 + 50 * k, 10 + k, 5, 100 + 10 * k, "0-3")
    w(root, "/proc/6000/stat", stat(6000, "other", 5000 + 100 * k, 1, 2))
    w(root, "/proc/6000/status", status("other", "0-3"))
    w(root, "/proc/6000/cgroup", "0::/other\n")

# ---- no-cgroup-controllers: cgroup v2 mounted with no cpu/cpuset controller; pid 4242 idle.
def no_controllers(root):
    w(root, "/proc/self/mountinfo", V2_MOUNTS)
    w(root, "/proc/self/cgroup", "0::/\n")
    w(root, "/proc/stat", proc_stat(1000, 9000, 1))
    w(root, "/proc/loadavg", "0.10 0.10 0.10 1/100 999\n")
    w(root, "/sys/devices/system/cpu/online", "0-1\n")
    w(root, "/sys/fs/cgroup/cgroup.controllers", "memory pids\n")
    w(root, "/proc/4242/stat", stat(4242, "idle", 10, 1, 0))
    w(root, "/proc/4242/status", status("idle", "0-1"))
    w(root, "/proc/4242/cgroup", "0::/svc\n")
    task(root, 4242, 4242, "idle", 10, 0, 1000, 10, 1, 0, 1, 0, "0-1")

# ---- unreadable-pid-files: /proc/4242 exists but its stat, status, task/ cannot be read.
def unreadable(root):
    no_controllers(root)
    for f in ["stat", "status"]:
        os.remove(os.path.join(root, f"proc/4242/{f}"))
    shutil.rmtree(os.path.join(root, "proc/4242/task"))

for case in ("v1-contention", "v2-throttling", "no-cgroup-controllers", "unreadable-pid-files"):
    shutil.rmtree(os.path.join(BASE, case), ignore_errors=True)
for when in ("before", "after"):
    v1_contention(f"{BASE}/v1-contention/{when}", when == "after")
    v2_throttling(f"{BASE}/v2-throttling/{when}", when == "after")
no_controllers(f"{BASE}/no-cgroup-controllers")
unreadable(f"{BASE}/unreadable-pid-files")
