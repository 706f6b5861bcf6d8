//! `cotenant lab`'s command line: each experiment takes its own flags, and the [`LabArgs`] it
//! gives the experiments hold the old defaults for the rest.

use super::*;
use clap::{CommandFactory, Parser, ValueEnum};

/// `cotenant lab` alone, as the `cotenant` command embeds it.
#[derive(Debug, Parser)]
#[command(name = "lab")]
struct Lab {
    #[command(flatten)]
    lab: LabCommand,
}

fn parse(args: &[&str]) -> Result<LabArgs, clap::Error> {
    Lab::try_parse_from(std::iter::once("lab").chain(args.iter().copied())).map(|lab| lab.lab.lab_args())
}

#[test]
fn the_command_line_is_well_formed() {
    Lab::command().debug_assert();
}

#[test]
fn every_experiment_is_a_subcommand_of_its_name() {
    for &experiment in Experiment::value_variants() {
        let args = parse(&[experiment.name()]).unwrap();
        assert_eq!(args.experiment, experiment);
    }
}

#[test]
fn an_experiment_gets_its_flags_and_the_old_defaults_for_the_rest() {
    let args = parse(&[
        "neighbours",
        "--quick",
        "--processes",
        "2,4",
        "--pools",
        "adaptive",
        "--setting",
        "one-cgroup",
        "--load",
        "0.7",
        "--repeats",
        "2",
        "--seconds",
        "3",
        "--json",
    ])
    .unwrap();
    assert!(args.quick && args.json);
    assert_eq!(args.processes, [2, 4]);
    assert_eq!(args.pools, [PoolKind::Adaptive]);
    assert_eq!(args.setting, SettingArg::OneCgroup);
    assert_eq!(args.load, [0.7]);
    assert_eq!((args.repeats, args.seconds), (Some(2), Some(3)));
    assert_eq!(args.go_items, GoItems::Limited);
    assert!(args.scenarios.is_empty() && args.round_trip_us.is_none() && args.out.is_none());
    let args = parse(&["quota"]).unwrap();
    assert!(!args.quick && args.processes.is_empty() && args.pools.is_empty() && args.load.is_empty());
    assert_eq!(args.setting, SettingArg::Both);
    assert_eq!(args.client_priority, crate::loadgen::ClientPriority::Realtime);
    let args = parse(&["spin", "--round-trip-us", "300", "--out", "DIR"]).unwrap();
    assert_eq!(args.round_trip_us, Some(300));
    assert_eq!(args.out, Some(PathBuf::from("DIR")));
}

#[test]
fn clap_defaults_are_the_defaults_of_lab_args() {
    let defaults = LabArgs::defaults(Experiment::Neighbours);
    let neighbours = parse(&["neighbours"]).unwrap();
    assert_eq!(neighbours.service_ms.to_bits(), defaults.service_ms.to_bits());
    assert_eq!(neighbours.setting, defaults.setting);
    assert_eq!(parse(&["go-neighbours"]).unwrap().go_items, defaults.go_items);
    assert_eq!(parse(&["isolation"]).unwrap().client_priority, defaults.client_priority);
}

#[test]
fn a_flag_an_experiment_does_not_read_is_refused() {
    for args in [
        &["quota", "--processes", "2"][..],
        &["spin", "--pools", "adaptive"][..],
        &["neighbours", "--round-trip-us", "300"][..],
        &["factor", "--setting", "one-cgroup"][..],
        &["throttling", "--repeats", "2"][..],
        &["runtimes", "--quick"][..],
        &["clean", "--json"][..],
        &["all", "--processes", "2"][..],
    ] {
        let error = parse(args).unwrap_err();
        assert_eq!(error.kind(), clap::error::ErrorKind::UnknownArgument, "{args:?}: {error}");
    }
    assert_eq!(parse(&["all", "--quick", "--seconds", "2", "--repeats", "1"]).unwrap().seconds, Some(2));
}

#[test]
fn neighbours_takes_the_kind_of_items_and_the_async_wait() {
    let args =
        parse(&["neighbours", "--items", "async", "--async-wait-ms", "2.5", "--pools", "tokio-default"])
            .unwrap();
    assert_eq!((args.items, args.async_wait_ms), (Items::Async, Some(2.5)));
    assert_eq!(args.pools, [PoolKind::TokioDefault]);
    let defaults = LabArgs::defaults(Experiment::Neighbours);
    let plain = parse(&["neighbours"]).unwrap();
    assert_eq!((plain.items, plain.async_wait_ms), (defaults.items, defaults.async_wait_ms));
    assert_eq!(plain.items, Items::Threads, "thread items unless asked");
    for kind in ["tokio-default", "tokio-optimal", "cotenant-async"] {
        assert!(parse(&["neighbours", "--items", "async", "--pools", kind]).is_ok(), "{kind}");
    }
}

#[test]
fn bad_items_and_waits_are_refused_naming_the_option() {
    for (args, option) in [
        (&["neighbours", "--items", "fibres"][..], "--items"),
        (&["neighbours", "--items", "async", "--async-wait-ms", "0"][..], "--async-wait-ms"),
        (&["neighbours", "--items", "async", "--async-wait-ms", "5000"][..], "--async-wait-ms"),
        (&["neighbours", "--items", "async", "--async-wait-ms", "soon"][..], "--async-wait-ms"),
        (&["neighbours", "--pools", "tokio-later"][..], "--pools"),
    ] {
        let error = parse(args).unwrap_err();
        // A value outside the list (InvalidValue) or refused by its parser (ValueValidation).
        let refused = [clap::error::ErrorKind::InvalidValue, clap::error::ErrorKind::ValueValidation];
        assert!(refused.contains(&error.kind()), "{args:?}: {error}");
        assert!(error.to_string().contains(option), "{args:?}: {error}");
    }
    // Only `neighbours` has items of two kinds.
    for args in [&["go-neighbours", "--items", "async"][..], &["headline", "--async-wait-ms", "2"][..]] {
        let error = parse(args).unwrap_err();
        assert_eq!(error.kind(), clap::error::ErrorKind::UnknownArgument, "{args:?}: {error}");
    }
}
