//! The kernel selftest `nft_concat_range.sh` (tools/testing/selftests/net/netfilter) as data:
//! its set types, value generators, the element sequence of its `correctness` loop with the
//! match and nomatch probes, the fillers of `correctness_large`, and a kernel side that loads
//! one set per type into a namespace of its own and answers `nft get element` probes
//! (`../shared/research/pipapo.md` section 4).
//!
//! Keys are given as byte strings in wasp-sets' layout: every field in big-endian bytes of its
//! width (IPv4 4, port 2, protocol 1, MAC 6, IPv6 16), concatenated without the kernel's
//! register padding.

use std::fmt::Write as _;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::process::Command;

use crate::cmd::run;
use crate::error::{Error, Result};
use crate::netns::Netns;

/// The kind of one field of a set type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `ipv4_addr`, generator `addr4(n)` = 10.0.0.5 + n.
    Addr4,
    /// `ipv6_addr`, generator `addr6(n)` = 2001:db8::HHHH:LLLL (n / 65536, n % 65536).
    Addr6,
    /// `inet_service`, generator `port(n)` = n % 65534 + 1.
    Port,
    /// `inet_proto`, always the test's protocol (UDP, 17) as a single value.
    Proto,
    /// `ether_addr`, generator `mac(n)` = 00:01 followed by n as 4 bytes.
    Mac,
}

/// The selftest's L4 protocol for `inet_proto` fields (`udp`).
pub const PROTO_UDP: u8 = 17;

impl Kind {
    /// Width in bytes.
    pub fn width(self) -> usize {
        match self {
            Kind::Addr4 => 4,
            Kind::Addr6 => 16,
            Kind::Port => 2,
            Kind::Proto => 1,
            Kind::Mac => 6,
        }
    }

    /// nft's data type name.
    pub fn nft_type(self) -> &'static str {
        match self {
            Kind::Addr4 => "ipv4_addr",
            Kind::Addr6 => "ipv6_addr",
            Kind::Port => "inet_service",
            Kind::Proto => "inet_proto",
            Kind::Mac => "ether_addr",
        }
    }

    /// The generator's value for integer `n`, as an integer of [`Kind::width`] bytes.
    pub fn value(self, n: u64) -> u128 {
        match self {
            Kind::Addr4 => u128::from((0x0a00_0005u64 + n) as u32),
            Kind::Addr6 => {
                (0x2001_0db8u128 << 96)
                    | (u128::from((n / 65536) as u16) << 16)
                    | u128::from(n as u16)
            }
            Kind::Port => u128::from(n % 65534 + 1),
            Kind::Proto => u128::from(PROTO_UDP),
            Kind::Mac => (1u128 << 32) | u128::from(n as u32),
        }
    }

    /// nft's text for value `v`.
    pub fn text(self, v: u128) -> String {
        match self {
            Kind::Addr4 => Ipv4Addr::from(v as u32).to_string(),
            Kind::Addr6 => Ipv6Addr::from(v).to_string(),
            Kind::Port | Kind::Proto => v.to_string(),
            Kind::Mac => {
                let b = (v as u64).to_be_bytes();
                b[2..]
                    .iter()
                    .map(|x| format!("{x:02x}"))
                    .collect::<Vec<_>>()
                    .join(":")
            }
        }
    }

    /// Parses one value as nft prints it (protocol names included).
    pub fn parse(self, s: &str) -> Option<u128> {
        match self {
            Kind::Addr4 => s.parse::<Ipv4Addr>().ok().map(|a| u128::from(u32::from(a))),
            Kind::Addr6 => s.parse::<Ipv6Addr>().ok().map(u128::from),
            Kind::Port => s.parse::<u16>().ok().map(u128::from),
            Kind::Proto => match s {
                "icmp" => Some(1),
                "tcp" => Some(6),
                "udp" => Some(17),
                "ipv6-icmp" | "icmpv6" => Some(58),
                _ => s.parse::<u8>().ok().map(u128::from),
            },
            Kind::Mac => {
                let parts: Vec<&str> = s.split(':').collect();
                if parts.len() != 6 {
                    return None;
                }
                let mut v = 0u128;
                for p in parts {
                    v = (v << 8) | u128::from(u8::from_str_radix(p, 16).ok()?);
                }
                Some(v)
            }
        }
    }

    /// Parses a field as nft prints it in an element: `a`, `a-b` or `a/len`; inclusive range.
    pub fn parse_range(self, s: &str) -> Option<(u128, u128)> {
        if let Some((a, len)) = s.split_once('/') {
            let a = self.parse(a)?;
            let bits = (self.width() * 8) as u32;
            let len: u32 = len.parse().ok()?;
            if len > bits {
                return None;
            }
            let host = if len == 0 {
                mask(bits)
            } else {
                mask(bits - len)
            };
            return Some((a & !host, a | host));
        }
        // '-' never occurs inside an address or a MAC in nft's output.
        match s.split_once('-') {
            Some((a, b)) => Some((self.parse(a)?, self.parse(b)?)),
            None => {
                let a = self.parse(s)?;
                Some((a, a))
            }
        }
    }
}

