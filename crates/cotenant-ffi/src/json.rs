//! The JSON explanation of `cotenant_cpus_json`: the fields of `cotenant cpus --json`
//! (`crates/cotenant-cli/src/output.rs`, a public interface: add fields, never rename), built
//! from the same core-crate accessors. The CLI has no library target, so its type cannot be
//! reused; `tests/api.rs` checks the field names.

use cotenant::cpus::{Limit, Rounding};
use serde_json::{json, Value};

/// The explanation of `budget` (for the calling process: `pid` is `null`).
pub(crate) fn cpus(budget: &Limit) -> Value {
    let sources: Vec<Value> = budget
        .sources()
        .into_iter()
        .map(|row| {
            json!({
                "kind": row.kind,
                "path": row.origin.map(|origin| origin.to_string()),
                "cgroup": row.cgroup,
                "value": row.value,
                "binds": row.binds,
            })
        })
        .collect();
    json!({
        "limit": budget.limit(),
        "threads": budget.threads(Rounding::Floor),
        "threads_ceil": budget.threads(Rounding::Ceil),
        "threads_nearest": budget.threads(Rounding::Nearest),
        "allowed_cpus": budget.allowed_cpus(),
        "binding": budget.binding().as_str(),
        "binding_path": budget.binding_origin().map(|origin| origin.to_string()),
        "binding_cgroup": budget.binding_level().map(|level| level.cgroup.clone()),
        "cgroup_version": budget.cgroup_version(),
        "pid": Value::Null,
        "sources": sources,
    })
}
