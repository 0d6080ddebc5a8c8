//! Assembly sources (.S): labels, instructions and macros.

use rand::Rng;

use super::draw::zipf;
use super::vocab::*;
use super::writer::W;

impl W<'_> {
    pub(super) fn asm(&mut self, prefix: &str) {
        self.license(false);
        self.s("#include <linux/linkage.h>\n#include <asm/assembler.h>\n\n");
        while !self.full() {
            self.s("SYM_FUNC_START(");
            self.s(prefix);
            self.s("_");
            let n = self.ident_parts(2, false);
            self.s(&n);
            self.s(")\n");
            let k = self.r.random_range(4..30);
            for _ in 0..k {
                self.s("\t");
                self.word(ASM_OPS, 2);
                self.s("\t");
                let regs = self.r.random_range(1..4);
                for j in 0..regs {
                    if j > 0 {
                        self.s(", ");
                    }
                    if self.chance(0.2) {
                        self.s("#");
                        self.number();
                    } else {
                        let reg = ["x", "w", "r"][zipf(self.r, 3, 2)];
                        self.s(reg);
                        let v = zipf(self.r, 31, 2).to_string();
                        self.s(&v);
                    }
                }
                if self.chance(0.15) {
                    self.s("\t\t// ");
                    self.prose(4);
                }
                self.s("\n");
            }
            self.s("\tret\nSYM_FUNC_END(");
            self.s(prefix);
            self.s("_");
            self.s(&n);
            self.s(")\n\n");
        }
    }
}