/// All-ones in the low `bits` bits.
fn mask(bits: u32) -> u128 {
    if bits >= 128 {
        u128::MAX
    } else {
        (1u128 << bits) - 1
    }
}

/// One field of a type: its kind and whether it is a source field (values shifted by
/// `src_delta`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldSpec {
    /// Data type.
    pub kind: Kind,
    /// Source field (`ip saddr`, `ether saddr`, `meta l4proto` counts as either).
    pub src: bool,
}

/// One `TYPE_*` of the script.
#[derive(Debug, Clone)]
pub struct TypeSpec {
    /// The type's name in the script (`net_port`).
    pub name: &'static str,
    /// Fields in key order.
    pub fields: Vec<FieldSpec>,
    /// The rule's selector expressions (`ip daddr . udp dport`).
    pub chain_spec: &'static str,
    /// First integer of the correctness loop.
    pub start: u64,
    /// Elements minus one (the loop runs count + 1 times).
    pub count: u64,
    /// Offset of source fields' integers.
    pub src_delta: u64,
    /// `race_repeat` > 0: the script runs its concurrency test on this type.
    pub concurrency: bool,
    /// `correctness_large` filler count as the script chooses it from the type_spec.
    pub script_dcount: usize,
    /// In the script's `TYPES` (false only for `net_port_proto_net`).
    pub in_types: bool,
}

fn f(kind: Kind, src: bool) -> FieldSpec {
    FieldSpec { kind, src }
}

/// Every type the script defines: the 13 of `TYPES` and `net_port_proto_net` (defined, never
/// run by the script).
pub fn types() -> Vec<TypeSpec> {
    use Kind::*;
    let t = |name,
             fields: Vec<FieldSpec>,
             chain_spec,
             start,
             count,
             concurrency,
             script_dcount,
             in_types| TypeSpec {
        name,
        fields,
        chain_spec,
        start,
        count,
        src_delta: 2000,
        concurrency,
        script_dcount,
        in_types,
    };
    vec![
        t(
            "net_port",
            vec![f(Addr4, false), f(Port, false)],
            "ip daddr . udp dport",
            1,
            5,
            true,
            32768,
            true,
        ),
        t(
            "port_net",
            vec![f(Port, false), f(Addr4, false)],
            "udp dport . ip daddr",
            1,
            5,
            true,
            32768,
            true,
        ),
        t(
            "net6_port",
            vec![f(Addr6, false), f(Port, false)],
            "ip6 daddr . udp dport",
            10,
            5,
            true,
            32768,
            true,
        ),
        t(
            "port_proto",
            vec![f(Port, false), f(Proto, true)],
            "udp dport . meta l4proto",
            1,
            5,
            false,
            65536,
            true,
        ),
        t(
            "net6_port_mac",
            vec![f(Addr6, false), f(Port, false), f(Mac, true)],
            "ip6 daddr . udp dport . ether saddr",
            10,
            5,
            false,
            32768,
            true,
        ),
        t(
            "net6_port_mac_proto",
            vec![
                f(Addr6, false),
                f(Port, false),
                f(Mac, true),
                f(Proto, true),
            ],
            "ip6 daddr . udp dport . ether saddr . meta l4proto",
            10,
            5,
            false,
            65536,
            true,
        ),
        t(
            "net_port_net",
            vec![f(Addr4, false), f(Port, false), f(Addr4, true)],
            "ip daddr . udp dport . ip saddr",
            1,
            5,
            true,
            32768,
            true,
        ),
        t(
            "net_mac",
            vec![f(Addr4, false), f(Mac, true)],
            "ip daddr . ether saddr",
            1,
            5,
            false,
            16385,
            true,
        ),
        t(
            "mac_net",
            vec![f(Mac, true), f(Addr4, true)],
            "ether saddr . ip saddr",
            1,
            5,
            false,
            16385,
            true,
        ),
        t(
            "net_mac_icmp",
            vec![f(Addr4, false), f(Mac, true)],
            "ip daddr . ether saddr",
            1,
            5,
            false,
            16385,
            true,
        ),
        t(
            "net6_mac_icmp",
            vec![f(Addr6, false), f(Mac, true)],
            "ip6 daddr . ether saddr",
            10,
            50,
            false,
            16385,
            true,
        ),
        t(
            "net6_port_net6_port",
            vec![
                f(Addr6, false),
                f(Port, false),
                f(Addr6, true),
                f(Port, true),
            ],
            "ip6 daddr . udp dport . ip6 saddr . udp sport",
            10,
            5,
            true,
            32768,
            true,
        ),
        t(
            "net_port_mac_proto_net",
            vec![
                f(Addr4, false),
                f(Port, false),
                f(Mac, true),
                f(Proto, true),
                f(Addr4, true),
            ],
            "ip daddr . udp dport . ether saddr . meta l4proto . ip saddr",
            1,
            5,
            false,
            65536,
            true,
        ),
        t(
            "net_port_proto_net",
            vec![
                f(Addr4, false),
                f(Port, false),
                f(Proto, true),
                f(Addr4, true),
            ],
            "ip daddr . udp dport . meta l4proto . ip saddr",
            1,
            5,
            true,
            16385,
            false,
        ),
    ]
}

