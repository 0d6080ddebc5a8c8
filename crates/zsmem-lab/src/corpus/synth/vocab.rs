//! The vocabularies text is drawn from: licences, identifier parts, kernel types and calls,
//! errno names, device-tree nodes, assembly mnemonics, shell commands, English words.

pub(super) const SPDX: &[&str] = &[
    "GPL-2.0",
    "GPL-2.0-only",
    "GPL-2.0-or-later",
    "GPL-2.0+",
    "(GPL-2.0 OR MIT)",
    "BSD-3-Clause OR GPL-2.0",
    "MIT",
];

pub(super) const GPL_BOILERPLATE: &str = " *\n * This program is free software; you can redistribute it and/or modify\n * it under the terms of the GNU General Public License version 2 as\n * published by the Free Software Foundation.\n *\n * This program is distributed in the hope that it will be useful,\n * but WITHOUT ANY WARRANTY; without even the implied warranty of\n * MERCHANTABILITY or FITNESS FOR A PARTICULAR PURPOSE.  See the\n * GNU General Public License for more details.\n";

pub(super) const AMD_BOILERPLATE: &str = "/*\n * Copyright (C) 2021  Advanced Micro Devices, Inc.\n *\n * Permission is hereby granted, free of charge, to any person obtaining a\n * copy of this software and associated documentation files (the \"Software\"),\n * to deal in the Software without restriction, including without limitation\n * the rights to use, copy, modify, merge, publish, distribute, sublicense,\n * and/or sell copies of the Software, and to permit persons to whom the\n * Software is furnished to do so, subject to the following conditions:\n *\n * The above copyright notice and this permission notice shall be included\n * in all copies or substantial portions of the Software.\n *\n * THE SOFTWARE IS PROVIDED \"AS IS\", WITHOUT WARRANTY OF ANY KIND, EXPRESS\n * OR IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,\n * FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT.  IN NO EVENT SHALL\n * THE COPYRIGHT HOLDER(S) BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER LIABILITY, WHETHER IN\n * AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM, OUT OF OR IN\n * CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE SOFTWARE.\n */\n";

#[rustfmt::skip]
pub(super) const REG_BLOCKS: &[&str] = &[
    "dcn", "nbio", "dpcs", "gc", "mmhub", "dce", "bif", "oss", "sdma", "vcn", "smuio", "athub", "hdp", "mp",
    "thm", "umc", "lsdma", "xgmi",
];

#[rustfmt::skip]
pub(super) const PREFIXES: &[&str] = &[
    "mlx", "e1000", "ath", "rtw", "amdgpu", "i915", "nouveau", "brcm", "qcom", "mtk", "sun", "imx", "tegra",
    "rockchip", "stm32", "bnx", "ixgbe", "iwl", "hns", "sdhci", "dwc", "xhci", "ehci", "wm", "rt", "cs", "tas",
    "ad", "max", "ltc", "ina", "bq", "mpu", "bmi", "hid", "usb", "uart", "spi", "i2c", "gpio", "pinctrl", "clk",
    "regulator", "pwm", "rtc", "wdt", "nvme", "scsi", "ata", "mmc", "nand", "cxl", "vfio", "kvm", "drm", "fb",
    "v4l2", "dvb", "btrfs", "ext4", "xfs", "nfs", "cifs", "f2fs", "ocfs2", "tcp", "udp", "ipv6", "sctp", "nf",
    "mptcp", "bpf", "sched", "cgroup", "lpfc", "qla", "megasas", "mpt3sas", "ice", "igb", "tg3", "bnxt", "mt76",
    "rtl", "b43", "ath10k", "ath11k", "venus", "vc4", "msm", "mdp", "dsi", "hdmi", "dp", "panel", "tcpm", "typec",
    "phy", "serdes", "pcie", "dma", "edma", "sdma", "ipu", "isp", "camss", "hfi", "gmu", "adreno", "panfrost",
    "lima", "etnaviv",
];

