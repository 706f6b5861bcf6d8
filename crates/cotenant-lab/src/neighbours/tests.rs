//! Unit tests of `neighbours`: the pure reductions on recorded reports, the Go worker's and
//! `lab-worker`'s arguments, and the async items' kinds, plan, checks and verdicts.

use super::run::{go_worker_args, lab_worker_args};
use super::*;
use crate::args::{Experiment, GoItems, Items, LabArgs, PoolKind};
use crate::worker::{SummaryRow, WorkerReport};

fn key(processes: u32, kind: PoolKind) -> Key {
    Key { setting: Setting::OneCgroup, load: 0.7, processes, kind, share_factor: 1.0 }
}

fn report(p99: f64, max: f64, tput: f64) -> WorkerReport {
    WorkerReport {
        pid: 1,
        rate_per_s: 100.0,
        threads: 2,
        final_target: 1,
        decisions: 10,
        borrows: 0,
        token_timeouts: 0,
        token_takebacks: 0,
        token_takes: 0,
        chunks: 100,
        exact_cpu: false,
        chunk_ns: 50_000.0,
        summary: SummaryRow {
            offered: 100,
            completed: 100,
            throughput_per_s: tput,
            service_p50_us: 5000.0,
            service_p99_us: p99,
            service_max_us: max,
            e2e_p50_us: 5000.0,
            e2e_p99_us: p99 * 2.0,
            e2e_max_us: max * 2.0,
            queue_p99_us: 0.0,
        },
        series: vec![],
        items: vec![],
        process_cpu_ns: 0,
        workers_cpu_ns: 0,
        wall_ns: 0,
        budget: None,
    }
}

#[test]
fn a_run_takes_the_median_process_p99_the_worst_max_and_the_total_throughput() {
    let f = figures(&[
        report(7000.0, 9000.0, 100.0),
        report(9000.0, 20_000.0, 90.0),
        report(8000.0, 8000.0, 95.0),
    ]);
    assert_eq!((f.service_p99_us, f.service_max_us, f.throughput_per_s), (8000.0, 20_000.0, 285.0));
    assert_eq!(f.e2e_p99_us, 16_000.0);
    assert_eq!(f.completed_fraction, 1.0);
}

#[test]
fn repeats_aggregate_to_median_and_spread() {
    let runs: Vec<RunFigures> = [10.0, 30.0, 20.0].iter().map(|&p| figures(&[report(p, p, p)])).collect();
    let a = aggregate(key(2, PoolKind::Adaptive), &runs);
    assert_eq!((a.median.service_p99_us, a.min.service_p99_us, a.max.service_p99_us), (20.0, 10.0, 30.0));
    assert_eq!(a.repeats, 3);
}

#[test]
fn the_go_worker_gets_its_own_arguments() {
    let config = |kind, go_items| RunConfig {
        processes: 2,
        kind,
        share_factor: 1.0,
        setting: Setting::OneCgroup,
        load: 1.5,
        service_ms: 5.0,
        duration_ms: 5000,
        repeat: 2,
        go_items,
        go_chunks: 0,
        chunks: 0,
        exact_cpu: false,
        async_wait_ms: 1.0,
    };
    let common = "--processes 2 --fair-cpus 1 --load 1.5 --service-ms 5 --duration-ms 5000 --seed 2";
    let joined = |kind, items| go_worker_args(&config(kind, items), 2).join(" ");
    assert_eq!(joined(PoolKind::GoDefault, GoItems::PerItem), common);
    assert_eq!(joined(PoolKind::GoDefault, GoItems::Limited), format!("{common} --limit"));
    assert_eq!(joined(PoolKind::GoOptimal, GoItems::Limited), format!("{common} --limit --gomaxprocs 1"));
    assert_eq!(joined(PoolKind::GoCotenant, GoItems::PerItem), format!("{common} --cotenant"));
    let calibrated = RunConfig { go_chunks: 110, ..config(PoolKind::GoDefault, GoItems::PerItem) };
    assert_eq!(go_worker_args(&calibrated, 2).join(" "), format!("{common} --chunks 110"));
    // Three processes on two CPUs: a fair share of 2/3 CPU, and still one P each.
    let three =
        go_worker_args(&RunConfig { processes: 3, ..config(PoolKind::GoOptimal, GoItems::PerItem) }, 2);
    assert_eq!(three[3], (2.0f64 / 3.0).to_string());
    assert_eq!(three.last().map(String::as_str), Some("1"));
}