/// An element: an inclusive range per field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Element {
    /// `(start, end)` per field.
    pub ranges: Vec<(u128, u128)>,
}

/// Writes `v` as `width` big-endian bytes.
fn push_be(out: &mut Vec<u8>, v: u128, width: usize) {
    out.extend_from_slice(&v.to_be_bytes()[16 - width..]);
}

impl TypeSpec {
    /// nft's `type` line (`ipv4_addr . inet_service`).
    pub fn type_spec(&self) -> String {
        self.fields
            .iter()
            .map(|f| f.kind.nft_type())
            .collect::<Vec<_>>()
            .join(" . ")
    }

    /// Field widths in bytes (wasp-sets' layout).
    pub fn field_lens(&self) -> Vec<usize> {
        self.fields.iter().map(|f| f.kind.width()).collect()
    }

    /// Key length in bytes.
    pub fn key_len(&self) -> usize {
        self.field_lens().iter().sum()
    }

    /// The element the script builds for the integer range `[start, end]`: destination fields
    /// `[start, end]`, source fields shifted by `src_delta`, protocol fields a single value.
    pub fn element(&self, start: u64, end: u64) -> Element {
        let ranges = self
            .fields
            .iter()
            .map(|f| {
                let d = if f.src { self.src_delta } else { 0 };
                (f.kind.value(start + d), f.kind.value(end + d))
            })
            .collect();
        Element { ranges }
    }

    /// The probe key for integer `j` (destination fields `j`, source fields `j + src_delta`).
    pub fn probe(&self, j: u64) -> Vec<u128> {
        self.fields
            .iter()
            .map(|f| f.kind.value(j + if f.src { self.src_delta } else { 0 }))
            .collect()
    }

