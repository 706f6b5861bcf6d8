//! `cotenant top`: every process of this user on this host that runs cooperating cotenant pools,
//! one row per pool, refreshed twice a second and sorted by CPU share. Nothing runs in the
//! background: each pool's control thread publishes a small status record
//! (`cotenant::internal::status_record`), and `top` reads the folder (`cotenant_ops::status`:
//! only live writers are shown, stale records removed). `--once` prints one table, `--json` one
//! snapshot; the view itself is ratatui's (feature `tui`, on by default), or a repainted plain
//! table in a build without it.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Args;
use cotenant_ops::status::{self, CpuMeter, ProcessView, Scan};

use crate::usage;

/// How often the view is refreshed.
const REFRESH: Duration = Duration::from_millis(500);
/// `--once`: the CPU share is measured between two readings this far apart.
const ONCE_INTERVAL: Duration = Duration::from_millis(200);
/// Where the writers' liveness and CPU time are read.
const PROC: &str = "/proc";
/// Problems shown at the foot of the view at most (all of them go to stderr with `--once`).
const MAX_PROBLEMS_SHOWN: usize = 3;

/// `cotenant top`'s arguments.
#[derive(Debug, Args)]
pub struct TopArgs {
    /// Print one table and exit, for scripts (the CPU share is measured over 200 ms).
    #[arg(long)]
    pub once: bool,
    /// Print one snapshot as JSON and exit (implies --once): an array of processes, each with
    /// its pools. The fields are documented in docs/top.md.
    #[arg(long)]
    pub json: bool,
    /// Read the status records from DIR instead of this user's status folder
    /// ($COTENANT_STATUS_DIR, else /dev/shm/cotenant-status-<uid>, else
    /// $XDG_RUNTIME_DIR/cotenant-status).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

/// Runs `cotenant top`.
pub fn run(args: &TopArgs) -> anyhow::Result<()> {
    let dir = match &args.dir {
        Some(dir) if !dir.is_dir() => return usage::bail(format!("--dir {}: no such folder", dir.display())),
        Some(dir) => dir.clone(),
        None => status::dir_for_user(status::euid())?.context(
            "this host has no folder for status records (no /dev/shm and no $XDG_RUNTIME_DIR): \
             set COTENANT_STATUS_DIR for the pools and for top, or pass --dir",
        )?,
    };
    if args.once || args.json {
        once(&dir, args.json)
    } else {
        live(&dir)
    }
}

/// `--once` and `--json`: two scans `ONCE_INTERVAL` apart (one if nothing publishes), then one
/// table or one JSON array on stdout; problems go to stderr.
fn once(dir: &Path, json: bool) -> anyhow::Result<()> {
    let owner = status::euid();
    let mut meter = CpuMeter::new(status::clock_ticks_per_second());
    let first = status::scan(dir, owner, Path::new(PROC), true)?;
    let (scan, mut views) = if first.live.is_empty() {
        let views = meter.views(&first.live, Instant::now());
        (first, views)
    } else {
        meter.views(&first.live, Instant::now());
        std::thread::sleep(ONCE_INTERVAL);
        let second = status::scan(dir, owner, Path::new(PROC), true)?;
        let views = meter.views(&second.live, Instant::now());
        (second, views)
    };
    status::sort_by_cpu(&mut views);
    for problem in &scan.problems {
        eprintln!("cotenant top: {problem}");
    }
    if !scan.other_namespace.is_empty() {
        eprintln!(
            "cotenant top: not shown: the records of pids {:?}, written in another PID namespace",
            scan.other_namespace
        );
    }
    let mut out = std::io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(&mut out, &views)?;
        writeln!(out)?;
    } else {
        let screen = Screen::new(&scan, &views);
        for line in screen.header.iter().chain(std::iter::once(&String::new())).chain(&screen.table_lines()) {
            writeln!(out, "{line}")?;
        }
        if views.is_empty() {
            writeln!(out, "{}", nobody(&scan))?;
        }
    }
    out.flush().context("writing to stdout")
}

/// The columns, their widths, and whether each is right-aligned (numbers).
const COLUMNS: [(&str, usize, bool); 12] = [
    ("PID", 8, false),
    ("COMMAND", 15, false),
    ("POOL", 16, false),
    ("TOKENS", 11, false),
    ("THREADS", 7, true),
    ("TARGET", 6, true),
    ("RUNNING", 7, true),
    ("QUEUED", 7, true),
    ("HOLDS", 5, true),
    ("WAITS", 5, true),
    ("CPU%", 6, true),
    ("P99 WAIT", 9, true),
];