#[test]
fn the_go_verdict_compares_the_controller_with_the_default() {
    let one = |kind, p99, tput| aggregate(key(2, kind), &[figures(&[report(p99, p99, tput)])]);
    let aggs = [
        one(PoolKind::GoDefault, 20_000.0, 400.0),
        one(PoolKind::GoOptimal, 6_000.0, 380.0),
        one(PoolKind::GoCotenant, 7_000.0, 396.0),
    ];
    let v = go_verdict(&aggs, Setting::OneCgroup, 0.7, 2).unwrap();
    assert_eq!(
        v,
        "one cgroup, load 70%, P=2: go-cotenant service p99 0.35x go-default's and 1.17x go-optimal's; \
         end-to-end p99 0.35x go-default's; throughput 0.99x go-default's"
    );
    assert_eq!(verdict(&aggs, Setting::OneCgroup, 0.7, 2), None, "no Rust kinds, no Rust verdict");
    assert_eq!(go_verdict(&aggs[..2], Setting::OneCgroup, 0.7, 2), None);
}

#[test]
fn the_verdict_is_computed_from_the_medians() {
    let one = |kind, p99, max, tput| aggregate(key(2, kind), &[figures(&[report(p99, max, tput)])]);
    let aggs = [
        one(PoolKind::Ignorant, 17_000.0, 40_000.0, 200.0),
        one(PoolKind::Optimal, 7_000.0, 10_000.0, 190.0),
        one(PoolKind::Adaptive, 7_700.0, 12_000.0, 194.0),
    ];
    let v = verdict(&aggs, Setting::OneCgroup, 0.7, 2).unwrap();
    assert!(
        v.starts_with("one cgroup, load 70%, P=2: adaptive service p99 0.45x ignorant's and 1.10x optimal's"),
        "{v}"
    );
    assert!(v.contains("max 0.30x ignorant's and 1.20x optimal's; end-to-end p99 0.45x"), "{v}");
    assert!(v.ends_with("throughput 0.97x ignorant's"), "{v}");
    assert_eq!(verdict(&aggs, Setting::OneCgroup, 0.7, 3), None);
    assert_eq!(verdict(&aggs, Setting::PerProcess, 0.7, 2), None);
    let table = table(&aggs);
    assert!(
        table.contains("| one cgroup | 70% | 2 | adaptive | 7.7 (7.7–7.7) | 12.0 (12.0–12.0) |"),
        "{table}"
    );
}

/// The aggregate of one run of `kind` at `load` with these figures (µs, items/s).
fn at_load(kind: PoolKind, load: f64, service_p99: f64, e2e_p99: f64, tput: f64) -> Aggregate {
    let figures = RunFigures {
        service_p99_us: service_p99,
        service_max_us: service_p99 * 2.0,
        e2e_p99_us: e2e_p99,
        throughput_per_s: tput,
        completed_fraction: 1.0,
    };
    aggregate(Key { setting: Setting::OneCgroup, load, processes: 2, kind, share_factor: 1.0 }, &[figures])
}

fn headline_plan(loads: &[f64]) -> Plan {
    Plan {
        settings: vec![Setting::OneCgroup],
        loads: loads.to_vec(),
        processes: vec![2],
        pools: headline::KINDS.iter().map(|&k| (k, 1.0)).collect(),
        repeats: 1,
        seconds: 8,
        go_chunks: 0,
        by_load: true,
    }
}

