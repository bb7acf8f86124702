//! The rules of a set of concatenated ranges as DPDK's `rte_acl` takes them (field
//! definitions, rules and input buffers), for the `acl-compare` benchmark. No FFI here: this
//! module only lays things out, and [`AclRule::matches`] is a plain reference of what
//! `rte_acl_classify` decides, so the translation is tested without DPDK.
//!
//! `rte_acl` constraints (DPDK 22.11 `rte_acl.h` and its programmer's guide, "Packet
//! Classification and Access Control"): fields are 1, 2, 4 or 8 bytes; the first field is one
//! byte and has input index 0; the other fields are grouped by input index into words of 4
//! consecutive bytes (the classifier reads 4 bytes per input index, from the offset of the
//! group's first field); rule values are in host byte order, input buffers in network order.
//!
//! The layout: a 6-byte MAC is split into 4 + 2 bytes and a 16-byte IPv6 address into 4 x 4;
//! the last piece of every field is `RANGE`, the others `MASK`. A field range whose start and
//! end differ only in the last piece is one rule alternative (upper pieces exact); otherwise
//! the upper pieces are expanded into prefixes (wasp-sets' `expand`), with the last piece from
//! the start, full, or up to the end. An element is the cross product of its fields'
//! alternatives (one alternative each for the selftest's cases). The leading byte is a
//! 1-byte field of the set when there is one (`inet_proto`), else a wildcard; 4-byte words
//! are filled up with wildcard pieces; 2-byte pieces share a word.

use wasp_sets::pipapo::expand::expand;

/// `RTE_ACL_FIELD_TYPE_MASK`: `value` with a prefix length in bits in `mask_range`.
pub const TYPE_MASK: u8 = 0;
/// `RTE_ACL_FIELD_TYPE_RANGE`: `value..=mask_range`.
pub const TYPE_RANGE: u8 = 1;

/// One `rte_acl_field_def`: type, size in bytes, input index, byte offset in the input buffer.
/// The field index is the definition's position in [`AclLayout::defs`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldDef {
    /// [`TYPE_MASK`] or [`TYPE_RANGE`].
    pub kind: u8,
    /// 1, 2 or 4 bytes.
    pub size: u8,
    /// Input index (0 for the leading byte, then one per 4-byte word).
    pub input: u8,
    /// Byte offset in an input buffer.
    pub offset: u32,
}

/// One `rte_acl_field` of a rule: host-order value and prefix length (MASK) or upper bound
/// (RANGE).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldVal {
    /// Value (MASK) or lower bound (RANGE), host order.
    pub value: u64,
    /// Prefix length in bits (MASK) or upper bound (RANGE).
    pub mask_range: u64,
}

/// One `rte_acl` rule: its fields in [`AclLayout::defs`] order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclRule {
    /// Element index + 1 (`rte_acl` reserves userdata 0 for "no match").
    pub userdata: u32,
    /// Priority, `1..=RTE_ACL_MAX_PRIORITY`; earlier elements get higher ones.
    pub priority: i32,
    /// Field values, one per definition.
    pub fields: Vec<FieldVal>,
}

/// Where a piece of the set's key goes: key byte offset, input buffer offset, size, and its
/// definition index.
#[derive(Debug, Clone, Copy)]
struct Piece {
    key_off: usize,
    buf_off: usize,
    size: usize,
    def: usize,
}

/// A definition before ordering: input index, offset, size, kind, and the key piece it holds
/// (field, piece index, key offset) or `None` for a wildcard.
type Slot = (u8, u32, u8, u8, Option<(usize, usize, usize)>);

/// The `rte_acl` layout of a set with the given field widths.
#[derive(Debug, Clone)]
pub struct AclLayout {
    /// Field definitions, in `rte_acl_config.defs` order (input index ascending, each group's
    /// first definition at the group's lowest offset).
    pub defs: Vec<FieldDef>,
    /// Bytes per input buffer (4 per input index, the leading byte's word included).
    pub stride: usize,
    /// Per set field: its pieces, most significant first.
    fields: Vec<Vec<Piece>>,
    key_len: usize,
}