    /// A key (one value per field) in wasp-sets' byte layout.
    pub fn key_bytes(&self, key: &[u128]) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.key_len());
        for (f, &v) in self.fields.iter().zip(key) {
            push_be(&mut out, v, f.kind.width());
        }
        out
    }

    /// An element's start and end keys in wasp-sets' byte layout.
    pub fn elem_bytes(&self, e: &Element) -> (Vec<u8>, Vec<u8>) {
        let s: Vec<u128> = e.ranges.iter().map(|r| r.0).collect();
        let t: Vec<u128> = e.ranges.iter().map(|r| r.1).collect();
        (self.key_bytes(&s), self.key_bytes(&t))
    }

    /// A key in nft's syntax (`10.0.0.6 . 2`).
    pub fn key_text(&self, key: &[u128]) -> String {
        self.fields
            .iter()
            .zip(key)
            .map(|(f, &v)| f.kind.text(v))
            .collect::<Vec<_>>()
            .join(" . ")
    }

    /// An element in nft's syntax (`10.0.0.6-10.0.0.7 . 2-3`; equal ends as one value).
    pub fn elem_text(&self, e: &Element) -> String {
        self.fields
            .iter()
            .zip(&e.ranges)
            .map(|(f, &(a, b))| {
                if a == b {
                    f.kind.text(a)
                } else {
                    format!("{}-{}", f.kind.text(a), f.kind.text(b))
                }
            })
            .collect::<Vec<_>>()
            .join(" . ")
    }

    /// Parses an element as `nft get element` prints it (timeout/expires words ignored).
    pub fn parse_elem(&self, s: &str) -> Option<Element> {
        let s = s.split(" timeout ").next()?.split(" expires ").next()?;
        let parts: Vec<&str> = s.split(" . ").map(str::trim).collect();
        if parts.len() != self.fields.len() {
            return None;
        }
        let ranges = self
            .fields
            .iter()
            .zip(parts)
            .map(|(f, p)| f.kind.parse_range(p))
            .collect::<Option<Vec<_>>>()?;
        Some(Element { ranges })
    }

    /// The element containing `key` among `elems` (the first one, as the oldest wins).
    pub fn oracle<'a>(&self, elems: &'a [Element], key: &[u128]) -> Option<&'a Element> {
        elems.iter().find(|e| {
            e.ranges
                .iter()
                .zip(key)
                .all(|(&(a, b), &v)| a <= v && v <= b)
        })
    }

    /// The `correctness_large` fillers: `n` single-value elements that never contain a test
    /// probe and never overlap each other (IPv4 destinations in 172.16/12 and 192.168/16,
    /// sources 172.16/12 shifted; IPv6 `addr6(1000000 + i)` / `addr6(2123456 + i)`; MACs
    /// `mac(1000000 + i)`; pseudo-random ports; for `inet_service . inet_proto` the port is
    /// `i % 65534 + 1` and the protocol never 17), as the script builds them.
    pub fn fillers(&self, n: usize) -> Vec<Element> {
        let mut rng: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let port_proto = self.fields.len() == 2
            && self.fields[0].kind == Kind::Port
            && self.fields[1].kind == Kind::Proto;
        (0..n)
            .map(|i| {
                let i64_ = i as u64;
                let ranges = self
                    .fields
                    .iter()
                    .map(|f| {
                        let v = match (f.kind, f.src) {
                            // 172.16.0.0 + i / 192.168.0.0 + i: never 10.0.0.x.
                            (Kind::Addr4, false) => u128::from(0xac10_0000u32 + i as u32),
                            (Kind::Addr4, true) => u128::from(0xc0a8_0000u32 + (i as u32 & 0xffff)),
                            (Kind::Addr6, false) => Kind::Addr6.value(1_000_000 + i64_),
                            (Kind::Addr6, true) => Kind::Addr6.value(2_123_456 + i64_),
                            (Kind::Mac, _) => Kind::Mac.value(1_000_000 + i64_),
                            (Kind::Port, _) if port_proto => Kind::Port.value(i64_),
                            (Kind::Port, _) => u128::from(next() % 65534 + 1),
                            (Kind::Proto, _) => {
                                let mut p = (next() % 256) as u8;
                                if p == PROTO_UDP {
                                    p = 18;
                                }
                                u128::from(p)
                            }
                        };
                        (v, v)
                    })
                    .collect();
                Element { ranges }
            })
            .collect()
    }

    /// Fillers needed so that the first field's lookup table passes the kernel's 2 MiB
    /// threshold on x86_64 (bucket of `ceil(rules / 64)` longs rounded up to 4; 4-bit groups
    /// once `width * longs > 1024`): IPv4 16 385, IPv6 4 097, port 32 769, MAC 10 753
    /// (pipapo.md section 2).
    pub fn min_dcount(&self) -> usize {
        match self.fields[0].kind {
            Kind::Addr4 => 16_385,
            Kind::Addr6 => 4_097,
            Kind::Port => 32_769,
            Kind::Mac => 10_753,
            Kind::Proto => 65_537,
        }
    }
}

