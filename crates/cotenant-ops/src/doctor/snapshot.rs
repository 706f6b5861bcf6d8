//! One snapshot of everything `doctor` looks at, read from a root directory standing in for `/`
//! (the system, or a fixture tree under `testdata/doctor/`), into plain structs.
//!
//! Tolerant by design: every file that cannot be read or parsed becomes a [`NotRead`] (file and
//! reason) and an absent value, never an error. The files of other processes, which may exit
//! while they are read, are only counted ([`Snapshot::unreadable_processes`]).
//!
//! The formats the library does not parse are parsed here, by small pure functions at the end
//! of this file: PSI files
//! (`/proc/pressure/cpu`, v2 `cpu.pressure`), `/proc/<pid>/task/<tid>/sched`
//! (`se.nr_migrations`), the context-switch lines of `status`, and `numa_maps`.

use cotenant::{
    cpus::Probe,
    procfs::{
        cgroup, cgroupfs, cgroupfs::CpuStat, cgroupfs::Quota, cpulist, cpulist::CpuSet, loadavg, mountinfo,
        mountinfo::CgroupMount, pidstat, schedstat, schedstat::TaskSchedstat, stat, stat::Stat, status,
    },
};
use std::{
    collections::{BTreeMap, BTreeSet},
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

/// A file that could not be read or parsed, and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct NotRead {
    /// The file (or what was being looked for), as opened (under the root).
    pub file: String,
    /// Why, in words.
    pub reason: String,
}

/// PSI (`/proc/pressure/cpu`, `cpu.pressure`): the `some` and `full` lines.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Psi {
    /// Some runnable task waited for a CPU.
    pub some: PsiLine,
    /// Every non-idle task waited (reported by newer kernels; 0 for the host CPU line).
    pub full: Option<PsiLine>,
}

/// One PSI line.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PsiLine {
    /// Percent of the last 10 s.
    pub avg10: f64,
    /// Percent of the last 60 s.
    pub avg60: f64,
    /// Total stall time, µs, since boot (or the cgroup's creation).
    pub total_us: u64,
}

/// Where a controller's hierarchy is mounted (as the host names it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hierarchy {
    /// `v1` or `v2`.
    pub version: &'static str,
    /// The mount, from mountinfo.
    pub mount: CgroupMount,
}

/// A cgroup of the cpu hierarchy.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CpuGroup {
    /// Its directory, under the root.
    pub dir: String,
    /// `cpu.shares` (v1) or `cpu.weight` (v2).
    pub weight: Option<u64>,
    /// `Some(None)` = unlimited; `None` = not read.
    pub quota: Option<Option<Quota>>,
    /// `cpu.stat`.
    pub stat: Option<CpuStat>,
    /// v2 `cpu.pressure`.
    pub pressure: Option<Psi>,
}

/// A cgroup of the cpuset hierarchy.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CpusetGroup {
    /// The effective-cpus file read.
    pub file: String,
    /// Its CPUs, if read.
    pub cpus: Option<CpuSet>,
}

/// One process of the host (a neighbour candidate).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Proc {
    /// Its pid.
    pub pid: u32,
    /// Command name.
    pub comm: String,
    /// utime + stime, in clock ticks.
    pub cpu_ticks: u64,
    /// Thread count.
    pub threads: u64,
    /// `Cpus_allowed_list`.
    pub allowed: Option<CpuSet>,
    /// Its cgroup in the cpu hierarchy.
    pub cpu_cgroup: Option<String>,
    /// Its cgroup in the cpuset hierarchy.
    pub cpuset_cgroup: Option<String>,
}

/// One thread of the target.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Thread {
    /// Thread id.
    pub tid: u32,
    /// Thread name.
    pub comm: String,
    /// `task/<tid>/schedstat`.
    pub schedstat: Option<TaskSchedstat>,
    /// `se.nr_migrations` from `task/<tid>/sched`.
    pub migrations: Option<u64>,
    /// `voluntary_ctxt_switches` from `task/<tid>/status`.
    pub voluntary: Option<u64>,
    /// `nonvoluntary_ctxt_switches`.
    pub involuntary: Option<u64>,
    /// The CPU it last ran on (`stat` field 39).
    pub processor: Option<u32>,
}