fn piece_sizes(width: usize) -> Vec<usize> {
    let mut out = Vec::new();
    let mut rem = width;
    while rem > 0 {
        let s = if rem >= 4 {
            4
        } else if rem >= 2 {
            2
        } else {
            1
        };
        out.push(s);
        rem -= s;
    }
    out
}

fn be(bytes: &[u8]) -> u128 {
    bytes.iter().fold(0u128, |v, &b| (v << 8) | u128::from(b))
}

fn ones(bits: u32) -> u128 {
    if bits >= 128 {
        u128::MAX
    } else {
        (1u128 << bits) - 1
    }
}

impl AclLayout {
    /// The layout for fields of `field_lens` bytes each (concatenated in key order).
    pub fn new(field_lens: &[usize]) -> AclLayout {
        // (field, piece index, key offset, size)
        let mut pieces: Vec<(usize, usize, usize, usize)> = Vec::new();
        let mut off = 0;
        for (f, &w) in field_lens.iter().enumerate() {
            for (i, s) in piece_sizes(w).into_iter().enumerate() {
                pieces.push((f, i, off, s));
                off += s;
            }
        }
        let key_len = off;
        let mut fields: Vec<Vec<Piece>> = field_lens
            .iter()
            .map(|&w| Vec::with_capacity(piece_sizes(w).len()))
            .collect();
        // (input, offset, size, kind, piece) before sorting into defs order.
        let mut slots: Vec<Slot> = Vec::new();
        let kind_of = |f: usize, i: usize| {
            if i + 1 == piece_sizes(field_lens[f]).len() {
                TYPE_RANGE
            } else {
                TYPE_MASK
            }
        };
        // Leading byte: the first 1-byte piece, else a wildcard.
        let lead = pieces.iter().position(|p| p.3 == 1);
        match lead {
            Some(j) => {
                let (f, i, k, _) = pieces[j];
                slots.push((0, 0, 1, kind_of(f, i), Some((f, i, k))));
            }
            None => slots.push((0, 0, 1, TYPE_MASK, None)),
        }
        // The rest into 4-byte words, first fit by decreasing size.
        let mut rest: Vec<_> = pieces
            .iter()
            .enumerate()
            .filter(|(j, _)| Some(*j) != lead)
            .map(|(_, p)| *p)
            .collect();
        rest.sort_by_key(|p| std::cmp::Reverse(p.3));
        let mut words: Vec<Vec<(usize, usize, usize, usize)>> = Vec::new();
        for p in rest {
            match words
                .iter_mut()
                .find(|w| w.iter().map(|q| q.3).sum::<usize>() + p.3 <= 4)
            {
                Some(w) => w.push(p),
                None => words.push(vec![p]),
            }
        }
        for (g, w) in words.iter().enumerate() {
            let input = (g + 1) as u8;
            let mut at = 4 * (g + 1);
            for &(f, i, k, s) in w {
                slots.push((input, at as u32, s as u8, kind_of(f, i), Some((f, i, k))));
                at += s;
            }
            let mut left = 4 * (g + 2) - at;
            while left > 0 {
                let s = if left >= 2 { 2 } else { 1 };
                slots.push((input, at as u32, s as u8, TYPE_MASK, None));
                at += s;
                left -= s;
            }
        }
        slots.sort_by_key(|s| (s.0, s.1));
        let mut defs = Vec::with_capacity(slots.len());
        let mut placed: Vec<(usize, usize, Piece)> = Vec::new();
        for (d, &(input, offset, size, kind, piece)) in slots.iter().enumerate() {
            defs.push(FieldDef {
                kind,
                size,
                input,
                offset,
            });
            if let Some((f, i, k)) = piece {
                placed.push((
                    f,
                    i,
                    Piece {
                        key_off: k,
                        buf_off: offset as usize,
                        size: size as usize,
                        def: d,
                    },
                ));
            }
        }
        placed.sort_by_key(|p| (p.0, p.1));
        for (f, _, p) in placed {
            fields[f].push(p);
        }
        AclLayout {
            defs,
            stride: 4 * (words.len() + 1),
            fields,
            key_len,
        }
    }

    /// Writes `key` (the set's key, fields back to back, network order) into an input buffer
    /// of [`AclLayout::stride`] bytes; wildcard bytes are zero.
    pub fn input(&self, key: &[u8], out: &mut [u8]) {
        out[..self.stride].fill(0);
        for p in self.fields.iter().flatten() {
            out[p.buf_off..p.buf_off + p.size].copy_from_slice(&key[p.key_off..p.key_off + p.size]);
        }
    }

