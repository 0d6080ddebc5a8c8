//! `zsmem classes`: the size-class simulator.
//!
//! For a range of request sizes it shows which physical class serves each
//! request, that class's zspage shape, and what it wastes, optionally next
//! to a second configuration that differs in exactly one parameter. This is
//! the table the 2026 RFC ("drop hard limit on the number of size classes")
//! argues with.
//!
//! The computation ([`simulate`]) is a pure function returning a
//! [`Simulation`]; rendering it as a table, CSV or JSON is separate:
//!
//! | file | concern |
//! |---|---|
//! | `mod.rs` | the command: [`run`] |
//! | `args.rs` | its arguments, [`ClassesArgs`] |
//! | `simulate.rs` | the simulation, [`simulate`] |
//! | `render.rs` | the table, CSV and JSON, [`render_table`] and the others |

mod args;
mod render;
mod simulate;

use std::io::{self, Write as _};

pub use args::{ClassesArgs, Delta, Format};
pub use render::{render_csv, render_json, render_table};
pub use simulate::{Cell, Config, Row, Simulation, Summary, simulate};

use crate::CliResult;

/// Run `zsmem classes`.
pub fn run(a: &ClassesArgs) -> CliResult {
    let sim = simulate(a)?;
    let text = match a.format {
        Format::Table => render_table(&sim),
        Format::Csv => render_csv(&sim),
        Format::Json => render_json(&sim),
    };
    match io::stdout().lock().write_all(text.as_bytes()) {
        // The reader (e.g. `head`) has what it wanted: not an error.
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        r => Ok(r?),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use zsmem::ChainRule;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        a: ClassesArgs,
    }

    /// Parse a space-separated argument line as `zsmem classes` would.
    fn try_parse(args: &str) -> Result<ClassesArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("classes").chain(args.split_whitespace())).map(|c| c.a)
    }

    fn parse(args: &str) -> ClassesArgs {
        try_parse(args).unwrap()
    }

    fn cell(c: &Cell) -> (usize, usize, usize, usize, usize) {
        (
            c.phys,
            c.chain,
            c.objs_per_zspage,
            c.tail_waste,
            c.merge_waste,
        )
    }

    const RFC: &str = "--page-size 16K --chain 8 --delta 64 --from 1072 --to 1120 --vs-delta 16";

    #[test]
    fn default_matches_clap_defaults() {
        assert_eq!(parse(""), ClassesArgs::default());
    }

    #[test]
    fn rfc_example_16k_delta_64_vs_16() {
        let sim = simulate(&parse(RFC)).unwrap();
        let reqs: Vec<usize> = sim.rows.iter().map(|r| r.req).collect();
        assert_eq!(reqs, [1072, 1088, 1104, 1120]);
        let want_a = [5616, 3744, 1872, 0];
        let want_b = [
            (1072, 4, 61, 144, 0),
            (1088, 1, 15, 64, 0),
            (1104, 6, 89, 48, 0),
            (1120, 8, 117, 32, 0),
        ];
        for ((r, merge), b) in sim.rows.iter().zip(want_a).zip(want_b) {
            let a = r.a.as_ref().unwrap();
            assert_eq!(cell(a), (1120, 8, 117, 32, merge), "A {}", r.req);
            assert_eq!(cell(r.b.as_ref().unwrap()), b, "B {}", r.req);
        }
        assert_eq!(sim.config_a.label, "16K chain 8 delta 64 min-waste");
        assert_eq!(
            sim.config_b.unwrap().label,
            "16K chain 8 delta 16 min-waste"
        );
    }

    #[test]
    fn legacy_delta_follows_page_size() {
        let sim = simulate(&parse(
            "--page-size 16K --delta legacy --from 1072 --to 1120",
        ))
        .unwrap();
        assert_eq!(sim.config_a.params.class_delta, 64);
        assert!(sim.config_a.label.contains("delta 64 (legacy)"));
        assert_eq!(sim.rows.len(), 4, "default step is 16 even for delta 64");
        let b = simulate(&parse("--delta legacy --vs-page-size 64K")).unwrap();
        assert_eq!(b.config_a.params.class_delta, 16);
        assert_eq!(b.config_b.unwrap().params.class_delta, 256);
        // 4K cannot serve requests above 4096; they are still rows for 64K.
        let last = b.rows.last().unwrap();
        assert_eq!(last.req, 65536);
        assert!(last.a.is_none() && last.b.is_some());
        assert!(b.summary_a.rows_served < b.summary_b.unwrap().rows_served);
    }

    #[test]
    fn four_k_summaries_match_kernel() {
        for (chain, phys, huge) in [
            (4, 69, 3257),
            (8, 119, 3625),
            (10, 141, 3705),
            (16, 192, 3833),
        ] {
            let a = ClassesArgs {
                chain,
                ..Default::default()
            };
            let s = simulate(&a).unwrap().summary_a;
            assert_eq!(s.logical_classes, 255, "chain {chain}");
            assert_eq!(s.physical_classes, phys, "chain {chain}");
            assert_eq!(s.huge_class_size, huge, "chain {chain}");
            assert!(s.spanning_objects > 0 && s.spanning_objects <= s.object_slots);
        }
    }

    #[test]
    fn default_rows_cover_the_page() {
        let sim = simulate(&ClassesArgs::default()).unwrap();
        assert_eq!(sim.rows.len(), 255);
        assert_eq!(sim.rows.first().unwrap().req, 32);
        assert_eq!(sim.rows.last().unwrap().req, 4096);
        assert_eq!(sim.summary_a.rows_served, 255);
        let w = sim.summary_a.avg_effective_waste.unwrap();
        assert!(w > 0.0 && w < 0.5, "{w}");
        assert!(sim.config_b.is_none() && sim.summary_b.is_none());
    }

    #[test]
    fn smaller_delta_wastes_less_on_16k() {
        let sim = simulate(&parse("--page-size 16K --delta 64 --vs-delta 16")).unwrap();
        let (a, b) = (sim.summary_a, sim.summary_b.unwrap());
        assert!(b.logical_classes > a.logical_classes);
        assert!(b.avg_effective_waste.unwrap() < a.avg_effective_waste.unwrap());
    }

    #[test]
    fn span_column_counts_straddling_objects() {
        let sim = simulate(&parse("--from 1632 --to 1632")).unwrap();
        let c = sim.rows[0].a.as_ref().unwrap();
        let want = zsmem::size_class::spanning_objects(c.phys, c.objs_per_zspage, 4096);
        assert_eq!(c.span, want);
        // 1120 in 8 pages of 16K: 117 objects, every inner boundary crossed.
        let sim = simulate(&parse("--page-size 16K --from 1120 --to 1120")).unwrap();
        assert_eq!(sim.rows[0].a.as_ref().unwrap().span, 7);
    }

    #[test]
    fn bad_arguments_are_usage_or_config_errors() {
        let cases = [
            ("--page-size 5000", "page size"),
            ("--page-size 2K", "page size"),
            ("--page-size 128K", "page size"),
            ("--chain 0", "chain size"),
            ("--chain 33", "chain size"),
            ("--delta 12", "class delta"),
            ("--from 2000 --to 1000", "--from"),
            ("--from 0", "--from"),
            ("--step 0", "--step"),
            ("--to 8K", "--to"),
            ("--vs-chain 33", "--vs-chain"),
            ("--vs-delta 12", "--vs-delta"),
            ("--vs-page-size 3K", "--vs-page-size"),
        ];
        for (args, needle) in cases {
            let e = simulate(&parse(args)).unwrap_err().to_string();
            assert!(e.contains(needle), "{args}: {e}");
        }
    }

    #[test]
    fn more_than_one_vs_is_rejected() {
        let e = try_parse("--vs-chain 4 --vs-delta 64").unwrap_err();
        assert_eq!(e.kind(), clap::error::ErrorKind::ArgumentConflict);
        let a = ClassesArgs {
            vs_chain: Some(4),
            vs_rule: Some(ChainRule::SpanAware),
            ..Default::default()
        };
        let e = simulate(&a).unwrap_err().to_string();
        assert!(e.contains("at most one"), "{e}");
    }

    #[test]
    fn parsers_reject_bad_values() {
        for args in [
            "--rule fastest",
            "--format xml",
            "--delta big",
            "--page-size 4X",
        ] {
            assert!(try_parse(args).is_err(), "{args}");
        }
        assert_eq!(parse("--rule rfc").rule, ChainRule::SpanAware);
        assert_eq!(parse("--delta 64").delta, Delta::Bytes(64));
    }

    #[test]
    fn table_is_aligned() {
        let t = render_table(&simulate(&parse(RFC)).unwrap());
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[0].contains("A: 16K chain 8 delta 64 min-waste"));
        assert!(lines[0].contains("B: 16K chain 8 delta 16 min-waste"));
        // Title, header, rule and the four rows: the last group separator
        // (`||`, or `++` in the rule) at one column on every line.
        let pos: Vec<Option<usize>> = lines[..7]
            .iter()
            .map(|l| l.rfind("||").or_else(|| l.rfind("++")))
            .collect();
        assert!(pos.iter().all(|p| p.is_some() && *p == pos[0]), "{t}");
        let fields: Vec<&str> = lines[3]
            .split('|')
            .map(str::trim)
            .filter(|f| !f.is_empty())
            .collect();
        assert_eq!(
            &fields[..7],
            ["1072", "1120", "8", "117", "32", "5616", "7"]
        );
        assert_eq!(&fields[7..], ["1072", "4", "61", "144", "0", "3"]);
        assert!(t.contains("B - A"));
    }

    #[test]
    fn csv_and_json_shapes() {
        let sim = simulate(&parse("--from 32 --to 64 --vs-chain 4")).unwrap();
        let csv = render_csv(&sim);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 1 + 3);
        assert!(lines[0].starts_with("req,a_phys,") && lines[0].ends_with(",b_span"));
        assert!(lines.iter().all(|l| l.split(',').count() == 13));
        let v: serde_json::Value = serde_json::from_str(&render_json(&sim)).unwrap();
        assert_eq!(v["config_b"]["chain_size"], 4);
        assert_eq!(v["config_a"]["chain_rule"], "min-waste");
        assert_eq!(v["rows"].as_array().unwrap().len(), 3);
    }
}
