//! Kconfig menus and Makefiles.

use rand::Rng;

use super::writer::W;

impl W<'_> {
    pub(super) fn kconfig(&mut self, prefix: &str) {
        self.s("# SPDX-License-Identifier: GPL-2.0-only\n");
        let up = prefix.to_ascii_uppercase();
        while !self.full() {
            let name = self.ident_parts(2, true);
            self.s(&format!("\nconfig {up}_{name}\n\ttristate \""));
            self.prose(4);
            self.s("\"\n\tdepends on ");
            self.s(&up);
            if self.chance(0.5) {
                self.s(" || COMPILE_TEST");
            }
            self.s("\n\thelp\n");
            let n = self.r.random_range(15..60);
            self.paragraph("\t  ", n, 72);
            self.s("\n\t  To compile this driver as a module, choose M here: the module\n\t  will be called ");
            self.s(prefix);
            self.s(".\n");
        }
    }

    pub(super) fn makefile(&mut self, prefix: &str) {
        self.s("# SPDX-License-Identifier: GPL-2.0\n");
        let up = prefix.to_ascii_uppercase();
        while !self.full() {
            let name = self.ident_parts(1, false);
            let cfg = self.ident_parts(1, true);
            self.s(&format!("obj-$(CONFIG_{up}_{cfg})\t+= {prefix}_{name}.o\n"));
            if self.chance(0.2) {
                self.s(&format!("{prefix}-y\t\t\t\t:= {name}.o "));
                let n = self.ident_parts(1, false);
                self.s(&n);
                self.s(".o\n");
            }
        }
    }
}
