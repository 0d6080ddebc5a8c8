//! Measure pool configurations on the untar/rm workload: the overhead ratio
//! (pool pages over compressed bytes) after every step, and with the
//! allocator's metadata counted. Each change to zsmem's default
//! configuration is argued from this table.
//!
//! `cargo run --release -p zsmem-lab --example tune -- [SCALE] [INPUT]`

use zsmem::{ChainRule, Codec, CompactionPolicy, PoolConfig};
use zsmem_lab::contestant::ZsmemContestant;
use zsmem_lab::corpus::FileTree;
use zsmem_lab::workload::{UntarRm, slots_needed};

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
        "{:<48} {:>8} {:>8} {:>8} {:>9} {:>9}",
        "config", "untar", "max", "last", "max+meta", "last+meta"
    );
    let auto = CompactionPolicy::default();
    let mut configs: Vec<(String, PoolConfig)> = vec![(
        "kernel (chain 8, delta 16, header, off)".into(),
        PoolConfig::kernel(),
    )];
    for chain in [2, 4, 8, 16] {
        for delta in [8, 16, 32] {
            for rule in [ChainRule::MinWaste, ChainRule::SpanAware] {
                if rule == ChainRule::SpanAware && chain != 8 {
                    continue;
                }
                configs.push((
                    format!("chain {chain:>2} delta {delta:>2} {:<10} auto", rule.name()),
                    PoolConfig {
                        chain_size: chain,
                        class_delta: delta,
                        chain_rule: rule,
                        compaction: auto,
                        ..PoolConfig::default()
                    },
                ));
            }
        }
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
        let max = |f: &dyn Fn(&&zsmem_lab::contestant::Figures) -> f64| {
            steps.iter().map(f).fold(0.0, f64::max) * 100.0
        };
        println!(
            "{label:<48} {:>7.2}% {:>7.2}% {:>7.2}% {:>8.2}% {:>8.2}%",
            steps[0].overhead_ratio() * 100.0,
            max(&|f| f.overhead_ratio()),
            steps.last().unwrap().overhead_ratio() * 100.0,
            max(&|f| f.meta_ratio()),
            steps.last().unwrap().meta_ratio() * 100.0,
        );
    }
}