/// `text` cut or padded to `width` characters.
fn fit(text: &str, width: usize, right: bool) -> String {
    let cut: String = text.chars().take(width).collect();
    if right {
        format!("{cut:>width$}")
    } else {
        format!("{cut:<width$}")
    }
}

/// A nanosecond duration in the unit that reads best; `>max` above the histogram's last bound.
fn duration_text(ns: u64) -> String {
    match ns {
        u64::MAX => ">max".into(),
        0..1_000 => format!("{ns}ns"),
        1_000..1_000_000 => format!("{:.1}us", ns as f64 / 1e3),
        1_000_000..1_000_000_000 => format!("{:.1}ms", ns as f64 / 1e6),
        _ => format!("{:.2}s", ns as f64 / 1e9),
    }
}

/// One row per pool (a process without pools gets one row), cells fitted to their columns.
fn rows(views: &[ProcessView]) -> Vec<[String; 12]> {
    let number = |n: Option<u64>| n.map_or_else(|| "-".to_owned(), |n| n.to_string());
    let mut rows = Vec::new();
    for process in views {
        let cpu = process.cpu_percent.map_or_else(|| "-".to_owned(), |c| format!("{c:.1}"));
        let pools: Vec<Option<&status::PoolView>> =
            if process.pools.is_empty() { vec![None] } else { process.pools.iter().map(Some).collect() };
        for pool in pools {
            let cells = [
                process.pid.to_string(),
                process.command.clone(),
                pool.map_or_else(
                    || "-".to_owned(),
                    |p| if p.name.is_empty() { "?".into() } else { p.name.clone() },
                ),
                pool.map_or_else(|| "-".to_owned(), |p| p.tokens.clone()),
                number(pool.map(|p| p.threads)),
                number(pool.map(|p| p.target)),
                number(pool.map(|p| p.running)),
                number(pool.map(|p| p.queued)),
                number(pool.filter(|p| p.token_set.is_some()).map(|p| p.token_holds)),
                number(pool.and_then(|p| p.token_waits)),
                cpu.clone(),
                pool.and_then(|p| p.p99_queue_wait_ns).map_or_else(|| "-".to_owned(), duration_text),
            ];
            rows.push(std::array::from_fn(|i| {
                let (_, width, right) = COLUMNS[i];
                fit(&cells[i], width, right)
            }));
        }
    }
    rows
}

/// The host's online CPUs (`/sys/devices/system/cpu/online`), else what the standard library
/// says this process may use.
fn host_cpus() -> u32 {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|text| cotenant::internal::procfs::cpulist::parse(&text).ok())
        .map(|set| set.count())
        .filter(|&n| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get() as u32))
}

/// The token sets the pools share, each with its state now (`tokens list`'s reading).
fn token_sets(views: &[ProcessView]) -> Vec<String> {
    let mut names: Vec<(&str, Option<u32>)> = views
        .iter()
        .flat_map(|p| &p.pools)
        .filter_map(|pool| pool.token_set.as_deref().map(|set| (set, pool.token_count)))
        .collect();
    names.sort_unstable();
    names.dedup_by(|a, b| a.0 == b.0);
    let listed = cotenant::tokens::list::list().unwrap_or_default();
    let count = |n: Option<u32>| n.map_or_else(|| "?".to_owned(), |n| n.to_string());
    names
        .into_iter()
        .map(|(name, tokens)| match listed.iter().find(|set| set.name.as_deref() == Some(name)) {
            Some(set) => format!(
                "{name} ({} tokens, {} free, {} waiting, {} member processes)",
                count(set.tokens),
                count(set.free),
                count(set.waiting),
                count(set.members)
            ),
            None => format!("{name} ({} tokens)", count(tokens)),
        })
        .collect()
}

/// What the view says when no live process publishes.
fn nobody(scan: &Scan) -> String {
    if scan.missing {
        format!("no pool has published in {} yet", scan.dir.display())
    } else {
        format!(
            "no live process publishes in {} (fixed pools without host tokens never do)",
            scan.dir.display()
        )
    }
}

/// One screenful: header lines, the table's rows, and notes for its foot.
struct Screen {
    header: Vec<String>,
    rows: Vec<[String; 12]>,
    notes: Vec<String>,
}

