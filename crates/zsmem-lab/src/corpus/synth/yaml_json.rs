//! YAML bindings and JSON data files.

use rand::Rng;

use super::draw::pick;
use super::vocab::*;
use super::writer::W;

impl W<'_> {
    pub(super) fn yaml(&mut self, prefix: &str) {
        self.s("# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)\n%YAML 1.2\n---\n$id: http://devicetree.org/schemas/");
        self.s(prefix);
        self.s(".yaml#\n$schema: http://devicetree.org/meta-schemas/core.yaml#\n\ntitle: ");
        self.prose(4);
        self.s("\n\nmaintainers:\n  - ");
        self.word(NAMES, 1);
        self.s(" <");
        self.word(NAMES, 1);
        self.s("@kernel.org>\n\ndescription:\n");
        let n = self.r.random_range(10..40);
        self.paragraph("  ", n, 76);
        self.s("\nproperties:\n  compatible:\n    enum:\n");
        let n = self.r.random_range(2..10);
        for _ in 0..n {
            let (p, n) = (pick(self.r, PREFIXES, 1), self.r.random_range(100..9999));
            self.s(&format!("      - {prefix},{p}{n}\n"));
        }
        while !self.full() {
            self.s("\n  ");
            let p = self.ident_parts(2, false).replace('_', "-");
            self.s(&p);
            self.s(":\n    ");
            match self.r.random_range(0..3) {
                0 => self.s("$ref: /schemas/types.yaml#/definitions/uint32\n"),
                1 => self.s("maxItems: 1\n"),
                _ => self.s("type: boolean\n"),
            }
            self.s("    description:\n");
            let n = self.r.random_range(5..25);
            self.paragraph("      ", n, 76);
        }
    }

    pub(super) fn json(&mut self) {
        self.s("[\n");
        while !self.full() {
            self.s("    {\n        \"BriefDescription\": \"");
            let n = self.r.random_range(3..12);
            self.prose(n);
            self.s("\",\n        \"Counter\": \"0,1,2,3\",\n        \"EventCode\": \"");
            let v = format!("0x{:x}", self.r.random_range(0..256));
            self.s(&v);
            self.s("\",\n        \"EventName\": \"");
            let e = self.ident_parts(2, true);
            self.s(&e);
            self.s(".");
            let e = self.ident_parts(1, true);
            self.s(&e);
            self.s("\",\n        \"PublicDescription\": \"");
            let n = self.r.random_range(5..40);
            self.prose(n);
            self.s(".\",\n        \"SampleAfterValue\": \"2000003\",\n        \"UMask\": \"");
            let v = format!("0x{:x}", self.r.random_range(0..16));
            self.s(&v);
            self.s("\"\n    },\n");
        }
        self.s("]\n");
    }
}
