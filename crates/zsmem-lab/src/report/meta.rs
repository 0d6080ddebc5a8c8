//! The facts about the machine and the moment a report was written: versions, host, kernel, date.

use std::time::{SystemTime, UNIX_EPOCH};

/// `(name, value)` pairs for the report's header: zsmem's version, the
/// host name, the kernel release (`uname -r`) and the date in UTC. A fact
/// the system does not give reads `unknown`.
pub(super) fn machine_facts() -> Vec<(&'static str, String)> {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .map(|s| s.trim().to_string())
            .ok()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "unknown".to_string())
    };
    let date = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or_else(|_| "unknown".to_string(), |d| utc(d.as_secs()));
    vec![
        ("zsmem", env!("CARGO_PKG_VERSION").to_string()),
        ("host", read("/proc/sys/kernel/hostname")),
        ("kernel", read("/proc/sys/kernel/osrelease")),
        ("date", date),
    ]
}

/// Seconds since the Unix epoch as `YYYY-MM-DD HH:MM UTC`.
fn utc(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60
    )
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard
/// Hinnant's `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_in_utc() {
        assert_eq!(utc(0), "1970-01-01 00:00 UTC");
        assert_eq!(utc(951_782_400), "2000-02-29 00:00 UTC");
        assert_eq!(utc(1_795_392_000 + 3_660), "2026-11-23 01:01 UTC");
    }

    #[test]
    fn every_fact_has_a_value() {
        for (name, value) in machine_facts() {
            assert!(!value.is_empty(), "{name}");
        }
    }
}