impl Screen {
    fn new(scan: &Scan, views: &[ProcessView]) -> Screen {
        let sets = token_sets(views);
        let pools: usize = views.iter().map(|p| p.pools.len()).sum();
        let header = vec![
            format!(
                "cotenant top - {} CPUs on this host - {} processes, {pools} pools - records in {}",
                host_cpus(),
                views.len(),
                scan.dir.display()
            ),
            if sets.is_empty() {
                "token sets: none".to_owned()
            } else {
                format!("token sets: {}", sets.join("; "))
            },
        ];
        let mut notes = Vec::new();
        if views.is_empty() {
            notes.push(nobody(scan));
        }
        if !scan.other_namespace.is_empty() {
            notes.push(format!(
                "{} records were written in another PID namespace (another container?): not shown",
                scan.other_namespace.len()
            ));
        }
        notes.extend(scan.problems.iter().take(MAX_PROBLEMS_SHOWN).cloned());
        if scan.problems.len() > MAX_PROBLEMS_SHOWN {
            notes.push(format!(
                "... and {} more problems (cotenant top --once lists them)",
                scan.problems.len() - MAX_PROBLEMS_SHOWN
            ));
        }
        Screen { header, rows: rows(views), notes }
    }

    /// A screen that says why the folder could not be read (the view keeps trying).
    fn failed(dir: &Path, error: &anyhow::Error) -> Screen {
        Screen {
            header: vec![format!("cotenant top - records in {}", dir.display())],
            rows: Vec::new(),
            notes: vec![format!("{error:#}")],
        }
    }

    /// Scans the folder now, measuring CPU shares since the last scan.
    fn read(dir: &Path, meter: &mut CpuMeter) -> Screen {
        match status::scan(dir, status::euid(), Path::new(PROC), true) {
            Ok(scan) => {
                let mut views = meter.views(&scan.live, Instant::now());
                status::sort_by_cpu(&mut views);
                Screen::new(&scan, &views)
            }
            Err(error) => Screen::failed(dir, &error),
        }
    }

    /// The column titles and the rows as text lines.
    fn table_lines(&self) -> Vec<String> {
        let titles: Vec<String> =
            COLUMNS.iter().map(|&(title, width, right)| fit(title, width, right)).collect();
        std::iter::once(titles.join(" ").trim_end().to_owned())
            .chain(self.rows.iter().map(|row| row.join(" ").trim_end().to_owned()))
            .collect()
    }
}

/// Undoes what `ratatui::try_init` did to the terminal (raw mode, the alternate screen) on every
/// way out of the view; a panic is covered twice, by ratatui's panic hook and by this guard.
#[cfg(feature = "tui")]
struct RestoreTerminal;

#[cfg(feature = "tui")]
impl Drop for RestoreTerminal {
    fn drop(&mut self) {
        ratatui::restore();
    }
}

/// The live view: repainted every `REFRESH`; `q`, Esc or Ctrl-C quits.
#[cfg(feature = "tui")]
fn live(dir: &Path) -> anyhow::Result<()> {
    use std::io::IsTerminal as _;

    use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};

    if !std::io::stdout().is_terminal() {
        return usage::bail("standard output is not a terminal: use --once for one table, or --json");
    }
    // SIGTERM and SIGHUP (a supervisor, `timeout`, a closed terminal) end the view like `q`,
    // so that the terminal is restored; Ctrl-C arrives as a key in raw mode.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for signal in [libc::SIGTERM, libc::SIGHUP] {
        signal_hook::flag::register(signal, stop.clone()).context("installing the signal handlers")?;
    }
    let _restore = RestoreTerminal;
    let mut terminal = ratatui::try_init().context("cannot start the terminal view")?;
    let mut meter = CpuMeter::new(status::clock_ticks_per_second());
    loop {
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            return Ok(());
        }
        let screen = Screen::read(dir, &mut meter);
        terminal.draw(|frame| screen.draw(frame)).context("drawing the view")?;
        let deadline = Instant::now() + REFRESH;
        loop {
            let now = Instant::now();
            if now >= deadline || !event::poll(deadline - now).context("reading the keyboard")? {
                break;
            }
            match event::read().context("reading the keyboard")? {
                Event::Key(key) if key.kind == KeyEventKind::Press => {
                    let ctrl_c =
                        key.code == KeyCode::Char('c') && key.modifiers.contains(KeyModifiers::CONTROL);
                    if ctrl_c || matches!(key.code, KeyCode::Char('q') | KeyCode::Char('Q') | KeyCode::Esc) {
                        return Ok(());
                    }
                }
                Event::Resize(..) => break,
                _ => {}
            }
        }
    }
}

