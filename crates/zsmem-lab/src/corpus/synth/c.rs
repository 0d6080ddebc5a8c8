//! C sources and headers: functions, structs, enums, macros and the identifiers one file shares.

use rand::Rng;

use super::draw::{CorpusRng, pick, strs, zipf};
use super::vocab::*;
use super::writer::W;

/// Identifiers local to one C file.
pub(super) struct Locals {
    pub(super) funcs: Vec<String>,
    pub(super) macros: Vec<String>,
    pub(super) fields: Vec<String>,
    pub(super) structs: Vec<String>,
    pub(super) vars: Vec<String>,
    pub(super) prefix: String,
}

impl Locals {
    /// The few identifiers one function works with: a function
    /// touches the same handful of fields and helpers again and again.
    fn scope(&self, r: &mut CorpusRng, density: f64) -> Locals {
        let mut sub = |v: &[String], lo: f64, hi: f64| -> Vec<String> {
            let n = (lo + (hi - lo) * density) as usize + r.random_range(0..3);
            (0..n.max(1))
                .map(|_| v[zipf(r, v.len(), 2)].clone())
                .collect()
        };
        Locals {
            funcs: sub(&self.funcs, 1.0, 8.0),
            macros: sub(&self.macros, 1.0, 10.0),
            fields: sub(&self.fields, 1.0, 9.0),
            structs: self.structs.clone(),
            vars: sub(&self.vars, 1.0, 6.0),
            prefix: self.prefix.clone(),
        }
    }
}

