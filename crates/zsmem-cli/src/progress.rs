//! Progress bars for the commands that run longer than a moment: on stderr,
//! fitted to the terminal's width (80 columns and up), with the rate and the
//! time left, and not drawn at all when stderr is not a terminal (a pipe, a
//! file, CI), so that logs stay clean.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};

/// Where bars are drawn: stderr if it is a terminal, nowhere otherwise.
fn target() -> ProgressDrawTarget {
    if std::io::stderr().is_terminal() {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    }
}

/// A whole number of `unit`s per second, with a k/M prefix past 10,000.
fn rate(per_sec: f64, unit: &str) -> String {
    if !per_sec.is_finite() {
        format!("- {unit}/s")
    } else if per_sec >= 10e6 {
        format!("{:.0}M {unit}/s", per_sec / 1e6)
    } else if per_sec >= 10e3 {
        format!("{:.0}k {unit}/s", per_sec / 1e3)
    } else {
        format!("{per_sec:.0} {unit}/s")
    }
}

/// A bar of `len` `unit`s (e.g. `pages`) named `what`: the name (cut to
/// 14 characters), the bar filling what the terminal leaves, the percent
/// done, the rate and the time left. The fixed parts take 48 columns, so an
/// 80-column terminal keeps a 30-column bar.
pub fn bar(len: u64, what: &str, unit: &'static str) -> ProgressBar {
    let b = ProgressBar::with_draw_target(Some(len), target());
    let style = ProgressStyle::with_template(
        "{prefix:<14!} [{wide_bar}] {percent:>3}% {rate:>14} ETA {eta:>3}",
    )
    .expect("a valid template")
    .with_key(
        "rate",
        move |s: &ProgressState, w: &mut dyn std::fmt::Write| {
            let _ = write!(w, "{}", rate(s.per_sec(), unit));
        },
    )
    .progress_chars("=> ");
    b.set_style(style);
    b.set_prefix(what.to_string());
    b
}

/// A spinner with the time spent, for work of unknown length (generating
/// the corpus): `what` beside it.
pub fn spinner(what: &str) -> ProgressBar {
    let b = ProgressBar::with_draw_target(None, target());
    b.set_style(
        ProgressStyle::with_template("{spinner} {msg} {elapsed}").expect("a valid template"),
    );
    b.set_message(what.to_string());
    b.enable_steady_tick(Duration::from_millis(120));
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_stay_short() {
        assert_eq!(rate(12.4, "pages"), "12 pages/s");
        assert_eq!(rate(123_456.0, "pages"), "123k pages/s");
        assert_eq!(rate(98_765_432.0, "ops"), "99M ops/s");
        assert_eq!(rate(f64::INFINITY, "ops"), "- ops/s");
        // The longest rate fits its 14 columns.
        assert!(rate(9_999_999.0, "pages").len() <= 14);
    }

    #[test]
    fn bars_are_hidden_off_a_terminal() {
        // Tests run with stderr captured or redirected: nothing is drawn,
        // and a bar still counts.
        let b = bar(10, "a very long contestant name", "pages");
        b.inc(3);
        assert_eq!(b.position(), 3);
        b.finish_and_clear();
        spinner("generating").finish_and_clear();
    }
}