#[test]
fn the_headline_names_each_pools_gain_per_load_and_where_its_end_to_end_tail_first_exceeds_ignorants() {
    use PoolKind::*;
    // Recorded shapes: the default pool halves the service tail but queues longer at 100 %;
    // optimal queues longer from 90 %; plain never exceeds ignorant end to end.
    let aggregates = vec![
        at_load(Ignorant, 0.5, 10_000.0, 12_000.0, 200.0),
        at_load(Optimal, 0.5, 6_000.0, 9_000.0, 200.0),
        at_load(Adaptive, 0.5, 5_000.0, 8_000.0, 200.0),
        at_load(Plain, 0.5, 5_000.0, 8_000.0, 200.0),
        at_load(Ignorant, 0.9, 20_000.0, 40_000.0, 360.0),
        at_load(Optimal, 0.9, 9_000.0, 50_000.0, 340.0),
        at_load(Adaptive, 0.9, 9_000.0, 30_000.0, 355.0),
        at_load(Plain, 0.9, 9_500.0, 35_000.0, 350.0),
        at_load(Ignorant, 1.0, 21_000.0, 700_000.0, 400.0),
        at_load(Optimal, 1.0, 9_500.0, 900_000.0, 380.0),
        at_load(Adaptive, 1.0, 9_400.0, 1_050_000.0, 392.0),
        at_load(Plain, 1.0, 9_400.0, 600_000.0, 396.0),
    ];
    // Loads given out of order are read lowest first.
    let plan = headline_plan(&[1.0, 0.5, 0.9]);
    let lines = headline::verdicts(&aggregates, &plan);
    assert_eq!(lines.len(), 3, "one line per pool but ignorant: {lines:#?}");
    assert_eq!(
        lines[0],
        "optimal (CPUs / P, fixed): service p99 0.60x at 50%, 0.45x at 90%, 0.45x at 100% of ignorant's; \
         end-to-end p99 0.75x at 50%, 1.25x at 90%, 1.29x at 100%, first above ignorant's at 90%; \
         throughput at 100% 0.95x ignorant's"
    );
    assert!(
        lines[1].starts_with("cotenant default (adaptive, host tokens): service p99 0.50x at 50%"),
        "{}",
        lines[1]
    );
    assert!(lines[1].contains("1.50x at 100%, first above ignorant's at 100%"), "{}", lines[1]);
    assert!(lines[1].ends_with("throughput at 100% 0.98x ignorant's"), "{}", lines[1]);
    assert!(lines[2].contains(", never above ignorant's up to 100%"), "{}", lines[2]);

    let chart = headline::chart(&aggregates, &plan).unwrap();
    assert_eq!(chart.file_stem, "headline");
    assert!(chart.log_y && chart.beside.len() == 1 && chart.beside[0].log_y);
    assert_eq!(chart.series.len(), 4, "one line per pool");
    let adaptive = &chart.series[2];
    assert_eq!(adaptive.name, headline::label(Adaptive));
    assert_eq!(adaptive.points, vec![(50.0, 5.0), (90.0, 9.0), (100.0, 9.4)], "x: load %, y: ms");
    assert_eq!(chart.beside[0].series[2].points, vec![(50.0, 8.0), (90.0, 30.0), (100.0, 1050.0)]);
}

#[test]
fn a_headline_without_the_ignorant_pool_has_no_verdict_and_a_run_without_loads_no_chart() {
    let aggregates = vec![at_load(PoolKind::Adaptive, 0.7, 5_000.0, 8_000.0, 200.0)];
    assert!(headline::verdicts(&aggregates, &headline_plan(&[0.7])).is_empty());
    let mut empty = headline_plan(&[]);
    empty.settings.clear();
    assert!(headline::chart(&aggregates, &empty).is_none());
}

/// A lab on a host of `cpus` CPUs without real cgroups (nothing is read or created).
fn lab(cpus: u32) -> crate::Lab {
    crate::Lab {
        host: crate::host::HostFacts {
            cpus,
            kernel: String::new(),
            cgroup_version: "v2".to_owned(),
            loadavg_before: String::new(),
            cgroups: "unavailable: a test".to_owned(),
        },
        layout: Err("a test".to_owned()),
    }
}

fn neighbours_args(items: Items, pools: &[PoolKind]) -> LabArgs {
    let mut args = LabArgs::defaults(Experiment::Neighbours);
    args.items = items;
    args.pools = pools.to_vec();
    args
}

#[test]
fn every_kind_has_one_name_in_tables_rows_and_on_the_command_line() {
    use clap::ValueEnum as _;
    for kind in KINDS.into_iter().chain(ASYNC_KINDS).chain([PoolKind::Fixed]) {
        let serialized = serde_json::to_value(kind).unwrap();
        assert_eq!(serialized, kind_name(kind), "{kind:?}: its JSON name");
        // `lab-worker --pool` takes it under the same name.
        let value = kind.to_possible_value().unwrap_or_else(|| panic!("{kind:?} is not a --pool value"));
        assert_eq!(value.get_name(), kind_name(kind));
    }
    assert_eq!(ASYNC_KINDS.map(kind_name), ["tokio-default", "tokio-optimal", "cotenant-async"]);
    assert!(ASYNC_KINDS.iter().all(|kind| kind.is_async()) && !KINDS.iter().any(|kind| kind.is_async()));
    assert!(PoolKind::GoCotenant.to_possible_value().is_none(), "the Go kinds are no lab-worker pools");
}