/// The kernel's group width for a field of `width` bytes holding `rules` rules on x86_64, or
/// `None` at the hysteresis edge where either width may stay (pipapo.md section 2:
/// 8 -> 4 when `width * bsize > 1024`, 4 -> 8 when `width * bsize <= 1023`, `bsize` =
/// `ceil(rules / 64)` longs rounded up to 4).
pub fn kernel_group_bits(width: usize, rules: usize) -> Option<u32> {
    let longs = rules.div_ceil(64).div_ceil(4) * 4;
    match (width * longs).cmp(&1024) {
        std::cmp::Ordering::Greater => Some(4),
        std::cmp::Ordering::Less => Some(8),
        std::cmp::Ordering::Equal => None,
    }
}

/// One step of the `correctness` loop.
#[derive(Debug, Clone)]
pub enum Step {
    /// Probe the key; `expect` is the element that must contain it (`None`: no element).
    Probe {
        /// Key, one value per field.
        key: Vec<u128>,
        /// Index into [`Sequence::elements`] of the element that holds it, if any.
        expect: Option<usize>,
    },
    /// `add element` of [`Sequence::elements`]`[i]`.
    Add(usize),
    /// `delete element` of [`Sequence::elements`]`[i]`.
    Delete(usize),
}

/// The element list and steps of one type's `correctness` loop.
#[derive(Debug, Clone)]
pub struct Sequence {
    /// Elements in insertion order.
    pub elements: Vec<Element>,
    /// Adds, deletes and probes in the script's order.
    pub steps: Vec<Step>,
}

/// The `correctness` loop of the script for `t` (pipapo.md section 4.5), with `delete` false
/// for `timeout` (no deletions, no nomatch probes).
pub fn sequence(t: &TypeSpec, delete: bool) -> Sequence {
    let mut elements = Vec::new();
    let mut steps = Vec::new();
    if delete {
        // The set is still empty: the "no scratch map yet" nomatch probe.
        steps.push(Step::Probe {
            key: t.probe(t.start),
            expect: None,
        });
    }
    let mut start = t.start;
    let mut range_size = 1u64;
    for i in t.start..=t.start + t.count {
        let mut end = start + range_size;
        if end / 65534 > start / 65534 {
            start = end;
            end += 1;
        }
        let idx = elements.len();
        elements.push(t.element(start, end));
        steps.push(Step::Add(idx));
        let step = (range_size / 2 + 1) as usize;
        let js: Vec<u64> = (start..=end).step_by(step).collect();
        for &j in &js {
            steps.push(Step::Probe {
                key: t.probe(j),
                expect: Some(idx),
            });
        }
        if delete {
            steps.push(Step::Probe {
                key: t.probe(end + 1),
                expect: None,
            });
            if i % 3 == 0 {
                steps.push(Step::Delete(idx));
                for &j in &js {
                    steps.push(Step::Probe {
                        key: t.probe(j),
                        expect: None,
                    });
                }
            }
        }
        range_size += 1;
        start = end + range_size;
    }
    Sequence { elements, steps }
}

/// Kernel table holding the test sets.
pub const TABLE: &str = "inet filter";

/// A namespace with `table inet filter` and one set `test_<type>` per type
/// (`flags interval, timeout`, as the script's set).
#[derive(Debug)]
pub struct KernelSets {
    netns: Netns,
}

impl KernelSets {
    /// Creates the namespace and the sets of `types`.
    ///
    /// # Errors
    /// When the namespace cannot be created or nft refuses the table.
    pub fn new(types: &[TypeSpec]) -> Result<Self> {
        let netns = Netns::create()?;
        let mut s = String::from("table inet filter {\n");
        for t in types {
            let _ = writeln!(
                s,
                "\tset test_{} {{ type {}; flags interval, timeout; }}",
                t.name,
                t.type_spec()
            );
        }
        s.push_str("}\n");
        let k = KernelSets { netns };
        k.nft_file(&s)?;
        Ok(k)
    }

    /// The namespace.
    pub fn netns(&self) -> &Netns {
        &self.netns
    }

    /// Runs `nft -f` on `text` (written to a temporary file).
    ///
    /// # Errors
    /// When nft refuses it.
    pub fn nft_file(&self, text: &str) -> Result<()> {
        let path =
            std::env::temp_dir().join(format!("{}-{}.nft", self.netns.name(), std::process::id()));
        std::fs::write(&path, text).map_err(|e| Error::io(format!("{}", path.display()), e))?;
        let r = run(self.netns.command("nft").arg("-f").arg(&path));
        let _ = std::fs::remove_file(&path);
        r.map(|_| ())
    }

