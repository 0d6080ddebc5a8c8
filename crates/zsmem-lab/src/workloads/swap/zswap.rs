//! zswap's module parameters: read, changed for a run, and put back as
//! found on every exit path (the change is registered before it is made).

use std::path::{Path, PathBuf};

use crate::blockdev::BlockDevError;
use crate::blockdev::registry::{self, Held, Resource};

/// Where the parameters are.
pub const PARAMETERS: &str = "/sys/module/zswap/parameters";

/// The parameters saved and restored (those the kernel has).
pub const SAVED: &[&str] = &[
    "compressor",
    "zpool",
    "max_pool_percent",
    "accept_threshold_percent",
    "shrinker_enabled",
    "enabled",
];

fn param(name: &str) -> PathBuf {
    Path::new(PARAMETERS).join(name)
}

/// Why zswap cannot be used here, in one line, or `None`.
pub fn unavailable_reason() -> Option<String> {
    if !param("enabled").exists() {
        return Some(format!("no {PARAMETERS}/enabled: the kernel has no zswap"));
    }
    None
}

/// The current value of each parameter of [`SAVED`] the kernel has.
pub fn read_params() -> Vec<(String, String)> {
    SAVED
        .iter()
        .filter_map(|n| {
            let v = std::fs::read_to_string(param(n)).ok()?;
            Some((n.to_string(), v.trim().to_string()))
        })
        .collect()
}

/// One parameter's current value.
pub fn read_param(name: &str) -> Option<String> {
    std::fs::read_to_string(param(name))
        .ok()
        .map(|s| s.trim().to_string())
}

fn write_param(name: &str, value: &str) -> Result<(), String> {
    std::fs::write(param(name), value)
        .map_err(|e| format!("writing {value} to {}: {e}", param(name).display()))
}

/// Same value: zswap reads booleans back as `Y`/`N`.
fn same(a: &str, b: &str) -> bool {
    let norm = |s: &str| match s {
        "1" | "y" | "Y" => "Y".to_string(),
        "0" | "n" | "N" => "N".to_string(),
        s => s.to_string(),
    };
    norm(a) == norm(b)
}

/// Puts back each saved parameter that differs now, `enabled` last.
/// Registry's undo.
pub(crate) fn restore(saved: &[(String, String)]) -> Result<(), String> {
    let mut problems = Vec::new();
    let order = saved
        .iter()
        .filter(|(n, _)| n != "enabled")
        .chain(saved.iter().filter(|(n, _)| n == "enabled"));
    for (name, value) in order {
        if read_param(name).is_some_and(|now| !same(&now, value))
            && let Err(e) = write_param(name, value)
        {
            problems.push(e);
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!("zswap not restored: {}", problems.join("; ")))
    }
}

/// zswap's parameters changed for a run; put back on drop.
pub struct ZswapSettings {
    _held: Held,
    /// What they were.
    pub saved: Vec<(String, String)>,
}

impl ZswapSettings {
    /// Sets each `(name, value)` of `changes` (in order), having saved
    /// every parameter first; on a failure puts them back and returns it.
    pub fn apply(changes: &[(&str, &str)]) -> Result<ZswapSettings, BlockDevError> {
        if let Some(why) = unavailable_reason() {
            return Err(BlockDevError::Unavailable(why));
        }
        let saved = read_params();
        let (held, ()) = registry::hold_with(Resource::Zswap(saved.clone()), || {
            for (name, value) in changes {
                if let Err(e) = write_param(name, value) {
                    let _ = restore(&saved);
                    return Err(BlockDevError::Unavailable(e));
                }
            }
            Ok(())
        })?;
        Ok(ZswapSettings { _held: held, saved })
    }
}

#[cfg(test)]
mod tests {
    use super::same;

    #[test]
    fn booleans_compare_as_zswap_reads_them() {
        assert!(same("Y", "1"));
        assert!(same("N", "n"));
        assert!(!same("Y", "N"));
        assert!(same("lzo", "lzo"));
        assert!(!same("lzo", "lz4"));
    }
}
