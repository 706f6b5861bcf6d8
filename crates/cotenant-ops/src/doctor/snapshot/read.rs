//! Reading a [`Snapshot`] from under a root: the host's files, every process, the target's
//! threads and budget, and the cpu and cpuset cgroups they are in; failures become [`NotRead`]s.

use super::parse::{parse_numa_maps, parse_psi, parse_sched_migrations, status_number};
use super::{Budget, CpuGroup, CpusetGroup, Hierarchy, NotRead, Proc, Snapshot, Target, Thread};
use cotenant::{
    cpus::Probe,
    internal::procfs::{
        cgroup, cgroupfs, cgroupfs::Quota, cpulist, cpulist::CpuSet, loadavg, mountinfo,
        mountinfo::CgroupMount, pidstat, schedstat, stat, status,
    },
};
use std::{
    collections::BTreeSet,
    fs,
    path::{Path, PathBuf},
};

/// Most `/proc/<pid>` directories scanned for neighbours: bounds the cost on huge hosts.
const MAX_PROCESSES: usize = 20_000;
/// Most threads of the target read per snapshot.
const MAX_THREADS: usize = 4096;
/// Most cgroups whose files are read (those holding processes, and their ancestors).
const MAX_CGROUPS: usize = 2_000;
/// The clock tick of `/proc/<pid>/stat` times when it cannot be asked (`sysconf`) or the
/// snapshot is of a fixture: Linux has reported 100 to user space on every architecture.
pub const DEFAULT_CLK_TCK: u64 = 100;

/// Reads files under a root, recording failures.
struct Reader<'a> {
    root: &'a Path,
    not_read: Vec<NotRead>,
}

impl Reader<'_> {
    fn path(&self, host_path: &str) -> PathBuf {
        self.root.join(host_path.trim_start_matches('/'))
    }

    /// The text of a file, or `None` (recorded as not read when `record`).
    fn text(&mut self, path: &Path, record: bool) -> Option<String> {
        match fs::read_to_string(path) {
            Ok(t) => Some(t),
            Err(e) => {
                if record {
                    self.not_read.push(NotRead { file: path.display().to_string(), reason: e.to_string() });
                }
                None
            }
        }
    }

    /// Reads and parses a file; a failure of either is recorded when `record`.
    fn parsed<T, E: std::fmt::Display>(
        &mut self,
        path: &Path,
        record: bool,
        parse: impl FnOnce(&str) -> Result<T, E>,
    ) -> Option<T> {
        let text = self.text(path, record)?;
        match parse(&text) {
            Ok(v) => Some(v),
            Err(e) => {
                if record {
                    self.not_read.push(NotRead { file: path.display().to_string(), reason: e.to_string() });
                }
                None
            }
        }
    }

    fn note(&mut self, file: impl Into<String>, reason: impl Into<String>) {
        self.not_read.push(NotRead { file: file.into(), reason: reason.into() });
    }
}

/// Takes one snapshot of the host, and of `pid` when given, from under `root`.
pub fn take(root: &Path, pid: Option<u32>) -> Snapshot {
    let mut r = Reader { root, not_read: Vec::new() };
    let live = root == Path::new("/");
    let mut s =
        Snapshot { clk_tck: clk_tck(root), self_pid: live.then(std::process::id), ..Snapshot::default() };

    s.online = r.parsed(&r.path("/sys/devices/system/cpu/online"), true, cpulist::parse);
    s.stat = r.parsed(&r.path("/proc/stat"), true, stat::parse);
    s.loadavg_running = r.parsed(&r.path("/proc/loadavg"), true, loadavg::parse_running);
    let psi_path = r.path("/proc/pressure/cpu");
    s.psi = r.parsed(&psi_path, true, parse_psi);
    s.numa_nodes = numa_nodes(&mut r);

    // Hierarchies from our own mountinfo (see cotenant::cpus::probe: another process's cgroup
    // paths are shown relative to the reader's namespace).
    let mounts =
        r.parsed(&r.path("/proc/self/mountinfo"), true, mountinfo::parse_cgroup_mounts).unwrap_or_default();
    s.cpu_hierarchy = locate(&mut r, &mounts, "cpu");
    s.cpuset_hierarchy = locate(&mut r, &mounts, "cpuset");

    (s.processes, s.unreadable_processes) = processes(&mut r, &s);
    s.target = pid.map(|pid| target(&mut r, &s, pid));

    cgroups(&mut r, &mut s);
    s.not_read = r.not_read;
    s
}

