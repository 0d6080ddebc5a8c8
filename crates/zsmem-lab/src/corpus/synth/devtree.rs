//! Device trees (.dts, .dtsi): nodes, compatible strings, registers, clocks.

use rand::Rng;

use super::draw::{pick, strs};
use super::vocab::*;
use super::writer::W;

impl W<'_> {
    pub(super) fn devtree(&mut self, prefix: &str) {
        self.s("// SPDX-License-Identifier: (GPL-2.0+ OR MIT)\n/*\n * Copyright (c) ");
        let y = self.r.random_range(2012..2023).to_string();
        self.s(&y);
        self.s(" ");
        self.word(NAMES, 1);
        self.s("\n */\n\n#include <dt-bindings/interrupt-controller/arm-gic.h>\n\n/ {\n\tsoc: soc@0 {\n");
        let clocks: Vec<String> = (0..20)
            .map(|_| {
                format!(
                    "{}_{}",
                    prefix.to_ascii_uppercase(),
                    self.ident_parts(2, true)
                )
            })
            .collect();
        let mut addr: u32 = self.r.random_range(0x100..0x1000) << 12;
        while !self.full() {
            let node = pick(self.r, DT_NODES, 2);
            let idx = self.r.random_range(0..20);
            addr += self.r.random_range(1..64) << 12;
            self.s(&format!(
                "\t\t{node}{idx}: {node}@{addr:x} {{\n\t\t\tcompatible = \"{prefix},"
            ));
            self.s(node);
            self.s("\";\n");
            let len = 0x1000 << self.r.random_range(0..4);
            self.s(&format!("\t\t\treg = <0 0x{addr:08x} 0 0x{len:x}>;\n"));
            let props = self.r.random_range(3..10);
            for _ in 0..props {
                match self.r.random_range(0..6) {
                    0 => {
                        let c = pick(self.r, &strs(&clocks), 2).to_owned();
                        self.s(&format!("\t\t\tclocks = <&gcc {c}>;\n"));
                    }
                    1 => {
                        let irq = self.r.random_range(0..600);
                        self.s(&format!(
                            "\t\t\tinterrupts = <GIC_SPI {irq} IRQ_TYPE_LEVEL_HIGH>;\n"
                        ));
                    }
                    2 => self.s("\t\t\t#address-cells = <1>;\n\t\t\t#size-cells = <0>;\n"),
                    3 => {
                        self.s("\t\t\tpinctrl-names = \"default\";\n\t\t\tpinctrl-0 = <&");
                        self.s(node);
                        self.s(&format!("{idx}_default>;\n"));
                    }
                    4 => self.s("\t\t\tdma-names = \"tx\", \"rx\";\n"),
                    _ => {
                        self.s("\t\t\tpower-domains = <&rpmhpd ");
                        let c = pick(self.r, &strs(&clocks), 2).to_owned();
                        self.s(&c);
                        self.s(">;\n");
                    }
                }
            }
            self.s("\t\t\tstatus = \"disabled\";\n\t\t};\n\n");
        }
    }
}