#[test]
fn async_items_plan_the_three_executors_and_thread_items_the_pools() {
    let lab = lab(2);
    let plan = Plan::neighbours(&lab, &neighbours_args(Items::Async, &[]));
    assert_eq!(plan.pools, ASYNC_KINDS.map(|kind| (kind, 1.0)).to_vec());
    assert_eq!(plan.settings, [Setting::OneCgroup], "no real cgroups: one cgroup only");
    let plan = Plan::neighbours(&lab, &neighbours_args(Items::Threads, &[]));
    assert_eq!(plan.pools, KINDS.map(|kind| (kind, 1.0)).to_vec());
    let chosen = Plan::neighbours(&lab, &neighbours_args(Items::Async, &[PoolKind::CotenantAsync]));
    assert_eq!(chosen.pools, [(PoolKind::CotenantAsync, 1.0)]);
}

#[test]
fn items_pools_and_the_wait_must_agree() {
    assert_eq!(check_items(&neighbours_args(Items::Async, &ASYNC_KINDS)), Ok(()));
    assert_eq!(check_items(&neighbours_args(Items::Threads, &KINDS)), Ok(()));
    assert_eq!(
        check_items(&neighbours_args(Items::Async, &[PoolKind::CotenantAsync, PoolKind::Ignorant])),
        Err("--pools ignorant: with --items async the kinds are tokio-default, tokio-optimal and \
             cotenant-async"
            .to_owned())
    );
    assert_eq!(
        check_items(&neighbours_args(Items::Threads, &[PoolKind::Adaptive, PoolKind::TokioDefault])),
        Err("--pools tokio-default: this kind serves async items (`lab neighbours --items async`)".to_owned())
    );
    let mut waiting = neighbours_args(Items::Threads, &[]);
    waiting.async_wait_ms = Some(2.0);
    assert!(check_items(&waiting).unwrap_err().starts_with("--async-wait-ms: only with --items async"));
    waiting.items = Items::Async;
    assert_eq!(check_items(&waiting), Ok(()));
}

/// `lab-worker`'s command line, as the CLI embeds it.
#[derive(Debug, clap::Parser)]
struct Worker {
    #[command(flatten)]
    args: crate::args::LabWorkerArgs,
}

#[test]
fn lab_worker_gets_the_async_kind_and_its_wait_and_parses_them() {
    use clap::Parser as _;
    let config = |kind| RunConfig {
        processes: 2,
        kind,
        share_factor: 1.0,
        setting: Setting::OneCgroup,
        load: 1.0,
        service_ms: 5.0,
        duration_ms: 1000,
        repeat: 0,
        go_items: GoItems::Limited,
        go_chunks: 0,
        chunks: 120,
        exact_cpu: false,
        async_wait_ms: 2.5,
    };
    let parsed = |kind| {
        let mut line = vec!["lab-worker".to_owned()];
        line.extend(lab_worker_args(&config(kind)));
        line.extend(["--start-at-ns", "0", "--parent", "1"].map(str::to_owned));
        Worker::try_parse_from(line).unwrap().args
    };
    let worker = parsed(PoolKind::CotenantAsync);
    assert_eq!((worker.pool, worker.async_wait_ms, worker.chunks), (PoolKind::CotenantAsync, 2.5, Some(120)));
    assert_eq!(parsed(PoolKind::TokioOptimal).pool, PoolKind::TokioOptimal);
    let tokio = lab_worker_args(&config(PoolKind::TokioDefault));
    assert!(tokio.ends_with(&["--async-wait-ms".to_owned(), "2.5".to_owned()]), "{tokio:?}");
    assert!(!lab_worker_args(&config(PoolKind::Adaptive)).contains(&"--async-wait-ms".to_owned()));
    let thread_items = parsed(PoolKind::Adaptive);
    assert_eq!(thread_items.async_wait_ms, crate::args::DEFAULT_ASYNC_WAIT_MS, "the worker's default");
    // `--exact-cpu` replaces the calibrated chunks (the worker refuses both at once).
    let exact = RunConfig { exact_cpu: true, ..config(PoolKind::Adaptive) };
    let mut line = vec!["lab-worker".to_owned()];
    line.extend(lab_worker_args(&exact));
    line.extend(["--start-at-ns", "0", "--parent", "1"].map(str::to_owned));
    let worker = Worker::try_parse_from(line).unwrap().args;
    assert!(worker.exact_cpu && worker.chunks.is_none());
}