#[rustfmt::skip]
pub(super) const SUBDIRS: &[&str] = &[
    "net", "gpu", "media", "staging", "scsi", "usb", "ethernet", "wireless", "drm", "platform", "phy", "pinctrl",
    "clk", "iio", "input", "hid", "mfd", "misc", "soc", "infiniband", "hw", "crypto", "char", "tty", "serial",
    "mmc", "mtd", "power", "supply", "regulator", "thermal", "video", "fbdev", "i2c", "busses", "spi", "gpio",
    "pci", "controller", "acpi", "firmware", "block", "md", "nvme", "host", "target", "core", "boot", "dts",
    "mach", "kernel", "mm", "lib", "include", "asm", "uapi", "codecs", "soc", "intel", "amd", "qcom", "arm64",
    "x86", "powerpc", "mips", "riscv", "s390",
];

#[rustfmt::skip]
pub(super) const WORDS_ID: &[&str] = &[
    "reg", "ctrl", "status", "config", "init", "reset", "enable", "disable", "irq", "dma", "buf", "desc", "ring",
    "queue", "tx", "rx", "data", "len", "count", "index", "mask", "shift", "mode", "state", "flags", "clock",
    "rate", "freq", "power", "mem", "addr", "base", "offset", "size", "port", "link", "phy", "mac", "hw", "priv",
    "dev", "info", "ops", "cmd", "resp", "req", "msg", "event", "timer", "work", "lock", "list", "entry", "node",
    "table", "map", "page", "cache", "fw", "version", "id", "type", "val", "value", "channel", "stream", "pipe",
    "cfg", "param", "stats", "error", "timeout", "retry", "handler", "probe", "remove", "suspend", "resume",
    "open", "close", "read", "write", "get", "set", "update", "alloc", "free", "start", "stop", "setup", "check",
    "wait", "poll", "submit", "complete", "handle", "process", "parse", "register", "unregister", "attach",
    "detach", "query", "fill", "prepare", "release", "destroy", "create", "find", "lookup", "add", "del", "clear",
    "flush", "sync", "commit", "apply", "vblank", "crtc", "plane", "encoder", "connector", "mode", "pll", "gate",
    "mux", "div", "lane", "link", "training", "calib", "thermal", "fan", "volt", "current", "limit", "threshold",
    "level", "gain", "sample", "frame", "pixel", "format", "width", "height", "stride", "fence", "job", "ctx",
    "vm", "pte", "pde", "tlb", "mmu", "iommu", "bar", "msi", "intr", "vector", "cpu", "core", "cluster", "domain",
    "group", "slot", "bus", "host",
];

#[rustfmt::skip]
pub(super) const VARS: &[&str] = &[
    "ret", "i", "dev", "priv", "val", "data", "reg", "len", "err", "hw", "adapter", "flags", "count", "ctx",
    "buf", "idx", "mask", "status", "tmp", "j", "info", "cfg", "pdev", "skb", "page", "size", "offset", "state",
    "entry", "node", "res", "np", "rc", "id", "value", "port", "chan",
];

#[rustfmt::skip]
pub(super) const TYPES: &[&str] = &[
    "int", "u32", "void", "bool", "u8", "u16", "u64", "unsigned int", "unsigned long", "size_t", "char", "s32",
    "long", "dma_addr_t", "irqreturn_t", "ssize_t", "loff_t", "__le32", "uint32_t", "phys_addr_t", "gfp_t",
];

#[rustfmt::skip]
pub(super) const KSTRUCTS: &[&str] = &[
    "device", "platform_device", "pci_dev", "net_device", "sk_buff", "work_struct", "list_head", "mutex", "file",
    "inode", "page", "clk", "regmap", "i2c_client", "resource", "timer_list", "completion", "delayed_work",
    "seq_file", "kobject", "device_node", "dma_chan", "scatterlist", "napi_struct", "drm_device", "drm_crtc",
    "snd_soc_component", "gpio_desc", "reset_control", "regulator", "iio_dev", "input_dev", "usb_device", "urb",
];