    /// Input buffers for keys packed back to back, [`AclLayout::stride`] bytes each.
    pub fn inputs(&self, keys: &[u8]) -> Vec<u8> {
        let n = keys.len() / self.key_len;
        let mut out = vec![0u8; n * self.stride];
        for (k, o) in keys
            .chunks_exact(self.key_len)
            .zip(out.chunks_exact_mut(self.stride))
        {
            self.input(k, o);
        }
        out
    }

    /// One field's alternatives for `start..=end` (key bytes of that field): per alternative,
    /// one value per piece.
    fn alternatives(&self, f: usize, start: &[u8], end: &[u8]) -> Vec<Vec<FieldVal>> {
        let pieces = &self.fields[f];
        let width = (start.len() * 8) as u32;
        let last_bits = (pieces[pieces.len() - 1].size * 8) as u32;
        let upper_bits = width - last_bits;
        let (s, e) = (be(start), be(end));
        let lo = |x: u128| (x & ones(last_bits)) as u64;
        let hi = |x: u128| if upper_bits == 0 { 0 } else { x >> last_bits };
        // One alternative: the upper pieces from a prefix of the upper bits, last as a range.
        let alt = |value: u128, plen: u32, first: u64, last: u64| {
            let mut v = Vec::with_capacity(pieces.len());
            let mut bit = 0u32;
            for p in &pieces[..pieces.len() - 1] {
                let b = (p.size * 8) as u32;
                let shift = upper_bits - bit - b;
                v.push(FieldVal {
                    value: ((value >> shift) & ones(b)) as u64,
                    mask_range: u64::from(plen.saturating_sub(bit).min(b)),
                });
                bit += b;
            }
            v.push(FieldVal {
                value: first,
                mask_range: last,
            });
            v
        };
        let max_lo = ones(last_bits) as u64;
        if hi(s) == hi(e) {
            return vec![alt(hi(s), upper_bits, lo(s), lo(e))];
        }
        let mut out = vec![alt(hi(s), upper_bits, lo(s), max_lo)];
        if hi(e) - hi(s) > 1 {
            for p in expand(hi(s) + 1, hi(e) - 1, upper_bits) {
                out.push(alt(p.value, p.mask_len, 0, max_lo));
            }
        }
        out.push(alt(hi(e), upper_bits, 0, lo(e)));
        out
    }

    /// The rules of elements `(start key, end key)`, element `i` with userdata `i + 1` and
    /// priority `elements.len() - i` (the oldest wins, as pipapo returns the oldest match).
    pub fn rules(&self, elements: &[(Vec<u8>, Vec<u8>)]) -> Vec<AclRule> {
        let mut out = Vec::new();
        let wild: Vec<FieldVal> = self
            .defs
            .iter()
            .map(|d| FieldVal {
                value: 0,
                mask_range: if d.kind == TYPE_RANGE {
                    (1u64 << (8 * d.size)) - 1
                } else {
                    0
                },
            })
            .collect();
        for (i, (s, e)) in elements.iter().enumerate() {
            let mut combos: Vec<Vec<FieldVal>> = vec![wild.clone()];
            let mut off = 0;
            for (f, pieces) in self.fields.iter().enumerate() {
                let w: usize = pieces.iter().map(|p| p.size).sum();
                let alts = self.alternatives(f, &s[off..off + w], &e[off..off + w]);
                off += w;
                let mut next = Vec::with_capacity(combos.len() * alts.len());
                for c in &combos {
                    for a in &alts {
                        let mut r = c.clone();
                        for (p, v) in pieces.iter().zip(a) {
                            r[p.def] = *v;
                        }
                        next.push(r);
                    }
                }
                combos = next;
            }
            for fields in combos {
                out.push(AclRule {
                    userdata: i as u32 + 1,
                    priority: (elements.len() - i) as i32,
                    fields,
                });
            }
        }
        out
    }
}

