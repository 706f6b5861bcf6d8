//! `cotenant tokens list | remove` against real System V sets of this user (named per test
//! process, removed on every exit path).

use std::process::{Command, Output};

use cotenant::tokens::HostTokens;
use serde_json::Value;

fn cotenant(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cotenant")).args(args).output().expect("cotenant runs")
}

/// Removes the named set when dropped (an assertion failing first included).
struct RemoveNamed(String);

impl Drop for RemoveNamed {
    fn drop(&mut self) {
        let _ = HostTokens::remove_named(&self.0);
    }
}

fn listed(name: &str) -> Option<Value> {
    let out = cotenant(&["tokens", "list", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let sets: Value = serde_json::from_slice(&out.stdout).expect("tokens list --json is JSON");
    sets.as_array().expect("an array").iter().find(|s| s["name"] == name).cloned()
}

#[test]
fn a_set_is_listed_with_its_members_and_removed_only_once_nobody_uses_it() {
    let name = format!("cotenant-test-cli-{}", std::process::id());
    let _remove = RemoveNamed(name.clone());
    let member = HostTokens::open(&name, 3).unwrap();
    let shown = listed(&name).expect("the set is listed");
    assert_eq!((shown["tokens"].as_u64(), shown["free"].as_u64()), (Some(3), Some(3)), "{shown}");
    assert_eq!(shown["members"].as_u64(), Some(1), "{shown}");
    assert_eq!(shown["mode"], "0600");
    assert!(shown["refused"].is_null(), "{shown}");
    let text = cotenant(&["tokens", "list"]);
    assert!(String::from_utf8_lossy(&text.stdout).contains(&name));

    // A live member: refused, with the reason, and the set stays.
    let out = cotenant(&["tokens", "remove", &name]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("member process") && stderr.contains("--force"), "{stderr}");
    assert!(HostTokens::exists(&name));

    drop(member);
    let out = cotenant(&["tokens", "remove", &name]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains(&format!("removed {name}")));
    assert!(!HostTokens::exists(&name));
    assert!(listed(&name).is_none());
    assert!(!HostTokens::pipe_path(&name).exists(), "its pipe went with it");
}

#[test]
fn bad_names_and_keys_are_usage_errors() {
    for bad in ["0xzz", ""] {
        let out = cotenant(&["tokens", "remove", bad]);
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("tokens remove"), "{bad:?}");
    }
    let out = cotenant(&["tokens", "remove", "cotenant-test-no-such-set"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no token set"));
}
