//! User data in messages: the one helper every error message that quotes a
//! name, a path or a field from an input goes through.
//!
//! Names and fields come from files a user may not have written (a tar
//! entry's name, a trace line), so a message quotes them with control
//! characters escaped (no clearing the terminal or setting its title) and
//! cut at [`SHOWN_MAX_CHARS`] characters (a 1 GB trace line is not echoed
//! to stderr).

use std::path::Path;

/// The most characters of one value a message shows; longer values are cut
/// and end in `...`.
pub const SHOWN_MAX_CHARS: usize = 200;

/// `s` as a message may show it: control characters (C0, DEL, C1, and the
/// bidirectional overrides) escaped as `\n`, `\u{1b}`, ..., and cut after
/// [`SHOWN_MAX_CHARS`] characters with `...`.
pub fn shown(s: &str) -> String {
    let mut out = String::with_capacity(s.len().min(SHOWN_MAX_CHARS + 3));
    for (i, c) in s.chars().enumerate() {
        if i == SHOWN_MAX_CHARS {
            out.push_str("...");
            break;
        }
        if c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}') {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// A path as a message may show it (see [`shown`]); bytes that are not
/// UTF-8 show as U+FFFD.
pub fn shown_path(p: &Path) -> String {
    shown(&p.to_string_lossy())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(
            shown("a\x1b]0;pwned\x07b\nc"),
            "a\\u{1b}]0;pwned\\u{7}b\\nc"
        );
        assert_eq!(shown("plain/name.c"), "plain/name.c");
        assert_eq!(shown("\u{202e}txt.exe"), "\\u{202e}txt.exe");
    }

    #[test]
    fn long_values_are_cut() {
        let long = "x".repeat(1_000_000);
        let s = shown(&long);
        assert_eq!(s.len(), SHOWN_MAX_CHARS + 3);
        assert!(s.ends_with("..."));
        assert_eq!(
            shown(&"y".repeat(SHOWN_MAX_CHARS)),
            "y".repeat(SHOWN_MAX_CHARS)
        );
    }
}
