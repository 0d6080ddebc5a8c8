//! The arguments of `zsmem classes`: the options, their parsers, the class delta and the output format.

use zsmem::{ChainRule, SizeClassConfig};

use crate::units::parse_size;

/// The class delta as given on the command line: bytes, or `legacy`.
///
/// `legacy` is kept symbolic rather than resolved at parse time so that it
/// follows the page size of each configuration (`--vs-page-size` with a
/// legacy delta compares `4K/16` against `16K/64`, as the kernel would).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delta {
    /// `page_size >> 8`, the kernel's delta before the RFC.
    Legacy,
    /// A fixed number of bytes.
    Bytes(usize),
}

impl Delta {
    /// The delta in bytes for a given page size.
    pub fn resolve(self, page_size: usize) -> usize {
        match self {
            Delta::Legacy => SizeClassConfig::legacy_delta(page_size),
            Delta::Bytes(b) => b,
        }
    }
}

/// Output format of `zsmem classes`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Format {
    /// Aligned table followed by a summary.
    #[default]
    Table,
    /// One header line and one line per request size; no summary.
    Csv,
    /// One pretty-printed JSON object with rows and summaries.
    Json,
}

fn parse_size_arg(s: &str) -> Result<usize, String> {
    parse_size(s)
}

fn parse_delta(s: &str) -> Result<Delta, String> {
    if s.trim().eq_ignore_ascii_case("legacy") {
        return Ok(Delta::Legacy);
    }
    parse_size(s).map(Delta::Bytes).map_err(|_| {
        format!(
            "`{s}` is not a class delta: give bytes (a multiple of 8) or `legacy` (page size / 256)"
        )
    })
}

fn parse_rule(s: &str) -> Result<ChainRule, String> {
    ChainRule::parse(s).map_err(|e| match e {
        zsmem::Error::InvalidConfig(m) => m,
        other => other.to_string(),
    })
}

/// Arguments of `zsmem classes`.
#[derive(clap::Args, Debug, Clone, PartialEq)]
#[command(
    group(clap::ArgGroup::new("vs").multiple(false)),
    after_help = "Rows are request sizes from --from to --to in steps of --step. Columns: \
Req = request size; Phys = size of the physical class serving it; Chain = pages per zspage; \
Objs/zspage = objects per zspage; TailWaste = bytes at the end of a zspage no object can use; \
MergeWaste = (Phys - Req) * Objs/zspage; Span = objects per zspage straddling a page boundary.\n\n\
The RFC's simulator (simulate_zsmalloc.c) for a page size and chain: its AFTER table is \
`--delta 16 --rule rfc`, its BEFORE table `--delta legacy --rule min-waste` (same columns; its \
Objs/Page is Objs/zspage here).\n\n\
With one --vs-* option, configuration B is A with that parameter changed, shown side by side \
with a B - A difference column in the summary.\n\n\
--format csv prints only the rows (a header line, then one line per request; columns prefixed \
a_/b_ when comparing, empty cells where a request exceeds that configuration's page size); \
it omits the summary. Use --format json for rows and summaries together."
)]
pub struct ClassesArgs {
    /// Page size: a power of two from 4K to 64K.
    #[arg(long, value_name = "SIZE", default_value = "4K", value_parser = parse_size_arg)]
    pub page_size: usize,
    /// Most pages a zspage may chain (CONFIG_ZSMALLOC_CHAIN_SIZE), 1 to 32.
    #[arg(long, value_name = "N", default_value_t = 8)]
    pub chain: usize,
    /// Class delta in bytes (a multiple of 8), or `legacy` for page size / 256.
    #[arg(long, value_name = "BYTES|legacy", default_value = "16", value_parser = parse_delta)]
    pub delta: Delta,
    /// Chain-length rule: min-waste (kernel since 6.3), used-percent (before
    /// 6.3), span-aware or rfc (the RFC's second patch, as its simulator
    /// computes it) or trim.
    #[arg(long, value_name = "RULE", default_value = "min-waste", value_parser = parse_rule)]
    pub rule: ChainRule,
    /// First request size shown.
    #[arg(long, value_name = "SIZE", default_value = "32", value_parser = parse_size_arg)]
    pub from: usize,
    /// Last request size shown [default: the (largest) page size].
    #[arg(long, value_name = "SIZE", value_parser = parse_size_arg)]
    pub to: Option<usize>,
    /// Distance between request rows [default: the smallest class delta
    /// compared, at most 16].
    #[arg(long, value_name = "BYTES", value_parser = parse_size_arg)]
    pub step: Option<usize>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Compare with configuration B using this class delta (or `legacy`).
    #[arg(long, value_name = "BYTES|legacy", value_parser = parse_delta, group = "vs")]
    pub vs_delta: Option<Delta>,
    /// Compare with configuration B using this chain size.
    #[arg(long, value_name = "N", group = "vs")]
    pub vs_chain: Option<usize>,
    /// Compare with configuration B using this chain-length rule.
    #[arg(long, value_name = "RULE", value_parser = parse_rule, group = "vs")]
    pub vs_rule: Option<ChainRule>,
    /// Compare with configuration B using this page size.
    #[arg(long, value_name = "SIZE", value_parser = parse_size_arg, group = "vs")]
    pub vs_page_size: Option<usize>,
}

impl Default for ClassesArgs {
    /// The same values as clap's defaults (checked by a test), so that
    /// `zsmem` with no subcommand prints the default table.
    fn default() -> Self {
        ClassesArgs {
            page_size: 4096,
            chain: 8,
            delta: Delta::Bytes(16),
            rule: ChainRule::MinWaste,
            from: 32,
            to: None,
            step: None,
            format: Format::Table,
            vs_delta: None,
            vs_chain: None,
            vs_rule: None,
            vs_page_size: None,
        }
    }
}
