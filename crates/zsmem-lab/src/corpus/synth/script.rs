//! Scripts: shell, Python and Perl.

use rand::Rng;

use super::vocab::*;
use super::writer::W;

impl W<'_> {
    pub(super) fn script(&mut self, prefix: &str) {
        self.s("#!/bin/sh\n# SPDX-License-Identifier: GPL-2.0\n#\n# ");
        self.prose(8);
        self.s("\n\n");
        while !self.full() {
            match self.r.random_range(0..5) {
                0 => {
                    self.s("# ");
                    let n = self.r.random_range(4..14);
                    self.prose(n);
                    self.s("\n");
                }
                1 => {
                    let v = self.ident_parts(1, false);
                    self.s(&format!("if [ -z \"${v}\" ]; then\n\techo \""));
                    self.prose(5);
                    self.s("\" >&2\n\texit 1\nfi\n");
                }
                2 => {
                    let f = self.ident_parts(2, false);
                    self.s(&format!("{prefix}_{f}()\n{{\n\tlocal "));
                    self.word(VARS, 2);
                    self.s("=$1\n\n\t");
                    self.word(SHELL_CMDS, 2);
                    self.s(" \"$");
                    self.word(VARS, 2);
                    self.s("\" | ");
                    self.word(SHELL_CMDS, 2);
                    self.s("\n}\n\n");
                }
                _ => {
                    self.word(SHELL_CMDS, 2);
                    self.s(" ");
                    self.word(VARS, 2);
                    self.s(" \"$");
                    self.word(VARS, 2);
                    self.s("\"\n");
                }
            }
        }
    }
}