fn clk_tck(root: &Path) -> u64 {
    if root != Path::new("/") {
        return DEFAULT_CLK_TCK;
    }
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as u64
    } else {
        DEFAULT_CLK_TCK
    }
}

fn numa_nodes(r: &mut Reader<'_>) -> Vec<(u32, CpuSet)> {
    let dir = r.path("/sys/devices/system/node");
    let Ok(entries) = fs::read_dir(&dir) else {
        r.note(dir.display().to_string(), "no NUMA node directory (a single node is assumed)");
        return Vec::new();
    };
    let mut nodes: Vec<(u32, CpuSet)> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let id: u32 = name.strip_prefix("node")?.parse().ok()?;
            let cpus = r.parsed(&e.path().join("cpulist"), true, cpulist::parse)?;
            Some((id, cpus))
        })
        .collect();
    nodes.sort_by_key(|(id, _)| *id);
    nodes
}

/// The hierarchy holding `controller`: v1 first (it wins on hybrid hosts, as in
/// `cotenant::cpus`), then v2 when its root's `cgroup.controllers` lists it. Of several mounts
/// the broadest (shortest root) is used.
fn locate(r: &mut Reader<'_>, mounts: &[CgroupMount], controller: &str) -> Option<Hierarchy> {
    if let Some(m) = mounts.iter().filter(|m| m.has_controller(controller)).min_by_key(|m| m.root.len()) {
        return Some(Hierarchy { version: "v1", mount: m.clone() });
    }
    let Some(m) = mounts.iter().filter(|m| m.is_v2).min_by_key(|m| m.root.len()) else {
        r.note(
            format!("cgroup {controller} controller"),
            "no cgroup v1 hierarchy with it and no cgroup v2 hierarchy in /proc/self/mountinfo",
        );
        return None;
    };
    let file = r.path(&format!("{}/cgroup.controllers", m.mount_point));
    let text = r.text(&file, true)?;
    if text.split_ascii_whitespace().any(|c| c == controller) {
        Some(Hierarchy { version: "v2", mount: m.clone() })
    } else {
        r.note(file.display().to_string(), format!("the cgroup v2 hierarchy has no {controller} controller"));
        None
    }
}

/// The cgroup of a process in a hierarchy, from its parsed `/proc/<pid>/cgroup`.
fn member_of(h: &Option<Hierarchy>, memberships: &[cgroup::Membership], controller: &str) -> Option<String> {
    let h = h.as_ref()?;
    let m = match h.version {
        "v1" => memberships.iter().find(|m| m.has_controller(controller)),
        _ => memberships.iter().find(|m| m.is_v2()),
    }?;
    Some(m.path.clone())
}

/// Every readable process, and how many could not be read.
fn processes(r: &mut Reader<'_>, s: &Snapshot) -> (Vec<Proc>, u32) {
    let proc_dir = r.path("/proc");
    let Ok(entries) = fs::read_dir(&proc_dir) else {
        r.note(proc_dir.display().to_string(), "cannot list processes");
        return (Vec::new(), 0);
    };
    let mut pids: Vec<u32> = entries.flatten().filter_map(|e| e.file_name().to_str()?.parse().ok()).collect();
    pids.sort_unstable();
    pids.truncate(MAX_PROCESSES);
    let mut out = Vec::with_capacity(pids.len());
    let mut unreadable = 0;
    for pid in pids {
        let dir = proc_dir.join(pid.to_string());
        let Some(st) = r.parsed(&dir.join("stat"), false, pidstat::parse) else {
            unreadable += 1;
            continue;
        };
        let allowed = r.parsed(&dir.join("status"), false, status::parse_cpus_allowed).flatten();
        let memberships = r.parsed(&dir.join("cgroup"), false, cgroup::parse).unwrap_or_default();
        out.push(Proc {
            pid,
            comm: st.comm,
            cpu_ticks: st.cpu_ticks,
            threads: st.num_threads,
            allowed,
            cpu_cgroup: member_of(&s.cpu_hierarchy, &memberships, "cpu"),
            cpuset_cgroup: member_of(&s.cpuset_hierarchy, &memberships, "cpuset"),
        });
    }
    (out, unreadable)
}