impl AclRule {
    /// `true` when the input buffer `buf` matches every field (MASK: the value's leading
    /// `mask_range` bits; RANGE: `value..=mask_range`), as `rte_acl_classify` decides.
    pub fn matches(&self, defs: &[FieldDef], buf: &[u8]) -> bool {
        defs.iter().zip(&self.fields).all(|(d, v)| {
            let at = d.offset as usize;
            let x = be(&buf[at..at + d.size as usize]) as u64;
            let bits = u32::from(d.size) * 8;
            if d.kind == TYPE_RANGE {
                v.value <= x && x <= v.mask_range
            } else {
                let m = (ones(v.mask_range as u32) << (bits - v.mask_range as u32)) as u64
                    & ones(bits) as u64;
                x & m == v.value & m
            }
        })
    }

    /// The userdata of the highest-priority rule matching `buf`, 0 for none.
    pub fn classify(rules: &[AclRule], defs: &[FieldDef], buf: &[u8]) -> u32 {
        rules
            .iter()
            .filter(|r| r.matches(defs, buf))
            .max_by_key(|r| r.priority)
            .map_or(0, |r| r.userdata)
    }
}

/// Elements as (start key, end key).
pub type Elements = Vec<(Vec<u8>, Vec<u8>)>;

/// A pipapo set (no data, no timeouts) of `els`, fields of `lens` bytes, group widths chosen
/// by `policy`.
///
/// # Panics
/// When the set refuses an element: the benchmarks' shapes are all ones the kernel takes.
pub fn pipapo_of(
    lens: &[usize],
    els: &[(Vec<u8>, Vec<u8>)],
    policy: wasp_sets::pipapo::GroupPolicy,
) -> wasp_sets::Pipapo {
    let mut p = wasp_sets::Pipapo::with_policy(lens, policy).expect("valid field widths");
    for (s, e) in els {
        let elem = wasp_sets::NewElem {
            start: s,
            end: Some(e),
            data: 0,
            expires: None,
            ext: (),
        };
        p.insert(elem, wasp_sets::InsertMode::Create, 0)
            .expect("elements the kernel takes");
    }
    p
}

/// An adversarial set for the field index next to the selftest's: the cross product of
/// `n` address ranges and `n` port ranges (`ipv4_addr . inet_service`, element `a * n + b`:
/// `10.0.a.0 - 10.0.a.200 . 1000b+1 - 1000b+500`). Every range of either field is shared by
/// `n` elements, so no field narrows a key down to a few candidates. As (start, end) keys.
pub fn cross_product(n: u32) -> Elements {
    let mut out = Vec::new();
    for a in 0..n {
        for b in 0..n {
            let net = 0x0a00_0000 + (a << 8);
            let port = (b * 1000 + 1) as u16;
            let s = [&net.to_be_bytes()[..], &port.to_be_bytes()].concat();
            let e = [&(net + 200).to_be_bytes()[..], &(port + 499).to_be_bytes()].concat();
            out.push((s, e));
        }
    }
    out
}

/// An access list's cross product (`inet_proto . inet_service . ipv4_addr`, fields 1, 2 and
/// 4 bytes): each of `protos` protocols (6, 17, 132, 33, 1, ...) with each of `n` port ranges
/// (`1000b+1 - 1000b+500`) and each of `n` networks (`10.0.a.0/24`). Every value of any field
/// is shared by many elements. As (start, end) keys, protocol outermost.
pub fn proto_port_net(protos: usize, n: u32) -> Elements {
    const PROTOS: [u8; 8] = [6, 17, 132, 33, 1, 58, 47, 50];
    let mut out = Vec::new();
    for &proto in PROTOS.iter().take(protos) {
        for b in 0..n {
            for a in 0..n {
                let port = (b * 1000 + 1) as u16;
                let net = 0x0a00_0000 + (a << 8);
                let s = [&[proto][..], &port.to_be_bytes(), &net.to_be_bytes()].concat();
                let e = [
                    &[proto][..],
                    &(port + 499).to_be_bytes(),
                    &(net + 255).to_be_bytes(),
                ]
                .concat();
                out.push((s, e));
            }
        }
    }
    out
}

