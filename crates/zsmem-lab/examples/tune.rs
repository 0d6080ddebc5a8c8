//! Measure pool configurations on the untar/rm workload: the overhead ratio
//! (pool pages over compressed bytes) after every step, and with the
//! allocator's metadata counted. Each change to zsmem's default
//! configuration is argued from this table.
//!
//! `cargo run --release -p zsmem-lab --example tune -- [SCALE] [INPUT]`

use zsmem::{ChainRule, Codec, CompactionPolicy, PoolConfig};
use zsmem_lab::contestants::zsmem::ZsmemContestant;
use zsmem_lab::corpus::FileTree;
use zsmem_lab::workloads::untar_rm::{UntarRm, slots_needed};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let scale: f64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(1.0);
    let tree = match args.get(2) {
        Some(p) => FileTree::load(p).expect("input loads"),
        None => FileTree::generate(1, scale),
    };
    let slots = slots_needed(&tree);
    println!(
        "{} pages; ratios in % of compressed bytes; max over the untar and -dir steps",
        tree.total_pages()
    );
    println!(
        "{:<48} {:>8} {:>8} {:>8} {:>9} {:>9} {:>10} {:>10} {:>8}",
        "config",
        "untar",
        "max",
        "last",
        "max+meta",
        "last+meta",
        "discard50",
        "discard99",
        "wall s"
    );
    let mut configs: Vec<(String, PoolConfig)> = vec![(
        "kernel (chain 8, delta 16, header, off)".into(),
        PoolConfig::kernel(),
    )];
    let mut add = |chain: usize, delta: usize, rule: ChainRule, trim: bool, min_pages: usize| {
        configs.push((
            format!(
                "chain {chain:>2} delta {delta:>2} {:<10} auto{min_pages}{}",
                rule.name(),
                if trim { " trim" } else { "" }
            ),
            PoolConfig {
                chain_size: chain,
                class_delta: delta,
                chain_rule: rule,
                compaction: CompactionPolicy::Auto {
                    min_freeable_pages: min_pages,
                    max_moves: 32,
                },
                trim_pages: trim,
                ..PoolConfig::default()
            },
        ));
    };
    // Whole-zspage compaction: chain and delta against each other.
    for chain in [4, 8, 16, 32] {
        for delta in [8, 16, 32] {
            add(chain, delta, ChainRule::MinWaste, false, 1);
        }
    }
    add(8, 16, ChainRule::SpanAware, false, 1);
    // Trimming: long chains stop costing free slots.
    for chain in [8, 16, 32] {
        for delta in [8, 16, 32] {
            add(chain, delta, ChainRule::MinWaste, true, 1);
        }
    }
    // zsmem's default rule: the longest of the least wasteful chains.
    for chain in [16, 32] {
        for delta in [16, 32] {
            add(chain, delta, ChainRule::Trim, true, 1);
        }
    }
    for min_pages in [2, 4, 8] {
        add(32, 16, ChainRule::Trim, true, min_pages);
    }
    for (label, cfg) in configs {
        let mut c = ZsmemContestant::new("tune", cfg, Codec::Lz4, slots).expect("config is valid");
        let r = UntarRm {
            verify_every: 0,
            final_compact: false,
            ..UntarRm::default()
        }
        .run(&tree, &mut c, |_| {})
        .expect("run");
        let steps: Vec<_> = r
            .steps
            .iter()
            .filter(|s| s.figures.compr > 0)
            .map(|s| &s.figures)
            .collect();
        let max = |f: &dyn Fn(&&zsmem_lab::contestants::Figures) -> f64| {
            steps.iter().map(f).fold(0.0, f64::max) * 100.0
        };
        println!(
            "{label:<48} {:>7.2}% {:>7.2}% {:>7.2}% {:>8.2}% {:>8.2}% {:>8}ns {:>8}ns {:>8.2}",
            steps[0].overhead_ratio() * 100.0,
            max(&|f| f.overhead_ratio()),
            steps.last().unwrap().overhead_ratio() * 100.0,
            max(&|f| f.meta_ratio()),
            steps.last().unwrap().meta_ratio() * 100.0,
            r.latency.discard.value_at_quantile(0.5),
            r.latency.discard.value_at_quantile(0.99),
            r.wall.as_secs_f64(),
        );
    }
}