    /// `add element` (or `create element` with `create`) of `elems` in batches of 2 000 per
    /// `add element` command, all in one `nft -f` transaction; `suffix` follows each element
    /// (e.g. ` timeout 2s`).
    ///
    /// # Errors
    /// When nft refuses the transaction.
    pub fn add(&self, t: &TypeSpec, elems: &[Element], suffix: &str) -> Result<()> {
        let mut s = String::new();
        for chunk in elems.chunks(2000) {
            let _ = write!(s, "add element {TABLE} test_{} {{ ", t.name);
            for (i, e) in chunk.iter().enumerate() {
                if i > 0 {
                    s.push_str(", ");
                }
                s.push_str(&t.elem_text(e));
                s.push_str(suffix);
            }
            s.push_str(" }\n");
        }
        self.nft_file(&s)
    }

    /// `delete element` of `e`.
    ///
    /// # Errors
    /// When nft refuses it.
    pub fn delete(&self, t: &TypeSpec, e: &Element) -> Result<()> {
        self.nft_file(&format!(
            "delete element {TABLE} test_{} {{ {} }}\n",
            t.name,
            t.elem_text(e)
        ))
    }

    /// `nft get element` of the key: the element the kernel returns (`Ok(None)` when nft says
    /// "No such file or directory").
    ///
    /// # Errors
    /// When nft fails otherwise or prints something that does not parse as one element.
    pub fn get(&self, t: &TypeSpec, key: &[u128]) -> Result<Option<Element>> {
        let text = format!("{{ {} }}", t.key_text(key));
        let mut cmd: Command = self.netns.command("nft");
        cmd.args([
            "get",
            "element",
            "inet",
            "filter",
            &format!("test_{}", t.name),
            &text,
        ]);
        let out = cmd
            .output()
            .map_err(|e| Error::io("running nft get element", e))?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        if !out.status.success() {
            if stderr.contains("No such file or directory") {
                return Ok(None);
            }
            return Err(Error::Command {
                command: format!("nft get element inet filter test_{} {text}", t.name),
                detail: stderr.trim().to_string(),
            });
        }
        let bad = |why: &str| Error::Command {
            command: format!("nft get element inet filter test_{} {text}", t.name),
            detail: format!("{why}: {stdout}"),
        };
        let body = stdout
            .split_once("elements = {")
            .and_then(|(_, r)| r.split_once('}'))
            .map(|(b, _)| b.trim())
            .ok_or_else(|| bad("no elements"))?;
        if body.contains(',') {
            return Err(bad("more than one element"));
        }
        t.parse_elem(body)
            .map(Some)
            .ok_or_else(|| bad("unparsable element"))
    }
}

/// A frame that carries `key` for `t`'s rule (`t.chain_spec`): Ethernet from the source MAC
/// field (else 02:00:00:00:00:01) to 02:00:00:00:00:02; IPv6 when a field is an IPv6 address,
/// else IPv4, addresses from the destination / source address fields (else 10.0.0.2 /
/// 10.0.0.1); UDP with ports from the port fields (else 1024), or an ICMP / ICMPv6 echo
/// request for the `*_icmp` types (the script pings them).
pub fn frame(t: &TypeSpec, key: &[u128]) -> Vec<u8> {
    use crate::generate::{DST_MAC, SRC_MAC, V4, ether, icmp, ipv6, udp};
    let mut src_mac = SRC_MAC;
    let (mut d4, mut s4) = ([10, 0, 0, 2], [10, 0, 0, 1]);
    let (mut d6, mut s6) = (
        Kind::Addr6.value(2).to_be_bytes(),
        Kind::Addr6.value(1).to_be_bytes(),
    );
    let (mut dport, mut sport) = (1024u16, 1024u16);
    let mut v6 = false;
    for (f, &v) in t.fields.iter().zip(key) {
        match (f.kind, f.src) {
            (Kind::Mac, _) => src_mac.copy_from_slice(&v.to_be_bytes()[10..]),
            (Kind::Addr4, false) => d4 = (v as u32).to_be_bytes(),
            (Kind::Addr4, true) => s4 = (v as u32).to_be_bytes(),
            (Kind::Addr6, false) => (d6, v6) = (v.to_be_bytes(), true),
            (Kind::Addr6, true) => (s6, v6) = (v.to_be_bytes(), true),
            (Kind::Port, false) => dport = v as u16,
            (Kind::Port, true) => sport = v as u16,
            (Kind::Proto, _) => {}
        }
    }
    let ping = t.name.ends_with("_icmp");
    if v6 {
        let (next, l4) = if ping {
            (58, icmp(128, 0))
        } else {
            (PROTO_UDP, udp(sport, dport, &[0; 8], None))
        };
        ether(
            DST_MAC,
            src_mac,
            &[],
            0x86dd,
            &ipv6(s6, d6, next, 64, &l4, None),
        )
    } else {
        let (proto, l4) = if ping {
            (1, icmp(8, 0))
        } else {
            (PROTO_UDP, udp(sport, dport, &[0; 8], None))
        };
        let mut ip = V4::new(proto);
        ip.src = s4;
        ip.dst = d4;
        ether(DST_MAC, src_mac, &[], 0x0800, &ip.build(&l4))
    }
}