/// What `cotenant::cpus` says about the target.
#[derive(Debug, Clone, PartialEq)]
pub struct Budget {
    /// The CPUs it may run on.
    pub allowed: CpuSet,
    /// The fractional limit.
    pub limit: f64,
    /// The thread count (floor).
    pub threads: u32,
    /// `online`, `affinity`, `cpuset` or `quota`.
    pub binding: String,
    /// The cgroup whose quota binds.
    pub binding_cgroup: Option<String>,
    /// The file the binding value came from.
    pub binding_file: Option<String>,
    /// `none`, `v1`, `v2`, `hybrid`.
    pub cgroup_version: String,
}

/// The process being diagnosed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Target {
    /// Its pid.
    pub pid: u32,
    /// Whether `/proc/<pid>` exists.
    pub exists: bool,
    /// Whether its `stat` could be read (false: gone or not permitted).
    pub readable: bool,
    /// Command name.
    pub comm: String,
    /// Its threads.
    pub threads: Vec<Thread>,
    /// `Cpus_allowed_list`.
    pub allowed: Option<CpuSet>,
    /// Its cgroup in the cpu hierarchy.
    pub cpu_cgroup: Option<String>,
    /// Its cgroup in the cpuset hierarchy.
    pub cpuset_cgroup: Option<String>,
    /// Resident memory per NUMA node, bytes (`numa_maps`).
    pub numa_bytes: Option<BTreeMap<u32, u64>>,
    /// The CPU budget, if `cotenant::cpus` could compute it.
    pub budget: Option<Budget>,
}

/// Everything read at one instant.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// The pid of the process taking the snapshot, on the live system (left out of the
    /// neighbours); `None` for a fixture.
    pub self_pid: Option<u32>,
    /// Clock ticks per second of `stat` times.
    pub clk_tck: u64,
    /// `/sys/devices/system/cpu/online`.
    pub online: Option<CpuSet>,
    /// `/proc/stat`.
    pub stat: Option<Stat>,
    /// Runnable tasks from `/proc/loadavg` (used when `/proc/stat` lacks `procs_running`).
    pub loadavg_running: Option<u64>,
    /// `/proc/pressure/cpu`.
    pub psi: Option<Psi>,
    /// NUMA nodes and their CPUs.
    pub numa_nodes: Vec<(u32, CpuSet)>,
    /// Every process that could be read.
    pub processes: Vec<Proc>,
    /// Processes whose files could not be read (exited, or not permitted).
    pub unreadable_processes: u32,
    /// The cpu hierarchy.
    pub cpu_hierarchy: Option<Hierarchy>,
    /// The cpuset hierarchy.
    pub cpuset_hierarchy: Option<Hierarchy>,
    /// cpu cgroups by path (as in `/proc/<pid>/cgroup`).
    pub cpu_groups: BTreeMap<String, CpuGroup>,
    /// cpuset cgroups by path.
    pub cpuset_groups: BTreeMap<String, CpusetGroup>,
    /// The process diagnosed, if any.
    pub target: Option<Target>,
    /// What could not be read.
    pub not_read: Vec<NotRead>,
}

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
/// those): weight, quota, `cpu.stat`, `cpu.pressure`, effective cpus.
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

// ---- Parsers of the formats the library does not have. Pure, never panic. ----

/// A PSI file: `some avg10=.. avg60=.. avg300=.. total=..` and optionally a `full` line.
pub fn parse_psi(text: &str) -> Result<Psi, String> {
    let mut psi = Psi::default();
    let mut saw_some = false;
    for line in text.lines() {
        let mut words = line.split_ascii_whitespace();
        let kind = words.next();
        let mut l = PsiLine::default();
        for w in words {
            let (k, v) = w.split_once('=').ok_or(format!("{w:?} is not key=value"))?;
            let bad = || format!("{k}={v:?} is not a number");
            match k {
                "avg10" => l.avg10 = v.parse().map_err(|_| bad())?,
                "avg60" => l.avg60 = v.parse().map_err(|_| bad())?,
                "total" => l.total_us = v.parse().map_err(|_| bad())?,
                _ => {}
            }
        }
        match kind {
            Some("some") => {
                psi.some = l;
                saw_some = true;
            }
            Some("full") => psi.full = Some(l),
            _ => {}
        }
    }
    if !saw_some {
        return Err("no \"some\" line".into());
    }
    Ok(psi)
}

