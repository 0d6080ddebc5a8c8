//! Register-definition headers: long runs of `#define` offsets, masks and shifts (the huge amdgpu-style headers).

use rand::Rng;

use super::draw::zipf;
use super::vocab::*;
use super::writer::W;

impl W<'_> {
    pub(super) fn reg_header(&mut self, block: &str, offsets: bool) {
        let col = 110;
        self.s(AMD_BOILERPLATE);
        let up = block.to_ascii_uppercase();
        self.s(&format!(
            "#ifndef _{block}_SH_MASK_HEADER\n#define _{block}_SH_MASK_HEADER\n\n\n"
        ));
        let mut addr: u32 = self.r.random_range(0..0x1000);
        while !self.full() {
            // One address block: a shared prefix over many registers.
            self.s("// addressBlock: ");
            self.s(block);
            self.s("_");
            let ab = self.ident_parts(2, false);
            self.s(&ab);
            self.s("\n");
            let unit = format!(
                "{up}{}_{}",
                self.r.random_range(0..4),
                self.ident_parts(1, true)
            );
            let regs = self.r.random_range(4..40);
            for _ in 0..regs {
                let nparts = self.r.random_range(1..4);
                let reg = format!("{unit}_{}", self.ident_parts(nparts, true));
                if offsets {
                    addr += self.r.random_range(1..4);
                    let l1 = format!("#define reg{reg}");
                    self.s(&l1);
                    self.pad(l1.len(), col - 14);
                    self.s(&format!("0x{addr:04x}\n"));
                    let l2 = format!("#define reg{reg}_BASE_IDX");
                    self.s(&l2);
                    self.pad(l2.len(), col - 14);
                    let v = self.r.random_range(0..4).to_string();
                    self.s(&v);
                    self.s("\n");
                    continue;
                }
                self.s("//");
                self.s(&reg);
                self.s("\n");
                let nf = self.r.random_range(1..20);
                let mut fields = Vec::with_capacity(nf);
                let mut shift = 0u32;
                while fields.len() < nf && shift < 32 {
                    let k = self.r.random_range(1..3);
                    let name = if self.chance(0.5) {
                        format!("{}_{}", unit, self.ident_parts(k, true))
                    } else {
                        self.ident_parts(k + 1, true)
                    };
                    // Numbered series (DTO0_EN, DTO1_EN, ...) are common.
                    let series = if self.chance(0.3) {
                        self.r.random_range(2..7)
                    } else {
                        1
                    };
                    let tail = if series > 1 {
                        self.ident_parts(1, true)
                    } else {
                        String::new()
                    };
                    for j in 0..series {
                        if shift >= 32 {
                            break;
                        }
                        let width = (1 + zipf(self.r, 8, 3) as u32).min(32 - shift);
                        let name = if series > 1 {
                            format!("{name}{j}_{tail}")
                        } else {
                            name.clone()
                        };
                        fields.push((name, shift, width));
                        shift += width + zipf(self.r, 4, 3) as u32;
                    }
                }
                for (name, shift, _) in &fields {
                    let l1 = format!("#define {reg}__{name}__SHIFT");
                    self.s(&l1);
                    self.pad(l1.len(), col);
                    self.s(&format!("0x{shift:x}\n"));
                }
                for (name, shift, width) in &fields {
                    let l1 = format!("#define {reg}__{name}_MASK");
                    self.s(&l1);
                    self.pad(l1.len(), col);
                    let mask = (((1u64 << width) - 1) << shift) as u32;
                    self.s(&format!("0x{mask:08X}L\n"));
                }
            }
            self.s("\n");
        }
    }

    pub(super) fn pad(&mut self, used: usize, col: usize) {
        let n = col.saturating_sub(used).max(1);
        self.o.resize(self.o.len() + n, b' ');
    }
}
