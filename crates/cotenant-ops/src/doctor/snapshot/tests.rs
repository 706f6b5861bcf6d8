//! Unit tests of the snapshot parsers and of [`ancestors`].

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