#[rustfmt::skip]
pub(super) const KAPI: &[&str] = &[
    "kfree", "kzalloc", "dev_err", "readl", "writel", "memcpy", "memset", "spin_lock", "spin_unlock",
    "mutex_lock", "mutex_unlock", "devm_kzalloc", "kmalloc", "WARN_ON", "ARRAY_SIZE", "BIT", "GENMASK",
    "FIELD_PREP", "FIELD_GET", "udelay", "msleep", "usleep_range", "list_add_tail", "list_del", "container_of",
    "unlikely", "likely", "schedule_work", "cancel_work_sync", "platform_get_drvdata", "of_property_read_u32",
    "clk_prepare_enable", "clk_disable_unprepare", "regmap_read", "regmap_write", "regmap_update_bits",
    "dma_alloc_coherent", "dma_free_coherent", "dma_map_single", "atomic_inc", "atomic_dec_and_test",
    "copy_from_user", "copy_to_user", "min_t", "max_t", "le32_to_cpu", "cpu_to_le32", "netdev_priv", "skb_put",
    "pm_runtime_get_sync", "pm_runtime_put", "request_irq", "free_irq", "wake_up", "wait_event_timeout",
    "msecs_to_jiffies", "mod_timer", "del_timer_sync", "READ_ONCE", "WRITE_ONCE", "IS_ERR", "PTR_ERR", "ERR_PTR",
    "devm_ioremap_resource", "ioread32", "iowrite32",
];

#[rustfmt::skip]
pub(super) const ERRNO: &[&str] = &[
    "EINVAL", "ENOMEM", "EIO", "ENODEV", "EBUSY", "ETIMEDOUT", "EAGAIN", "EOPNOTSUPP", "EFAULT", "ENOENT",
    "EPERM", "ENOSPC", "ERANGE", "EPROBE_DEFER",
];

#[rustfmt::skip]
pub(super) const INCLUDES: &[&str] = &[
    "linux/module.h", "linux/kernel.h", "linux/slab.h", "linux/init.h", "linux/platform_device.h", "linux/of.h",
    "linux/device.h", "linux/io.h", "linux/delay.h", "linux/interrupt.h", "linux/clk.h", "linux/err.h",
    "linux/errno.h", "linux/types.h", "linux/pci.h", "linux/dma-mapping.h", "linux/spinlock.h", "linux/mutex.h",
    "linux/regmap.h", "linux/i2c.h", "linux/gpio/consumer.h", "linux/pm_runtime.h", "linux/netdevice.h",
    "linux/list.h", "linux/bitfield.h", "linux/workqueue.h", "linux/uaccess.h", "linux/fs.h", "linux/mm.h",
    "linux/sched.h",
];

#[rustfmt::skip]
pub(super) const DT_NODES: &[&str] = &[
    "i2c", "spi", "serial", "gpio", "mmc", "usb", "pcie", "dma-controller", "clock-controller",
    "interrupt-controller", "watchdog", "thermal-sensor", "phy", "iommu", "memory",
];

#[rustfmt::skip]
pub(super) const ASM_OPS: &[&str] = &[
    "mov", "ldr", "str", "add", "sub", "cmp", "b.ne", "b.eq", "bl", "ldp", "stp", "and", "orr", "lsl", "lsr",
    "cbz", "cbnz", "msr", "mrs", "isb", "dsb", "eor", "tst", "adr",
];

#[rustfmt::skip]
pub(super) const SHELL_CMDS: &[&str] = &[
    "echo", "grep", "sed", "awk", "cat", "test", "printf", "cut", "sort", "uniq", "ip", "ping", "tc", "modprobe",
    "sleep", "wc", "tr",
];

