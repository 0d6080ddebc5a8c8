//! Where `zsmem compare` writes its report: a new numbered directory under
//! `--report` for every run, never over an earlier one, and a `latest`
//! pointer to the newest.
//!
//! `zsmem-report/` holds `001/`, `002/`, ... (one run each, `index.html`
//! and its plots) and `latest`, a symbolic link to the newest run's
//! directory. A number is taken by creating its directory, which fails if
//! it exists, so two runs at once never share one.

use std::io;
use std::path::{Path, PathBuf};

/// Name of the pointer to the newest run.
pub const LATEST: &str = "latest";

/// The numbers of the runs already under `parent` (directories named by a
/// number alone).
fn taken(parent: &Path) -> io::Result<Vec<u64>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(parent)? {
        let e = e?;
        if let Some(n) = e.file_name().to_str().and_then(|s| s.parse::<u64>().ok())
            && e.file_type()?.is_dir()
        {
            out.push(n);
        }
    }
    Ok(out)
}

/// Create `parent` if need be and a new directory in it, numbered one past
/// the highest there (`001` in an empty one). Returns its path.
pub fn new_run_dir(parent: &Path) -> io::Result<PathBuf> {
    std::fs::create_dir_all(parent)?;
    let mut n = taken(parent)?.into_iter().max().unwrap_or(0) + 1;
    loop {
        let dir = parent.join(format!("{n:03}"));
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            // Another run took it in the meantime: the next.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => n += 1,
            Err(e) => return Err(e),
        }
    }
}

/// Point `parent/latest` at `run` (a directory in `parent`): a symbolic
/// link, replaced in one step (a new link renamed over the old). Where
/// symbolic links are not available, a file `latest` naming it.
pub fn point_latest(parent: &Path, run: &Path) -> io::Result<PathBuf> {
    let latest = parent.join(LATEST);
    let name = run
        .file_name()
        .ok_or_else(|| io::Error::other("the run directory has no name"))?;
    let tmp = parent.join(format!(".{LATEST}.{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    #[cfg(unix)]
    std::os::unix::fs::symlink(name, &tmp)?;
    #[cfg(not(unix))]
    std::fs::write(&tmp, name.to_string_lossy().as_bytes())?;
    std::fs::rename(&tmp, &latest)?;
    Ok(latest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_get_new_numbers_and_latest_follows() {
        let parent = std::env::temp_dir().join(format!("zsmem-report-dir-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&parent);
        let a = new_run_dir(&parent).unwrap();
        assert_eq!(a, parent.join("001"));
        std::fs::write(a.join("index.html"), "one").unwrap();
        point_latest(&parent, &a).unwrap();
        // Files and other names do not count; a gap does not matter.
        std::fs::write(parent.join("7"), "").unwrap();
        std::fs::create_dir(parent.join("notes")).unwrap();
        let b = new_run_dir(&parent).unwrap();
        assert_eq!(b, parent.join("002"));
        std::fs::write(b.join("index.html"), "two").unwrap();
        let latest = point_latest(&parent, &b).unwrap();
        assert_eq!(
            std::fs::read_to_string(latest.join("index.html")).unwrap(),
            "two"
        );
        assert_eq!(
            std::fs::read_to_string(a.join("index.html")).unwrap(),
            "one"
        );
        std::fs::create_dir(parent.join("010")).unwrap();
        assert_eq!(new_run_dir(&parent).unwrap(), parent.join("011"));
        std::fs::remove_dir_all(&parent).unwrap();
    }
}