/// Nested networks crossed with port ranges (`ipv4_addr . inet_service`), the shape of a
/// firewall whose specific rules come before broader ones: `outer` networks `10.b.0.0/16`
/// (b = 1..=outer), each holding `inner` networks `10.b.c.0/24` (c = 1..=inner), every /24
/// with each of `ports` port ranges (`1000p+1 - 1000p+500`), then every /16 with any port,
/// then `10.0.0.0/8` with any port. Inner elements come first (insertion order: older wins)
/// and no outer element has a corner inside an inner one, so the kernel's pipapo takes them
/// all; a key in a /24 and a port range is contained in three elements.
pub fn nested_prefixes(outer: u32, inner: u32, ports: u32) -> Elements {
    let el = |net: u32, last: u32, p0: u16, p1: u16| {
        (
            [&net.to_be_bytes()[..], &p0.to_be_bytes()].concat(),
            [&last.to_be_bytes()[..], &p1.to_be_bytes()].concat(),
        )
    };
    let mut out = Vec::new();
    for b in 1..=outer {
        for c in 1..=inner {
            let net = 0x0a00_0000 | b << 16 | c << 8;
            for p in 0..ports {
                let port = (p * 1000 + 1) as u16;
                out.push(el(net, net + 255, port, port + 499));
            }
        }
    }
    for b in 1..=outer {
        let net = 0x0a00_0000 | b << 16;
        out.push(el(net, net + 0xffff, 0, u16::MAX));
    }
    out.push(el(0x0a00_0000, 0x0aff_ffff, 0, u16::MAX));
    out
}