impl W<'_> {
    pub(super) fn locals(&mut self, prefix: &str) -> Locals {
        let d = self.density;
        let n = |w: &mut Self, lo: f64, hi: f64| -> usize {
            (lo + (hi - lo) * d) as usize + w.r.random_range(0..8)
        };
        let nf = n(self, 12.0, 60.0);
        let nm = n(self, 10.0, 60.0);
        let nfi = n(self, 10.0, 40.0);
        let ns = n(self, 2.0, 8.0);
        let up = prefix.to_ascii_uppercase();
        let mut funcs = Vec::with_capacity(nf);
        for _ in 0..nf {
            let k = self.r.random_range(1..3);
            let tail = self.ident_parts(k, false);
            funcs.push(format!("{prefix}_{tail}"));
        }
        let mut macros = Vec::with_capacity(nm);
        for _ in 0..nm {
            let k = self.r.random_range(1..4);
            let tail = self.ident_parts(k, true);
            macros.push(format!("{up}_{tail}"));
        }
        let mut fields = Vec::with_capacity(nfi);
        for _ in 0..nfi {
            let k = self.r.random_range(1..3);
            fields.push(self.ident_parts(k, false));
        }
        let mut structs = Vec::with_capacity(ns);
        for _ in 0..ns {
            let tail = self.ident_parts(1, false);
            structs.push(format!("{prefix}_{tail}"));
        }
        let vars = VARS.iter().map(|v| (*v).to_owned()).collect();
        Locals {
            funcs,
            macros,
            fields,
            structs,
            vars,
            prefix: prefix.to_owned(),
        }
    }

    pub(super) fn c_source(&mut self, prefix: &str, header: bool) {
        let l = self.locals(prefix);
        self.license(!header);
        if header {
            let guard = format!(
                "_{}_{}_H",
                l.prefix.to_ascii_uppercase(),
                self.ident_parts(1, true)
            );
            self.s(&format!("#ifndef {guard}\n#define {guard}\n\n"));
        }
        let incs = self.r.random_range(2..14);
        for _ in 0..incs {
            self.s("#include <");
            self.word(INCLUDES, 2);
            self.s(">\n");
        }
        self.s("\n");
        // Each file has its own mix of sections: some are mostly
        // functions, some mostly register definitions or init tables,
        // which is what spreads real pages' compressed sizes so widely.
        let u: f64 = self.r.random();
        let v: f64 = self.r.random();
        let (w_def, w_tab) = if header {
            // A third of headers are register definitions only.
            if u < 0.35 {
                (1.0, 0.0)
            } else {
                (0.2 + 0.5 * u, 0.05 * v)
            }
        } else {
            (0.03 + 0.55 * u * u, 0.02 + 0.5 * v * v)
        };
        while !self.full() {
            let x: f64 = self.r.random();
            if x < w_def {
                self.defines(&l);
            } else if x < w_def + w_tab {
                self.table(&l);
            } else if header {
                // Denser headers are the documented ones: more prose.
                if self.chance(0.1 + 0.25 * self.density) {
                    self.block_comment(0);
                    continue;
                }
                match self.r.random_range(0..9) {
                    0..=3 => self.struct_def(&l),
                    4..=6 => self.prototypes(&l),
                    7 => self.function(&l),
                    _ => self.enum_def(&l),
                }
            } else {
                match self.r.random_range(0..20) {
                    0 => self.struct_def(&l),
                    1 => self.block_comment(0),
                    _ => self.function(&l),
                }
            }
        }
        if header {
            self.s("#endif\n");
        }
    }

    /// A run of register definitions: one register's offset, then its
    /// fields with shifts or masks, tab-aligned as in driver headers.
    pub(super) fn defines(&mut self, l: &Locals) {
        let up = l.prefix.to_ascii_uppercase();
        let regs = 1 + self.long_tail(30);
        let mut off: u32 = self.r.random_range(0..0x400) * 4;
        let style = self.r.random_range(0..4);
        let max_fields = self.r.random_range(2..24);
        // Documented registers carry a comment per line.
        let comments = (0.4 * (self.density - 0.3)).clamp(0.0, 0.5);
        for _ in 0..regs {
            let k = self.r.random_range(1..3);
            let reg = self.ident_parts(k, true);
            let name = format!("#define {up}_{reg}");
            self.s(&name);
            self.def_pad(name.len());
            self.s(&format!("0x{off:04x}\n"));
            off += 4 * self.r.random_range(1..4);
            let n = self.r.random_range(0..max_fields);
            let mut bit = 0u32;
            for _ in 0..n {
                if bit > 31 {
                    break;
                }
                let f = self.ident_parts(1, true);
                let name = format!("#define {up}_{reg}_{f}");
                self.s(&name);
                self.def_pad(name.len());
                let width = 1 + zipf(self.r, 8, 3) as u32;
                match style {
                    0 => self.s(&format!("BIT({bit})")),
                    1 => self.s(&format!("GENMASK({}, {bit})", (bit + width - 1).min(31))),
                    2 => {
                        let mask = (((1u64 << width) - 1) << bit) as u32;
                        self.s(&format!("0x{mask:08x}"));
                    }
                    _ => self.s(&format!("{bit}")),
                }
                if self.chance(comments) {
                    self.s("\t/* ");
                    let n = self.r.random_range(2..8);
                    self.prose(n);
                    self.s(" */");
                }
                self.s("\n");
                bit += width;
            }
        }
        self.s("\n");
    }

    /// Tabs to column 48, as kernel headers align their values.
    pub(super) fn def_pad(&mut self, used: usize) {
        let n = 1 + 48usize.saturating_sub(used + 1) / 8;
        self.tabs(n);
    }

    pub(super) fn struct_def(&mut self, l: &Locals) {
        self.s("struct ");
        let name = pick(self.r, &strs(&l.structs), 1).to_owned();
        self.s(&name);
        self.s(" {\n");
        let n = self.r.random_range(3..16);
        for _ in 0..n {
            self.tabs(1);
            if self.chance(0.3) {
                self.s("struct ");
                self.word(KSTRUCTS, 2);
                let star = if self.chance(0.5) { " *" } else { " " };
                self.s(star);
            } else {
                self.word(TYPES, 2);
                self.s(" ");
            }
            self.local(&l.fields, 2);
            if self.chance(0.2) {
                self.s("[");
                self.local(&l.macros, 2);
                self.s("]");
            }
            self.s(";");
            if self.chance(0.15) {
                self.s("\t/* ");
                self.prose(4);
                self.s(" */");
            }
            self.s("\n");
        }
        self.s("};\n\n");
    }

    pub(super) fn enum_def(&mut self, l: &Locals) {
        self.s("enum ");
        self.local(&l.structs, 1);
        self.s(" {\n");
        let n = self.r.random_range(3..20);
        let base = self.ident_parts(1, true);
        let up = l.prefix.to_ascii_uppercase();
        for _ in 0..n {
            self.s(&format!("\t{up}_{base}_"));
            let p = self.ident_parts(1, true);
            self.s(&p);
            self.s(",\n");
        }
        self.s("};\n\n");
    }

    pub(super) fn prototypes(&mut self, l: &Locals) {
        let n = self.r.random_range(2..10);
        for _ in 0..n {
            self.word(TYPES, 2);
            self.s(" ");
            self.local(&l.funcs, 1);
            self.s("(struct ");
            self.local(&l.structs, 1);
            self.s(" *");
            self.word(VARS, 2);
            if self.chance(0.6) {
                self.s(", ");
                self.word(TYPES, 2);
                self.s(" ");
                self.word(VARS, 2);
            }
            self.s(");\n");
        }
        self.s("\n");
    }

    pub(super) fn local(&mut self, list: &[String], skew: i32) {
        let i = zipf(self.r, list.len(), skew);
        self.o.extend_from_slice(list[i].as_bytes());
    }

    pub(super) fn block_comment(&mut self, indent: usize) {
        self.tabs(indent);
        self.s("/*\n");
        let lines = 1 + self.long_tail(40);
        for _ in 0..lines {
            self.tabs(indent);
            self.s(" * ");
            let n = self.r.random_range(6..12);
            self.prose(n);
            self.s("\n");
        }
        self.tabs(indent);
        self.s(" */\n");
    }

    /// An initialisation table: register/value pairs with rising
    /// addresses, or rows of macros and small numbers.
    pub(super) fn table(&mut self, l: &Locals) {
        self.s("static const struct ");
        self.local(&l.structs, 1);
        self.s(" ");
        self.local(&l.fields, 1);
        self.s("[] = {\n");
        let n = 4 + self.long_tail(300);
        let regs = self.chance(0.6);
        let mut addr: u32 = self.r.random_range(0..0x4000) * 4;
        for _ in 0..n {
            if regs {
                let v: u32 = if self.chance(0.5) {
                    0
                } else {
                    self.r.random_range(0..0x10000)
                };
                self.s(&format!("\t{{ 0x{addr:04x}, 0x{v:04x} }},\n"));
                addr += 4 * (1 + zipf(self.r, 4, 3) as u32);
                continue;
            }
            self.s("\t{ ");
            let k = self.r.random_range(2..5);
            for j in 0..k {
                if j > 0 {
                    self.s(", ");
                }
                if self.chance(0.5) {
                    self.local(&l.macros, 2);
                } else {
                    self.number();
                }
            }
            self.s(" },\n");
        }
        self.s("};\n\n");
    }

    pub(super) fn function(&mut self, l: &Locals) {
        let name = pick(self.r, &strs(&l.funcs), 1).to_owned();
        let arg_struct = pick(self.r, &strs(&l.structs), 1).to_owned();
        let arg = pick(self.r, VARS, 2);
        if self.chance(0.35) {
            self.s("/**\n * ");
            self.s(&name);
            self.s(" - ");
            self.prose(6);
            self.s("\n * @");
            self.s(arg);
            self.s(": ");
            self.prose(4);
            self.s("\n *\n");
            let n = self.r.random_range(10..40);
            self.paragraph(" * ", n, 76);
            self.s(" */\n");
        }
        if self.chance(0.7) {
            self.s("static ");
        }
        let ret = pick(self.r, TYPES, 2);
        self.s(ret);
        self.s(" ");
        self.s(&name);
        self.s("(struct ");
        self.s(&arg_struct);
        self.s(" *");
        self.s(arg);
        if self.chance(0.5) {
            self.s(", ");
            self.word(TYPES, 2);
            self.s(" ");
            self.local(&l.vars, 2);
        }
        self.s(")\n{\n");
        // Declarations.
        let decls = self.r.random_range(0..4);
        for _ in 0..decls {
            self.tabs(1);
            if self.chance(0.4) {
                self.s("struct ");
                self.local(&l.structs, 1);
                self.s(" *");
                self.local(&l.vars, 2);
                self.s(" = ");
                self.s(arg);
                self.s("->");
                self.local(&l.fields, 2);
            } else {
                self.word(TYPES, 2);
                self.s(" ");
                self.local(&l.vars, 2);
            }
            self.s(";\n");
        }
        if decls > 0 {
            self.s("\n");
        }
        let scope = l.scope(self.r, self.density);
        let n = 2 + self.long_tail(60);
        for _ in 0..n {
            self.statement(&scope, arg, 1);
        }
        self.s("\treturn ");
        if self.chance(0.5) {
            self.s("0");
        } else {
            self.local(&l.vars, 2);
        }
        self.s(";\n}\n\n");
        if self.chance(0.1) {
            self.s("EXPORT_SYMBOL_GPL(");
            self.s(&name);
            self.s(");\n\n");
        }
    }

    pub(super) fn operand(&mut self, l: &Locals, obj: &str) {
        // Dense code names more distinct things.
        if self.chance(0.4 * (self.density - 0.5).max(0.0)) {
            let k = self.r.random_range(1..3);
            let upper = self.chance(0.3);
            let id = self.ident_parts(k, upper);
            self.s(&id);
            return;
        }
        match self.r.random_range(0..6) {
            0 | 1 => self.local(&l.vars, 2),
            2 => {
                self.s(obj);
                self.s("->");
                self.local(&l.fields, 2);
            }
            3 => self.local(&l.macros, 2),
            4 => self.number(),
            _ => {
                self.s("&");
                self.s(obj);
                self.s("->");
                self.local(&l.fields, 2);
            }
        }
    }

    pub(super) fn call(&mut self, l: &Locals, obj: &str) {
        if self.chance(0.5) {
            self.local(&l.funcs, 2);
        } else {
            self.word(KAPI, 2);
        }
        self.s("(");
        let n = self.r.random_range(0..4);
        for i in 0..n {
            if i > 0 {
                self.s(", ");
            }
            self.operand(l, obj);
        }
        self.s(")");
    }

    pub(super) fn cond(&mut self, l: &Locals, obj: &str) {
        match self.r.random_range(0..6) {
            0 => self.s("ret"),
            1 => self.s("ret < 0"),
            2 => {
                self.s("!");
                self.operand(l, obj);
            }
            3 => {
                self.operand(l, obj);
                self.s(" & ");
                self.local(&l.macros, 2);
            }
            4 => {
                self.s("IS_ERR(");
                self.local(&l.vars, 2);
                self.s(")");
            }
            _ => {
                self.operand(l, obj);
                let op = [" == ", " != ", " > ", " < "][self.r.random_range(0..4)];
                self.s(op);
                self.operand(l, obj);
            }
        }
    }

    pub(super) fn statement(&mut self, l: &Locals, obj: &str, d: usize) {
        if self.chance(0.4 - 0.27 * self.density) && self.repeat_line(d) {
            return;
        }
        let start = self.o.len();
        let x = self.r.random_range(0..100);
        match x {
            0..=19 => {
                self.tabs(d);
                self.local(&l.vars, 2);
                self.s(" = ");
                self.call(l, obj);
                self.s(";\n");
                self.remember_line(start);
            }
            20..=31 => {
                self.tabs(d);
                self.s(obj);
                self.s("->");
                self.local(&l.fields, 2);
                let op = [" = ", " |= ", " &= ~", " += "][zipf(self.r, 4, 2)];
                self.s(op);
                self.operand(l, obj);
                self.s(";\n");
                self.remember_line(start);
            }
            32..=43 => {
                self.tabs(d);
                self.s("if (");
                self.cond(l, obj);
                self.s(")\n");
                self.tabs(d + 1);
                self.s("return ");
                if self.chance(0.6) {
                    self.s("ret");
                } else {
                    self.s("-");
                    self.word(ERRNO, 2);
                }
                self.s(";\n\n");
            }
            44..=53 if d < 4 => {
                self.tabs(d);
                self.s("if (");
                self.cond(l, obj);
                self.s(") {\n");
                let n = self.r.random_range(1..5);
                for _ in 0..n {
                    self.statement(l, obj, d + 1);
                }
                self.tabs(d);
                self.s("}\n");
            }
            54..=58 if d < 4 => {
                self.tabs(d);
                self.s("for (i = 0; i < ");
                self.operand(l, obj);
                self.s("; i++) {\n");
                let n = self.r.random_range(1..4);
                for _ in 0..n {
                    self.statement(l, obj, d + 1);
                }
                self.tabs(d);
                self.s("}\n");
            }
            59..=70 => {
                self.tabs(d);
                self.call(l, obj);
                self.s(";\n");
                self.remember_line(start);
            }
            71..=77 => {
                self.tabs(d);
                let f = pick(
                    self.r,
                    &[
                        "dev_err(",
                        "dev_dbg(",
                        "dev_warn(",
                        "pr_err(",
                        "netdev_err(",
                    ],
                    2,
                );
                self.s(f);
                if self.chance(0.7) {
                    self.s("&");
                    self.s(obj);
                    self.s("->dev, ");
                }
                self.s("\"");
                let n = self.r.random_range(2..8);
                self.prose(n);
                self.s(": %d\\n\", ret);\n");
                self.remember_line(start);
            }
            78..=85 => {
                self.tabs(d);
                self.s("/* ");
                let n = self.r.random_range(3..12);
                self.prose(n);
                self.s(" */\n");
            }
            86..=88 => self.block_comment(d),
            89..=92 => {
                let lock = pick(
                    self.r,
                    &[
                        "spin_lock",
                        "mutex_lock",
                        "spin_lock_irqsave",
                        "rcu_read_lock",
                    ],
                    2,
                );
                self.tabs(d);
                self.s(lock);
                self.s("(&");
                self.s(obj);
                self.s("->lock);\n");
                let n = self.r.random_range(1..4);
                for _ in 0..n {
                    self.statement(l, obj, d);
                }
                self.tabs(d);
                self.s(&lock.replace("lock", "unlock"));
                self.s("(&");
                self.s(obj);
                self.s("->lock);\n");
            }
            93..=95 if d < 3 => {
                self.tabs(d);
                self.s("switch (");
                self.operand(l, obj);
                self.s(") {\n");
                let n = self.r.random_range(2..6);
                for _ in 0..n {
                    self.tabs(d);
                    self.s("case ");
                    self.local(&l.macros, 1);
                    self.s(":\n");
                    self.statement(l, obj, d + 1);
                    self.tabs(d + 1);
                    self.s("break;\n");
                }
                self.tabs(d);
                self.s("default:\n");
                self.tabs(d + 1);
                self.s("break;\n");
                self.tabs(d);
                self.s("}\n");
            }
            _ => self.s("\n"),
        }
    }
}
