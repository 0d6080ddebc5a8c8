//! Prints a zsmem store's per-class metadata (objects, zspages, bytes per object) at the sixth step
//! of untar/rm on a tree: a tuning aid.

use zsmem::{Codec, PoolConfig};
use zsmem_lab::contestants::LabError;
use zsmem_lab::contestants::zsmem::ZsmemContestant;
use zsmem_lab::contestants::{Figures, PageContestant};
use zsmem_lab::corpus::{FileTree, Page};
use zsmem_lab::workloads::untar_rm::{UntarRm, slots_needed};
struct W(ZsmemContestant, usize);
impl PageContestant for W {
    fn name(&self) -> &str {
        self.0.name()
    }
    fn config(&self) -> String {
        self.0.config()
    }
    fn store(&mut self, s: u64, p: &Page) -> Result<(), LabError> {
        self.0.store(s, p)
    }
    fn load(&mut self, s: u64, p: &mut Page) -> Result<(), LabError> {
        self.0.load(s, p)
    }
    fn discard(&mut self, s: u64, n: u64) -> Result<(), LabError> {
        self.0.discard(s, n)
    }
    fn compact(&mut self) -> Result<(), LabError> {
        self.0.compact()
    }
    fn figures(&mut self) -> Result<Figures, LabError> {
        self.1 += 1;
        if self.1 == 6 {
            let pool = self.0.store_ref().pool();
            let s = pool.stats();
            println!(
                "objects {} meta {} store meta {}",
                s.objects,
                s.metadata_bytes,
                self.0.store_ref().metadata_bytes()
            );
            let mut tot = 0;
            let mut zs = 0;
            for cs in pool.class_stats() {
                if cs.obj_used > 0 || cs.metadata_bytes > 0 {
                    tot += cs.metadata_bytes;
                    zs += cs.obj_allocated / cs.objs_per_zspage.max(1);
                    println!(
                        "class {:4} size {:5} objs {:6} zspages {:4} meta {:7} per-obj {:.0}",
                        cs.index,
                        cs.size,
                        cs.obj_used,
                        cs.obj_allocated / cs.objs_per_zspage.max(1),
                        cs.metadata_bytes,
                        cs.metadata_bytes as f64 / cs.obj_used.max(1) as f64
                    );
                }
            }
            println!("sum class meta {tot} zspages {zs}");
        }
        self.0.figures()
    }
}
fn main() {
    let p = std::env::args().nth(1).unwrap();
    let tree = FileTree::load(&p).unwrap();
    let slots = slots_needed(&tree);
    let c = ZsmemContestant::new("x", PoolConfig::default(), Codec::Lz4, slots).unwrap();
    let mut w = W(c, 0);
    UntarRm {
        verify_every: 0,
        final_compact: false,
        ..UntarRm::default()
    }
    .run(&tree, &mut w, |_| {})
    .unwrap();
}