fn target(r: &mut Reader<'_>, s: &Snapshot, pid: u32) -> Target {
    let dir = r.path(&format!("/proc/{pid}"));
    let mut t = Target { pid, exists: dir.is_dir(), ..Target::default() };
    if !t.exists {
        r.note(dir.display().to_string(), format!("process {pid} does not exist"));
        return t;
    }
    let st = r.parsed(&dir.join("stat"), true, pidstat::parse);
    t.readable = st.is_some();
    t.comm = st.map(|s| s.comm).unwrap_or_default();
    t.allowed = r.parsed(&dir.join("status"), true, status::parse_cpus_allowed).flatten();
    let memberships = r.parsed(&dir.join("cgroup"), true, cgroup::parse).unwrap_or_default();
    t.cpu_cgroup = member_of(&s.cpu_hierarchy, &memberships, "cpu");
    t.cpuset_cgroup = member_of(&s.cpuset_hierarchy, &memberships, "cpuset");
    t.numa_bytes = r.parsed(&dir.join("numa_maps"), true, parse_numa_maps);

    let task_dir = dir.join("task");
    match fs::read_dir(&task_dir) {
        Err(e) => r.note(task_dir.display().to_string(), e.to_string()),
        Ok(entries) => {
            let mut tids: Vec<u32> =
                entries.flatten().filter_map(|e| e.file_name().to_str()?.parse().ok()).collect();
            tids.sort_unstable();
            tids.truncate(MAX_THREADS);
            // Only the first failure of each file kind is recorded: threads come and go.
            let mut recorded = BTreeSet::new();
            for tid in tids {
                let td = task_dir.join(tid.to_string());
                let mut rec = |name: &'static str| recorded.insert(name);
                let st = r.parsed(&td.join("stat"), rec("stat"), pidstat::parse);
                let Some(st) = st else { continue };
                let schedstat = r.parsed(&td.join("schedstat"), rec("schedstat"), schedstat::parse_task);
                let migrations = r.parsed(&td.join("sched"), rec("sched"), parse_sched_migrations);
                let text = r.text(&td.join("status"), rec("status")).unwrap_or_default();
                t.threads.push(Thread {
                    tid,
                    comm: st.comm,
                    schedstat,
                    migrations,
                    voluntary: status_number(&text, "voluntary_ctxt_switches:"),
                    involuntary: status_number(&text, "nonvoluntary_ctxt_switches:"),
                    processor: st.processor,
                });
            }
        }
    }

    match Probe::with_root(r.root).detect_pid(pid) {
        Ok(b) => {
            let origin = b.binding_origin().map(|o| o.to_string());
            t.budget = Some(Budget {
                allowed: b.allowed_set(),
                limit: b.limit(),
                threads: b.threads(cotenant::Rounding::Floor),
                binding: b.binding().as_str().to_owned(),
                binding_cgroup: b.binding_level().map(|l| l.cgroup.clone()),
                binding_file: origin,
                cgroup_version: b.cgroup_version().to_owned(),
            });
        }
        Err(e) => r.note(format!("cotenant::cpus for process {pid}"), e.to_string()),
    }
    t
}