/// `n` probe keys spread over `els` (each an element's start or end key, xorshift order as
/// `wasp_sets::perfcases::Case::probes`), packed back to back.
pub fn spread_probes(els: &[(Vec<u8>, Vec<u8>)], n: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let (s, e) = &els[(x % els.len() as u64) as usize];
        out.extend_from_slice(if x & 1 == 0 { s } else { e });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasp_sets::perfcases::CASES;
    use wasp_sets::pipapo::GroupPolicy;

    #[test]
    fn layout_of_net6_port_mac_proto() {
        let l = AclLayout::new(&[16, 2, 6, 1]);
        // proto leads; net6 in four words; mac's upper 4 bytes; port and mac's last 2 bytes.
        let d: Vec<(u8, u8, u8, u32)> = l
            .defs
            .iter()
            .map(|d| (d.kind, d.size, d.input, d.offset))
            .collect();
        assert_eq!(
            d,
            vec![
                (TYPE_RANGE, 1, 0, 0),
                (TYPE_MASK, 4, 1, 4),
                (TYPE_MASK, 4, 2, 8),
                (TYPE_MASK, 4, 3, 12),
                (TYPE_RANGE, 4, 4, 16),
                (TYPE_MASK, 4, 5, 20),
                (TYPE_RANGE, 2, 6, 24),
                (TYPE_RANGE, 2, 6, 26),
            ]
        );
        assert_eq!(l.stride, 28);
        // net,port: wildcard lead, net, port plus a 2-byte wildcard filler.
        let l = AclLayout::new(&[4, 2]);
        assert_eq!(l.defs.len(), 4);
        assert_eq!(l.stride, 12);
        let mut buf = [0xffu8; 12];
        l.input(&[10, 0, 0, 6, 0, 2], &mut buf);
        assert_eq!(buf, [0, 0, 0, 0, 10, 0, 0, 6, 0, 2, 0, 0]);
    }

    /// The adversarial shapes load into pipapo as they are (the kernel's overlap rules) and
    /// `rte_acl`'s rules for them pick pipapo's element on spread keys and one-bit neighbours.
    #[test]
    fn adversarial_shapes_load_and_rules_agree() {
        let shapes: [(&[usize], Elements, usize); 3] = [
            (&[4, 2], cross_product(8), 64),
            (&[1, 2, 4], proto_port_net(3, 4), 48),
            (&[4, 2], nested_prefixes(3, 4, 4), 48 + 3 + 1),
        ];
        for (lens, els, n) in shapes {
            assert_eq!(els.len(), n);
            let p = pipapo_of(lens, &els, Default::default());
            let l = AclLayout::new(lens);
            let rules = l.rules(&els);
            let kl = p.key_len();
            let mut keys = spread_probes(&els, 400);
            let flipped: Vec<u8> = keys
                .chunks(kl)
                .enumerate()
                .flat_map(|(i, k)| {
                    let mut k = k.to_vec();
                    k[i % kl] ^= 1 << (i % 8);
                    k
                })
                .collect();
            keys.extend(flipped);
            let mut buf = vec![0u8; l.stride];
            let mut hits = 0;
            for k in keys.chunks(kl) {
                l.input(k, &mut buf);
                let want = p
                    .lookup(k, 0)
                    .map(|h| els.iter().position(|e| *e.0 == *p.elem(h).unwrap().start));
                hits += usize::from(want.is_some());
                let got = AclRule::classify(&rules, &l.defs, &buf);
                assert_eq!(
                    want.map_or(0, |i| i.unwrap() as u32 + 1),
                    got,
                    "{lens:?} {k:?}"
                );
            }
            assert!(hits > 400, "{lens:?}: {hits} hits");
        }
    }

    #[test]
    fn rules_agree_with_pipapo_on_the_selftest_cases() {
        for c in CASES {
            if c.entries > 1000 {
                continue; // port,proto: 30001 rules, too slow for the linear reference
            }
            let p = c.build(GroupPolicy::Auto);
            let els = c.elements();
            let l = AclLayout::new(&c.field_lens());
            let rules = l.rules(&els);
            assert_eq!(rules.len(), els.len(), "{}: one rule per element", c.name);
            let kl = p.key_len();
            let mut keys = c.probes(100);
            // Also every key with one bit flipped (mostly misses).
            let flipped: Vec<u8> = keys
                .chunks(kl)
                .enumerate()
                .flat_map(|(i, k)| {
                    let mut k = k.to_vec();
                    k[i % kl] ^= 1 << (i % 8);
                    k
                })
                .collect();
            keys.extend(flipped);
            let mut buf = vec![0u8; l.stride];
            for k in keys.chunks(kl) {
                l.input(k, &mut buf);
                let want = p
                    .lookup(k, 0)
                    .map(|h| els.iter().position(|e| *e.0 == *p.elem(h).unwrap().start));
                let got = AclRule::classify(&rules, &l.defs, &buf);
                assert_eq!(
                    want.map(|i| i.unwrap() as u32 + 1).unwrap_or(0),
                    got,
                    "{} {k:?}",
                    c.name
                );
            }
        }
    }

    #[test]
    fn a_range_across_words_is_expanded() {
        // One 6-byte field (MAC): 00:00:00:00:ff:f0 - 00:00:00:02:00:10 crosses the 4 + 2
        // split; every probe around the edges matches exactly when inside.
        let l = AclLayout::new(&[6]);
        let s = [0, 0, 0, 0, 0xff, 0xf0];
        let e = [0, 0, 0, 2, 0, 0x10];
        let rules = l.rules(&[(s.to_vec(), e.to_vec())]);
        assert_eq!(rules.len(), 3); // start word to its end, word 1 whole, word 2 to the end
        let mut buf = vec![0u8; l.stride];
        let (sv, ev) = (be(&s), be(&e));
        for x in [
            sv - 1,
            sv,
            sv + 1,
            0xffff,
            0x1_0000,
            0x1_ffff,
            0x2_0000,
            ev,
            ev + 1,
            0x3_0000,
        ] {
            let k = &x.to_be_bytes()[10..];
            l.input(k, &mut buf);
            let inside = sv <= x && x <= ev;
            assert_eq!(
                AclRule::classify(&rules, &l.defs, &buf) == 1,
                inside,
                "{x:#x}"
            );
        }
        // An IPv6 range over three upper words: prefixes of the middle part.
        let l = AclLayout::new(&[16]);
        let mut s = [0u8; 16];
        let mut e = [0u8; 16];
        s[3] = 1;
        s[15] = 5;
        e[3] = 9;
        e[15] = 7;
        let rules = l.rules(&[(s.to_vec(), e.to_vec())]);
        let (sv, ev) = (be(&s), be(&e));
        let mut buf = vec![0u8; l.stride];
        for x in [sv - 1, sv, sv + (1 << 32), ev - 1, ev, ev + 1, 1u128 << 96] {
            l.input(&x.to_be_bytes(), &mut buf);
            let inside = sv <= x && x <= ev;
            assert_eq!(
                AclRule::classify(&rules, &l.defs, &buf) == 1,
                inside,
                "{x:#x}"
            );
        }
    }
}