/// Recorded shapes of an async run at P = 2 in one cgroup: tokio's default runtime doubles the
/// service tail at 100 %; the cotenant executor stays near the static split; at 70 % it queues
/// a little longer end to end; at 150 % tokio-default's throughput was not recorded (0).
fn async_aggregates() -> Vec<Aggregate> {
    use PoolKind::*;
    vec![
        at_load(TokioDefault, 0.7, 9_000.0, 10_000.0, 280.0),
        at_load(TokioOptimal, 0.7, 6_000.0, 12_000.0, 279.0),
        at_load(CotenantAsync, 0.7, 6_100.0, 11_000.0, 280.0),
        at_load(TokioDefault, 1.0, 20_000.0, 40_000.0, 400.0),
        at_load(TokioOptimal, 1.0, 8_000.0, 50_000.0, 380.0),
        at_load(CotenantAsync, 1.0, 8_800.0, 30_000.0, 392.0),
        at_load(TokioDefault, 1.5, 21_000.0, 900_000.0, 0.0),
        at_load(CotenantAsync, 1.5, 9_000.0, 800_000.0, 396.0),
    ]
}

#[test]
fn the_async_verdict_compares_the_cotenant_executor_with_tokios_default() {
    let aggregates = async_aggregates();
    assert_eq!(
        async_verdict(&aggregates, Setting::OneCgroup, 1.0, 2).unwrap(),
        "one cgroup, load 100%, P=2: cotenant-async service p99 0.44x tokio-default's and 1.10x \
         tokio-optimal's; end-to-end p99 0.75x tokio-default's; throughput 0.98x tokio-default's"
    );
    // tokio-default's throughput of 0 has no ratio.
    let overload = async_verdict(&aggregates, Setting::OneCgroup, 1.5, 2).unwrap();
    assert!(overload.ends_with("throughput NaNx tokio-default's"), "{overload}");
    assert_eq!(async_verdict(&aggregates, Setting::PerProcess, 1.0, 2), None);
    assert_eq!(verdict(&aggregates, Setting::OneCgroup, 1.0, 2), None, "no thread pools, no pool verdict");
    assert_eq!(go_verdict(&aggregates, Setting::OneCgroup, 1.0, 2), None);
}

#[test]
fn the_async_targets_say_met_not_met_or_not_measured() {
    let lines = async_acceptance(&async_aggregates());
    assert_eq!(
        lines,
        [
            "one cgroup, load 100%, P=2, target: cotenant-async service p99 1.10x tokio-optimal's \
             (at most 1.20x): met",
            "one cgroup, load 100%, P=2, target: cotenant-async service p99 0.44x tokio-default's \
             (at most 0.60x): met",
            "one cgroup, load 70%, P=2, target: cotenant-async end-to-end p99 1.10x tokio-default's \
             (at most 1.00x): not met",
            "one cgroup, load 150%, P=2, target: cotenant-async throughput against tokio-default's \
             (at least 0.97x): not measured (tokio-default's is 0)",
        ]
    );
    // A run without those loads (a quick one at 70 % only) measures one target of four.
    let quick: Vec<Aggregate> = async_aggregates().into_iter().filter(|a| a.key.load == 0.7).collect();
    let lines = async_acceptance(&quick);
    assert_eq!(lines.len(), 4);
    assert!(
        lines[0].ends_with("against tokio-optimal's (at most 1.20x): not measured (no such run)"),
        "{lines:?}"
    );
    assert!(lines[2].ends_with("not met") && lines[3].ends_with("not measured (no such run)"), "{lines:?}");
}

#[test]
fn an_async_plan_ends_its_verdicts_with_the_targets() {
    let plan = Plan {
        settings: vec![Setting::OneCgroup],
        loads: vec![0.7],
        processes: vec![2],
        pools: ASYNC_KINDS.map(|kind| (kind, 1.0)).to_vec(),
        repeats: 1,
        seconds: 1,
        go_chunks: 0,
        by_load: false,
    };
    let recorded = async_aggregates();
    let (aggregates, verdicts) = plan
        .execute(|key, _| {
            let a = recorded.iter().find(|a| a.key.kind == key.kind && a.key.load == key.load).unwrap();
            Ok(a.median)
        })
        .unwrap();
    assert_eq!(aggregates.len(), 3);
    assert_eq!(verdicts.len(), 1 + 4, "the comparison at 70 %, then the four targets: {verdicts:#?}");
    assert!(verdicts[0].starts_with("one cgroup, load 70%, P=2: cotenant-async service p99"), "{verdicts:?}");
    assert!(verdicts[1..].iter().all(|line| line.contains(", target: cotenant-async ")));
    let table = table(&aggregates);
    assert!(table.contains("| one cgroup | 70% | 2 | tokio-default |"), "{table}");
}