/// `se.nr_migrations` from `/proc/<pid>/task/<tid>/sched`.
pub fn parse_sched_migrations(text: &str) -> Result<u64, String> {
    for line in text.lines() {
        if let Some((k, v)) = line.split_once(':') {
            if k.trim() == "se.nr_migrations" {
                return v
                    .trim()
                    .parse()
                    .map_err(|_| format!("se.nr_migrations {:?} is not a number", v.trim()));
            }
        }
    }
    Err("no se.nr_migrations line (a kernel without CONFIG_SCHED_DEBUG?)".into())
}

/// A `key:\tnumber` line of a `status` file.
pub fn status_number(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| l.strip_prefix(key)).and_then(|v| v.trim().parse().ok())
}

/// `/proc/<pid>/numa_maps`: resident bytes per node (`N<node>=<pages>` × `kernelpagesize_kB`).
pub fn parse_numa_maps(text: &str) -> Result<BTreeMap<u32, u64>, String> {
    let mut per_node = BTreeMap::new();
    for line in text.lines() {
        let mut page_kb = 4u64;
        let mut pages: Vec<(u32, u64)> = Vec::new();
        for w in line.split_ascii_whitespace() {
            if let Some(kb) = w.strip_prefix("kernelpagesize_kB=") {
                page_kb = kb.parse().map_err(|_| format!("bad page size {kb:?}"))?;
            } else if let Some((n, count)) = w.strip_prefix('N').and_then(|r| r.split_once('=')) {
                if let (Ok(n), Ok(count)) = (n.parse::<u32>(), count.parse::<u64>()) {
                    pages.push((n, count));
                }
            }
        }
        for (n, count) in pages {
            *per_node.entry(n).or_insert(0u64) =
                per_node.get(&n).copied().unwrap_or(0).saturating_add(count.saturating_mul(page_kb * 1024));
        }
    }
    Ok(per_node)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn psi_lines() {
        let p = parse_psi(
            "some avg10=0.38 avg60=3.31 avg300=16.99 total=3241864452\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=7\n",
        )
        .unwrap();
        assert_eq!(p.some.total_us, 3241864452);
        assert_eq!(p.some.avg10, 0.38);
        assert_eq!(p.full.unwrap().total_us, 7);
        assert!(parse_psi("full avg10=1 total=2\n").is_err());
        assert!(parse_psi("some avg10=x\n").is_err());
    }

    #[test]
    fn sched_and_status_numbers() {
        let sched = "x (1, #threads: 1)\n----\nse.exec_start    :   1.5\nse.nr_migrations   :   17\n";
        assert_eq!(parse_sched_migrations(sched), Ok(17));
        assert!(parse_sched_migrations("nr_switches : 3\n").is_err());
        let status = "Name:\tx\nvoluntary_ctxt_switches:\t12\nnonvoluntary_ctxt_switches:\t3\n";
        assert_eq!(status_number(status, "voluntary_ctxt_switches:"), Some(12));
        assert_eq!(status_number(status, "nonvoluntary_ctxt_switches:"), Some(3));
    }

    #[test]
    fn numa_maps_bytes_per_node() {
        let text = "7f00 default anon=3 N0=2 N1=1 kernelpagesize_kB=4\n7f10 default file=/x N1=1 kernelpagesize_kB=2048\n";
        let m = parse_numa_maps(text).unwrap();
        assert_eq!(m.get(&0), Some(&(2 * 4096)));
        assert_eq!(m.get(&1), Some(&(4096 + 2048 * 1024)));
    }

    #[test]
    fn ancestors_leaf_first() {
        assert_eq!(ancestors("/a/b"), vec!["/a/b", "/a", "/"]);
        assert_eq!(ancestors("/"), vec!["/"]);
    }

    #[test]
    fn parsers_never_panic_on_junk() {
        for junk in ["", "(", ")", "((((", "1 () 2", "N=1 Nx=2 N0=", "some total=", "\u{0}\u{ff}", ":::"] {
            let _ = parse_psi(junk);
            let _ = parse_sched_migrations(junk);
            let _ = parse_numa_maps(junk);
            let _ = status_number(junk, "x:");
        }
    }
}
