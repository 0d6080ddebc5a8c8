//! Documentation: reStructuredText and plain-text prose, and translations with CJK paragraphs.

use rand::Rng;

use super::draw::{pick, zipf};
use super::vocab::*;
use super::writer::W;

impl W<'_> {
    pub(super) fn doc(&mut self, translation: bool) {
        let title = {
            let n = self.r.random_range(2..6);
            let mut t = String::new();
            for i in 0..n {
                if i > 0 {
                    t.push(' ');
                }
                t.push_str(pick(self.r, WORDS_EN, 2));
            }
            t
        };
        self.s(".. SPDX-License-Identifier: GPL-2.0\n\n");
        self.s(&"=".repeat(title.len()));
        self.s("\n");
        self.s(&title);
        self.s("\n");
        self.s(&"=".repeat(title.len()));
        self.s("\n\n");
        while !self.full() {
            let x = self.r.random_range(0..100);
            if translation && x < 70 {
                self.cjk_paragraph();
                continue;
            }
            match x {
                0..=59 => {
                    let n = self.r.random_range(15..90);
                    self.paragraph("", n, 78);
                    self.s("\n");
                }
                60..=69 => {
                    let h = self.ident_parts(2, false).replace('_', " ");
                    self.s(&h);
                    self.s("\n");
                    self.s(&"-".repeat(h.len()));
                    self.s("\n\n");
                }
                70..=84 => {
                    let n = self.r.random_range(2..8);
                    for _ in 0..n {
                        let k = self.r.random_range(5..25);
                        self.paragraph("- ", k, 78);
                    }
                    self.s("\n");
                }
                _ => {
                    self.s("::\n\n");
                    let n = self.r.random_range(2..10);
                    for _ in 0..n {
                        self.s("\t");
                        self.word(VARS, 2);
                        self.s(" = ");
                        self.word(KAPI, 2);
                        self.s("(");
                        self.word(VARS, 2);
                        self.s(");\n");
                    }
                    self.s("\n");
                }
            }
        }
    }

    /// Text in CJK ideographs: three bytes a character and little
    /// repetition, the reason real translations make huge pages.
    pub(super) fn cjk_paragraph(&mut self) {
        let n = self.r.random_range(40..200);
        let mut col = 0;
        for _ in 0..n {
            let c = 0x4e00 + zipf(self.r, 3000, 2) as u32;
            let ch = char::from_u32(c).unwrap_or('?');
            let mut b = [0u8; 4];
            self.s(ch.encode_utf8(&mut b));
            col += 2;
            if col >= 76 {
                self.s("\n");
                col = 0;
            }
        }
        self.s("。\n\n");
    }
}
