//! The writer every kind of content shares: the output buffer, the file's random stream, and
//! the text primitives (words, prose, identifiers, numbers, repeated lines, licence headers).

use rand::Rng;

use super::draw::{CorpusRng, pick, zipf};
use super::vocab::*;

/// Writes one file's content into `o`, drawing from `r`.
pub(super) struct W<'a> {
    pub(super) r: &'a mut CorpusRng,
    pub(super) o: &'a mut Vec<u8>,
    pub(super) size: usize,
    pub(super) density: f64,
    /// Recent prose words, for repeating phrases.
    pub(super) words: Vec<&'static str>,
    /// A phrase being repeated: (next index in `words`, words left).
    pub(super) copy: (usize, usize),
    /// Byte ranges of recent single-line statements, for repeating them.
    pub(super) lines: Vec<(usize, usize)>,
}

impl W<'_> {
    pub(super) fn full(&self) -> bool {
        self.o.len() >= self.size
    }

    pub(super) fn s(&mut self, s: &str) {
        self.o.extend_from_slice(s.as_bytes());
    }

    pub(super) fn tabs(&mut self, n: usize) {
        for _ in 0..n {
            self.o.push(b'\t');
        }
    }

    /// A count below `max`, usually small, sometimes large: block
    /// lengths vary that way, which spreads per-page sizes.
    pub(super) fn long_tail(&mut self, max: usize) -> usize {
        zipf(self.r, max, 3)
    }

    pub(super) fn chance(&mut self, p: f64) -> bool {
        self.r.random::<f64>() < p
    }

    pub(super) fn word(&mut self, list: &[&str], skew: i32) {
        let w = pick(self.r, list, skew);
        self.s(w);
    }

    /// Words of prose, space separated, `n` of them.
    pub(super) fn prose(&mut self, n: usize) {
        for i in 0..n {
            if i > 0 {
                self.o.push(b' ');
            }
            let w = self.en_word();
            self.s(w);
        }
    }

    /// The next prose word. Technical prose repeats its phrases ("the
    /// device", "is not supported"): now and then a run of recent words
    /// is repeated, less often the denser the text.
    pub(super) fn en_word(&mut self) -> &'static str {
        if self.copy.1 > 0 {
            let w = self.words[self.copy.0];
            self.copy.0 += 1;
            self.copy.1 -= 1;
            self.words.push(w);
            return w;
        }
        let n = self.words.len();
        if n > 16 && self.chance(0.6 - 0.4 * self.density) {
            let k = self.r.random_range(2..7).min(n);
            let back = k + zipf(self.r, (n - k).min(300), 2);
            self.copy = (n - back, k);
            return self.en_word();
        }
        // Denser text draws from the long tail more often.
        let skew = if self.chance(self.density * 0.5) {
            1
        } else {
            3
        };
        let w = pick(self.r, WORDS_EN, skew);
        if n >= 4096 {
            self.words.drain(..2048);
        }
        self.words.push(w);
        w
    }

    /// Repeat one of the recent single-line statements, if any, at
    /// indentation `d`.
    pub(super) fn repeat_line(&mut self, d: usize) -> bool {
        let n = self.lines.len();
        if n == 0 {
            return false;
        }
        let (a, b) = self.lines[n - 1 - zipf(self.r, n, 2)];
        self.tabs(d);
        self.o.extend_from_within(a..b);
        true
    }

    /// Remember the line written since `start`, without its indentation.
    pub(super) fn remember_line(&mut self, start: usize) {
        let tabs = self.o[start..].iter().take_while(|&&b| b == b'\t').count();
        if self.lines.len() >= 32 {
            self.lines.remove(0);
        }
        self.lines.push((start + tabs, self.o.len()));
    }

    /// Prose wrapped at about `width` columns, each line led by `lead`.
    pub(super) fn paragraph(&mut self, lead: &str, words: usize, width: usize) {
        self.s(lead);
        let mut col = lead.len();
        for i in 0..words {
            let w = self.en_word();
            if i > 0 {
                if col + 1 + w.len() > width {
                    self.o.push(b'\n');
                    self.s(lead);
                    col = lead.len();
                } else {
                    self.o.push(b' ');
                    col += 1;
                }
            }
            self.s(w);
            col += w.len();
        }
        self.s(".\n");
    }

    pub(super) fn ident_parts(&mut self, n: usize, upper: bool) -> String {
        let mut s = String::new();
        for i in 0..n {
            if i > 0 {
                s.push('_');
            }
            let w = pick(self.r, WORDS_ID, 2);
            if upper {
                s.push_str(&w.to_ascii_uppercase());
            } else {
                s.push_str(w);
            }
        }
        s
    }

    pub(super) fn number(&mut self) {
        if self.chance(self.density * 0.35) {
            let v: u32 = self.r.random_range(0..0x10000);
            let s = format!("0x{v:x}");
            self.s(&s);
        } else {
            let v = zipf(self.r, 64, 3);
            let s = v.to_string();
            self.s(&s);
        }
    }

    pub(super) fn license(&mut self, c_style: bool) {
        let spdx = pick(self.r, SPDX, 2);
        if c_style {
            self.s("// SPDX-License-Identifier: ");
        } else {
            self.s("/* SPDX-License-Identifier: ");
        }
        self.s(spdx);
        self.s(if c_style { "\n" } else { " */\n" });
        if self.chance(0.7) {
            self.s("/*\n * ");
            self.prose(6);
            self.s("\n *\n * Copyright (C) ");
            let y = self.r.random_range(1995..2023).to_string();
            self.s(&y);
            self.s(" ");
            self.word(NAMES, 1);
            self.s(" ");
            self.word(NAMES, 1);
            self.s(" <");
            self.word(NAMES, 1);
            self.s("@");
            self.word(PREFIXES, 1);
            self.s(".com>\n");
            if self.chance(0.4) {
                self.s(GPL_BOILERPLATE);
            }
            self.s(" */\n");
        }
        self.s("\n");
    }
}