/// A netdev ruleset for the harness (ingress of `dev`): set `test` of `t`'s type with
/// `elements` and the rule `<chain_spec> @test counter drop`, as the script's chain.
pub fn ruleset(t: &TypeSpec, elements: &[&Element], dev: &str) -> String {
    let elems: Vec<String> = elements.iter().map(|e| t.elem_text(e)).collect();
    format!(
        "table netdev concat {{\n\tset test {{\n\t\ttype {};\n\t\tflags interval;\n\t\telements = {{ {} }}\n\t}}\n\tchain in {{\n\t\ttype filter hook ingress device \"{dev}\" priority 0; policy accept;\n\t\t{} @test counter drop\n\t}}\n}}\n",
        t.type_spec(),
        elems.join(", "),
        t.chain_spec
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generators_match_the_script() {
        assert_eq!(Kind::Addr4.text(Kind::Addr4.value(1)), "10.0.0.6");
        assert_eq!(
            Kind::Addr6.text(Kind::Addr6.value(65536 + 10)),
            "2001:db8::1:a"
        );
        assert_eq!(
            Kind::Mac.text(Kind::Mac.value(0x0102_0304)),
            "00:01:01:02:03:04"
        );
        assert_eq!(Kind::Port.value(65534), 1);
        assert_eq!(Kind::Port.value(0), 1);
    }

    #[test]
    fn parse_nft_output() {
        let t = &types()[0];
        let e = t
            .parse_elem("10.0.0.6/31 . 2-3 timeout 2s expires 1s988ms")
            .unwrap();
        assert_eq!(e, t.element(1, 2));
        assert_eq!(Kind::Proto.parse_range("udp"), Some((17, 17)));
        assert_eq!(
            Kind::Addr6.parse_range("2001:db8::a-2001:db8::c"),
            Some((Kind::Addr6.value(10), Kind::Addr6.value(12)))
        );
    }

    #[test]
    fn net_port_sequence() {
        // start 1, count 5: elements [1,2], [4,6], [9,12], [16,20], [25,30], [36,42].
        let t = &types()[0];
        let s = sequence(t, true);
        let want: Vec<Element> = [(1, 2), (4, 6), (9, 12), (16, 20), (25, 30), (36, 42)]
            .iter()
            .map(|&(a, b)| t.element(a, b))
            .collect();
        assert_eq!(s.elements, want);
        let deletes = s
            .steps
            .iter()
            .filter(|x| matches!(x, Step::Delete(_)))
            .count();
        // i = 1..=6: i % 3 == 0 for 3 and 6.
        assert_eq!(deletes, 2);
    }

    #[test]
    fn fourteen_types() {
        let ts = types();
        assert_eq!(ts.len(), 14);
        assert_eq!(ts.iter().filter(|t| t.in_types).count(), 13);
        assert_eq!(kernel_group_bits(4, 16_128), Some(8));
        assert_eq!(kernel_group_bits(4, 16_384), None);
        assert_eq!(kernel_group_bits(4, 16_385), Some(4));
        assert_eq!(kernel_group_bits(16, 4_097), Some(4));
        assert_eq!(kernel_group_bits(6, 10_753), Some(4));
        assert_eq!(kernel_group_bits(2, 32_769), Some(4));
    }
}