#[cfg(feature = "tui")]
impl Screen {
    fn draw(&self, frame: &mut ratatui::Frame) {
        use ratatui::layout::{Constraint, Layout};
        use ratatui::style::{Modifier, Style};
        use ratatui::text::Line;
        use ratatui::widgets::{Paragraph, Row, Table};

        let lines = |texts: &[String]| {
            Paragraph::new(texts.iter().map(|t| Line::from(t.clone())).collect::<Vec<_>>())
        };
        let mut foot = vec!["q, Esc or Ctrl-C: quit - refreshed every 0.5 s - sorted by CPU".to_owned()];
        foot.extend(self.notes.iter().cloned());
        let height = |n: usize| u16::try_from(n).unwrap_or(u16::MAX);
        let [top, middle, bottom] = Layout::vertical([
            Constraint::Length(height(self.header.len() + 1)),
            Constraint::Min(1),
            Constraint::Length(height(foot.len())),
        ])
        .areas(frame.area());
        frame.render_widget(lines(&self.header[..]), top);
        let widths = COLUMNS.map(|(_, width, _)| Constraint::Length(height(width)));
        let titles = Row::new(COLUMNS.map(|(title, width, right)| fit(title, width, right)))
            .style(Style::new().add_modifier(Modifier::BOLD));
        let table = Table::new(self.rows.iter().map(|row| Row::new(row.clone())), widths)
            .header(titles)
            .column_spacing(1);
        frame.render_widget(table, middle);
        frame.render_widget(lines(&foot[..]), bottom);
    }
}

/// The live view of a build without the `tui` feature: the plain table repainted every
/// `REFRESH` until interrupted (Ctrl-C).
#[cfg(not(feature = "tui"))]
fn live(dir: &Path) -> anyhow::Result<()> {
    let mut meter = CpuMeter::new(status::clock_ticks_per_second());
    loop {
        let screen = Screen::read(dir, &mut meter);
        let mut out = std::io::stdout().lock();
        // Home, then clear: a terminal that ignores these just scrolls.
        write!(out, "\x1b[H\x1b[2J")?;
        for line in screen.header.iter().chain(std::iter::once(&String::new())).chain(&screen.table_lines()) {
            writeln!(out, "{line}")?;
        }
        for note in &screen.notes {
            writeln!(out, "{note}")?;
        }
        writeln!(out, "Ctrl-C: quit (a build without the terminal view)")?;
        out.flush().context("writing to stdout")?;
        drop(out);
        std::thread::sleep(REFRESH);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cotenant_ops::status::PoolView;

    fn pool(name: &str, holds: u64, p99: Option<u64>) -> PoolView {
        PoolView {
            name: name.into(),
            policy: "adaptive(tokens)".into(),
            threads: 2,
            target: 1,
            running: 1,
            queued: 3,
            completed: 10,
            tokens: "engaged".into(),
            token_set: Some("web".into()),
            token_count: Some(2),
            token_holds: holds,
            token_waits: Some(0),
            p99_queue_wait_ns: p99,
        }
    }

    #[test]
    fn each_pool_is_a_row_starting_with_its_process_s_pid() {
        let views = [ProcessView {
            pid: 4242,
            command: "a-rather-long-command-name".into(),
            start_time: 1,
            cpu_percent: Some(48.04),
            record_age_ms: Some(3),
            publish_failures: 0,
            pools: vec![pool("cpu", 1, Some(1_500_000)), pool("io", 0, None)],
        }];
        let table = rows(&views);
        assert_eq!(table.len(), 2);
        let line = table[0].join(" ");
        let words: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(
            words,
            ["4242", "a-rather-long-c", "cpu", "engaged", "2", "1", "1", "3", "1", "0", "48.0", "1.5ms"]
        );
        assert_eq!(table[1].join(" ").split_whitespace().next_back(), Some("-"), "no histogram: no p99");
    }

    #[test]
    fn durations_read_in_their_unit() {
        assert_eq!(duration_text(999), "999ns");
        assert_eq!(duration_text(1_500), "1.5us");
        assert_eq!(duration_text(2_000_000), "2.0ms");
        assert_eq!(duration_text(3_210_000_000), "3.21s");
        assert_eq!(duration_text(u64::MAX), ">max");
    }
}