#[rustfmt::skip]
pub(super) const NAMES: &[&str] = &[
    "linus", "greg", "andrew", "david", "arnd", "mark", "thomas", "peter", "ingo", "jens", "christoph", "dan",
    "paul", "steven", "al", "jan", "ted", "chris", "michael", "kees", "daniel", "alex", "sasha", "jakub", "eric",
    "herbert", "rafael", "bjorn", "dmitry", "shawn", "rob", "krzysztof",
];

/// English words, most frequent first.
#[rustfmt::skip]
pub(super) const WORDS_EN: &[&str] = &[
    "the", "to", "of", "a", "is", "and", "in", "be", "for", "this", "that", "it", "if", "not", "on", "with",
    "are", "as", "by", "can", "we", "an", "or", "when", "will", "from", "which", "so", "all", "at", "has", "only",
    "used", "should", "have", "no", "there", "must", "but", "use", "one", "may", "been", "any", "then", "they",
    "these", "also", "into", "do", "than", "other", "more", "each", "need", "data", "device", "driver", "kernel",
    "memory", "page", "buffer", "register", "value", "set", "check", "call", "function", "time", "first", "new",
    "list", "case", "number", "would", "after", "before", "support", "state", "make", "some", "does", "done",
    "out", "up", "its", "where", "while", "because", "still", "now", "same", "without", "already", "here", "two",
    "them", "last", "possible", "currently", "interrupt", "hardware", "firmware", "mode", "reset", "enable",
    "disable", "clock", "power", "queue", "request", "lock", "context", "address", "size", "bit", "bits", "field",
    "mask", "status", "error", "return", "returns", "read", "write", "access", "allocate", "free", "release",
    "handle", "current", "valid", "invalid", "default", "configuration", "information", "structure", "pointer",
    "length", "count", "index", "entry", "table", "map", "cache", "flush", "update", "complete", "pending",
    "wait", "timeout", "retry", "active", "idle", "suspend", "resume", "probe", "remove", "initialize",
    "transfer", "message", "command", "response", "event", "channel", "stream", "frame", "packet", "header",
    "payload", "offset", "range", "start", "stop", "begin", "end", "next", "previous", "local", "global",
    "shared", "private", "public", "internal", "external", "user", "space", "system", "process", "thread", "task",
    "cpu", "core", "node", "zone", "region", "object", "reference", "counter", "flag", "option", "parameter",
    "argument", "variable", "constant", "instance", "type", "format", "version", "feature", "capability", "limit",
    "maximum", "minimum", "level", "threshold", "priority", "order", "sequence", "operation", "transaction",
    "protocol", "interface", "controller", "bus", "port", "link", "lane", "phy", "host", "client", "server",
    "network", "socket", "connection", "session", "policy", "rule", "filter", "match", "key", "hash", "tree",
    "root", "parent", "child", "sibling", "path", "name", "file", "directory", "inode", "block", "sector", "disk",
    "volume", "partition", "mount", "filesystem", "journal", "transaction", "commit", "rollback", "snapshot",
    "backup", "always", "never", "usually", "typically", "probably", "actually", "simply", "just", "even",
    "however", "therefore", "otherwise", "instead", "either", "neither", "both", "every", "several", "many",
    "few", "most", "least", "much", "little", "large", "small", "big", "long", "short", "high", "low", "fast",
    "slow", "early", "late", "correct", "wrong", "safe", "unsafe", "atomic", "concurrent", "serialized",
    "ordered", "guarantee", "ensure", "avoid", "prevent", "allow", "require", "expect", "assume", "note", "see",
    "described", "following", "above", "below", "between", "within", "across", "against", "during", "until",
    "since", "through", "under", "over", "about", "again", "further", "once", "workaround", "errata", "silicon",
    "revision", "vendor", "specific", "generic", "legacy", "compatible", "obsolete", "deprecated", "broken",
    "quirk", "corruption", "overflow", "underflow", "race", "deadlock", "livelock", "starvation", "fairness",
    "latency", "throughput", "bandwidth",
];
