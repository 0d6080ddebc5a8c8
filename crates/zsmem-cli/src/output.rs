//! How commands print figures: the `--format` values, tables that fit the
//! terminal (comfy-table), CSV (the csv crate) and JSON.

use std::io::Write as _;

use comfy_table::{CellAlignment, ContentArrangement, Table, TableComponent, presets};
use serde::Serialize;

use crate::CliResult;

/// What `--format` accepts.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Format {
    /// Tables for a reader, fitted to the terminal's width.
    #[default]
    Table,
    /// Comma-separated values, one header line, figures in plain units
    /// (bytes, ns) for a spreadsheet or a script.
    Csv,
    /// One JSON document with every figure.
    Json,
}

/// Bytes in MiB, for the tables.
pub fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1 << 20) as f64
}

/// A table with `header` (a `\n` in a heading puts its unit on a line of
/// its own), its numeric columns (all but the first `text_columns`)
/// aligned right, no borders but a line under the header, one space
/// between columns, wrapped to the terminal's width when stdout is a
/// terminal.
pub fn table(header: &[&str], text_columns: usize) -> Table {
    let mut t = Table::new();
    t.load_preset(presets::NOTHING)
        .set_style(TableComponent::HeaderLines, '─')
        .set_style(TableComponent::MiddleHeaderIntersections, '─')
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_header(header.iter().copied());
    for (i, col) in t.column_iter_mut().enumerate() {
        col.set_padding((0, 1));
        if i >= text_columns {
            col.set_cell_alignment(CellAlignment::Right);
        }
    }
    t
}

/// The terminal's width when stdout is one, else `None`.
pub fn terminal_width() -> Option<usize> {
    Table::new().width().map(usize::from)
}

/// `text` broken at spaces into lines of at most `width` characters (a
/// longer word stands alone), each after `indent`.
pub fn wrap(text: &str, width: usize, indent: &str) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        let n = indent.chars().count() + line.chars().count();
        if !line.is_empty() && n + 1 + word.chars().count() > width {
            out.push_str(indent);
            out.push_str(&line);
            out.push('\n');
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        out.push_str(indent);
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// Print `t` to stdout.
pub fn print_table(t: &Table) -> CliResult {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{t}")?;
    Ok(())
}

/// Write `header` and `rows` to stdout as CSV.
pub fn print_csv<R, I>(header: &[&str], rows: I) -> CliResult
where
    I: IntoIterator<Item = R>,
    R: IntoIterator,
    R::Item: AsRef<[u8]>,
{
    let mut w = csv::Writer::from_writer(std::io::stdout().lock());
    w.write_record(header).map_err(std::io::Error::other)?;
    for r in rows {
        w.write_record(r).map_err(std::io::Error::other)?;
    }
    w.flush()?;
    Ok(())
}

/// Write `rows`, flat serde structs, to stdout as CSV: a header of their
/// field names, then one line per row.
pub fn print_serialized<T: Serialize>(rows: &[T]) -> CliResult {
    let mut w = csv::Writer::from_writer(std::io::stdout().lock());
    for r in rows {
        w.serialize(r).map_err(std::io::Error::other)?;
    }
    w.flush()?;
    Ok(())
}

/// A `--codec` value checked by clap (lz4, zstd or zstd:LEVEL): a bad one
/// is a usage error, exit 2.
pub fn codec_value(s: &str) -> Result<String, String> {
    zsmem::Codec::parse(s)
        .map(|_| s.to_string())
        .map_err(|e| e.to_string())
}

/// Print `value` to stdout as pretty JSON.
pub fn print_json<T: Serialize + ?Sized>(value: &T) -> CliResult {
    let s = serde_json::to_string_pretty(value).map_err(std::io::Error::other)?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{s}")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_fit_a_width_and_align_numbers() {
        let mut t = table(&["contestant", "peak pool MiB", "wall s"], 1);
        t.add_row(vec!["zsmem", "103.25", "12.5"]);
        t.add_row(vec!["kernel-zram-compact", "110.00", "9.0"]);
        t.set_width(40);
        let s = t.to_string();
        assert!(s.lines().all(|l| l.chars().count() <= 40), "{s}");
        assert!(s.contains("103.25"), "{s}");
    }

    #[test]
    fn wrapping_keeps_words_and_width() {
        let w = wrap("used = pool = the pages the allocator holds", 16, "  ");
        assert_eq!(
            w,
            "  used = pool =\n  the pages the\n  allocator\n  holds\n"
        );
        assert_eq!(wrap("", 10, ""), "");
        assert_eq!(
            wrap("unbreakable-long-word x", 5, ""),
            "unbreakable-long-word\nx\n"
        );
    }
}