/// Reads the cpu and cpuset cgroups of every process (and the target's, and every ancestor of
/// those): weight, idle, quota, `cpu.stat`, `cpu.pressure`, effective cpus.
fn cgroups(r: &mut Reader<'_>, s: &mut Snapshot) {
    let target_cpu = s.target.as_ref().and_then(|t| t.cpu_cgroup.clone());
    let target_cpuset = s.target.as_ref().and_then(|t| t.cpuset_cgroup.clone());
    if let Some(h) = s.cpu_hierarchy.clone() {
        let paths = with_ancestors(s.processes.iter().filter_map(|p| p.cpu_cgroup.as_deref()), &target_cpu);
        let ours = target_cpu.as_deref().map(ancestors).unwrap_or_default();
        for path in paths {
            let Some(dir) = h.mount.dir_of(&path) else { continue };
            let dir = r.path(&dir);
            // Files of the target's cgroup and ancestors are recorded when missing; a root
            // cgroup has no quota or weight files, which is normal.
            let record = ours.contains(&path);
            let is_root = path == "/" || path == h.mount.root;
            let rec = record && !is_root;
            let g = CpuGroup {
                dir: dir.display().to_string(),
                weight: match h.version {
                    "v1" => {
                        r.parsed(&dir.join("cpu.shares"), rec, |t| cgroupfs::parse_number("cpu.shares", t))
                    }
                    _ => r.parsed(&dir.join("cpu.weight"), rec, |t| cgroupfs::parse_number("cpu.weight", t)),
                },
                // Absent before Linux 5.15: not a failure worth listing.
                idle: r.parsed(&dir.join("cpu.idle"), false, |t| {
                    cgroupfs::parse_number("cpu.idle", t).map(|v| v != 0)
                }),
                quota: match h.version {
                    "v1" => {
                        let q = r.parsed(&dir.join("cpu.cfs_quota_us"), rec, cgroupfs::parse_cfs_quota);
                        let p = r.parsed(&dir.join("cpu.cfs_period_us"), rec, cgroupfs::parse_cfs_period);
                        match (q, p) {
                            (Some(None), _) => Some(None),
                            (Some(Some(quota_us)), Some(period_us)) => {
                                Some(Some(Quota { quota_us, period_us }))
                            }
                            _ => None,
                        }
                    }
                    _ => r.parsed(&dir.join("cpu.max"), rec, cgroupfs::parse_cpu_max),
                },
                stat: r.parsed(&dir.join("cpu.stat"), record, cgroupfs::parse_cpu_stat),
                pressure: match h.version {
                    "v2" => r.parsed(&dir.join("cpu.pressure"), rec, parse_psi),
                    _ => None,
                },
            };
            s.cpu_groups.insert(path, g);
        }
    }
    if let Some(h) = s.cpuset_hierarchy.clone() {
        let paths =
            with_ancestors(s.processes.iter().filter_map(|p| p.cpuset_cgroup.as_deref()), &target_cpuset);
        for path in paths {
            let Some(dir) = h.mount.dir_of(&path) else { continue };
            let dir = r.path(&dir);
            let names: &[&str] = match h.version {
                "v1" => &["cpuset.effective_cpus", "cpuset.cpus"],
                _ => &["cpuset.cpus.effective"],
            };
            let mut g = CpusetGroup::default();
            for name in names {
                let file = dir.join(name);
                if let Some(cpus) = r.parsed(&file, false, cpulist::parse) {
                    g = CpusetGroup { file: file.display().to_string(), cpus: Some(cpus) };
                    break;
                }
                g.file = file.display().to_string();
            }
            s.cpuset_groups.insert(path, g);
        }
    }
}

/// `path` and every ancestor up to `/`, leaf first.
pub fn ancestors(path: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut p = path.trim_end_matches('/').to_owned();
    loop {
        out.push(if p.is_empty() { "/".to_owned() } else { p.clone() });
        match p.rfind('/') {
            Some(i) if !p.is_empty() => p.truncate(i),
            _ => break,
        }
    }
    out
}

fn with_ancestors<'a>(paths: impl Iterator<Item = &'a str>, extra: &'a Option<String>) -> Vec<String> {
    let mut set = BTreeSet::new();
    for p in paths.chain(extra.as_deref()) {
        for a in ancestors(p) {
            if set.len() >= MAX_CGROUPS {
                break;
            }
            set.insert(a);
        }
    }
    set.into_iter().collect()
}
