//! The Geneve plugin: match Geneve options (RFC 8926) on received Geneve packets, write
//! options into an existing Geneve header, and encapsulate/decapsulate ([`tunnel`]:
//! `geneve encap ...`, `geneve decap`, with the VLAN-range to VNI-range mapping of cases C30).
//!
//! # Match (`geneve ...` used as an expression)
//!
//! Clauses, all of which must hold (AND):
//! - `present`: the packet has at least one option.
//! - `vni N`: the VNI is N (0..=0xffffff).
//! - `opt [class C] [type T] [critical] [data D [mask M]]`: some option has class C
//!   (0..=0xffff), type T (0..=0xff), the critical bit (0x80 of the type) set, and data D.
//!   Data and mask are hex bytes (`0x00880022`), a multiple of 4 bytes, 4..=124 (the 5-bit
//!   length field counts 4-byte words: 128 bytes would wrap to 0, cases C27); the option's data
//!   must be as long as D and equal to it under the mask (all ones without one). Several `opt`
//!   clauses may each be met by a different option.
//!
//! A packet is Geneve when its transport header is UDP to port 6081 (IPv4 or IPv6 underlay;
//! `l4` from the host, so a non-first fragment never matches). Options are walked up to the
//! end of the option block (`opt_len`); an option whose stated length runs past the block, or
//! past the captured window, ends the walk (options before it still count).
//!
//! # Statement (`geneve set opt ...`, `geneve add opt ...`)
//!
//! `add opt class C type T data D [opt ...]` appends the options, packed back to back (each a
//! 4-byte header and its data, cases C26), at the end of the option block.
//! `set opt class C type T data D [opt ...]` overwrites the data of the first option with that
//! class and type when its length is the same, and otherwise removes it (if present) and
//! appends the new one. Data is required (an option with no data is refused, as tc's
//! `geneve_opts` parser does: C26 vector f44d). The edits update the Geneve `opt_len`, the UDP
//! length and checksum (incrementally, RFC 1624; a zero IPv4 UDP checksum stays zero), and the
//! IPv4 total length and header checksum or the IPv6 payload length. A packet that is not
//! Geneve, whose headers are not all in the window, or whose option block would pass 252 bytes
//! (opt_len is 6 bits) is left alone. Every packet continues.

#![cfg_attr(target_arch = "wasm32", no_std)]

extern crate alloc;

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use wasp_plugin_sdk::hdr::{self, Geneve, GeneveOpt, Udp};
use wasp_plugin_sdk::{
    Edit, Info, Kind, NFPROTO_IPV4, NFPROTO_IPV6, Packets, Pkt, Plugin, Sites, StateEntry, Verdict,
    args,
};

/// Bytes of each frame the plugin sees: Ethernet (14) + IPv6 (40) + UDP (8) + Geneve (8) + the
/// largest option block (252), rounded up.
pub const WINDOW: u32 = 336;

/// Bytes of each frame a match sees first (WIT `fast-match`): the headers up to Geneve's
/// (Ethernet 14 + IPv6 40 + UDP 8 + Geneve 8 = 70) and 58 bytes of options, enough for the
/// common option sets (three options of 8 data bytes take 36). A packet whose option block
/// runs past them is matched again with [`WINDOW`]: a 1500-byte packet costs 128 bytes of
/// copying instead of 336 (perf/RESULTS.md, "Plugins").
pub const FIRST_WINDOW: u32 = 128;

/// Largest option data: 31 words (the 5-bit length field).
pub const MAX_OPT_DATA: usize = 124;

/// Largest option block: 63 words (the 6-bit opt_len field).
pub const MAX_OPT_BLOCK: usize = 252;

/// One `opt` clause of a match.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OptMatch {
    /// Option class.
    pub class: Option<u16>,
    /// Option type.
    pub typ: Option<u8>,
    /// The type's critical bit must be set.
    pub critical: bool,
    /// Data and mask (same length).
    pub data: Option<(Vec<u8>, Vec<u8>)>,
}

impl OptMatch {
    #[inline]
    fn matches(&self, o: &GeneveOpt<'_>) -> bool {
        self.class.is_none_or(|c| c == o.class)
            && self.typ.is_none_or(|t| t == o.typ)
            && (!self.critical || o.critical())
            && self.data.as_ref().is_none_or(|(d, m)| {
                o.data.len() == d.len()
                    && o.data
                        .iter()
                        .zip(d)
                        .zip(m)
                        .all(|((x, y), m)| x & m == y & m)
            })
    }
}

/// A match site.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Match {
    /// `present`.
    pub present: bool,
    /// `vni N`.
    pub vni: Option<u32>,
    /// `opt ...` clauses.
    pub opts: Vec<OptMatch>,
}

/// An option to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewOpt {
    /// Option class.
    pub class: u16,
    /// Option type.
    pub typ: u8,
    /// Data, a multiple of 4 bytes, 4..=124.
    pub data: Vec<u8>,
}

impl NewOpt {
    /// The option on the wire: class, type, length in words, data.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.class.to_be_bytes());
        out.push(self.typ);
        out.push((self.data.len() / 4) as u8);
        out.extend_from_slice(&self.data);
    }
}

/// A statement site.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Write {
    /// `set` (replace an option of the same class and type) or `add` (append).
    pub replace: bool,
    /// The options, in order.
    pub opts: Vec<NewOpt>,
}

/// What a use site does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Site {
    /// A match.
    Match(Match),
    /// A statement that writes options.
    Write(Write),
    /// `encap ...`.
    Encap(tunnel::Encap),
    /// `decap`, with what it did so far.
    Decap(DecapCounts),
}

/// What one `decap` use site did: listed as its state (`decapsulated N malformed M`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct DecapCounts {
    /// Packets decapsulated.
    pub decapsulated: u64,
    /// Packets left as they were because the inner header the Geneve header names does not
    /// fit ([`tunnel::Decap::Malformed`]).
    pub malformed: u64,
}

/// The plugin.
#[derive(Debug, Default)]
pub struct GenevePlugin {
    sites: Sites<Site>,
    /// The match sites' [`Compiled`] form, what the packet path runs.
    compiled: Sites<Compiled>,
}

fn value<'a>(
    it: &mut core::iter::Peekable<core::slice::Iter<'a, String>>,
    key: &str,
) -> Result<&'a str, String> {
    it.next()
        .map(String::as_str)
        .ok_or_else(|| format!("geneve: {key} needs a value"))
}

fn data_arg(key: &str, tok: &str) -> Result<Vec<u8>, String> {
    let d = args::parse_hex_bytes(tok).map_err(|e| format!("geneve: {key} {e}"))?;
    if d.len() % 4 != 0 {
        return Err(format!(
            "geneve: {key} {tok} is {} bytes, not a multiple of 4",
            d.len()
        ));
    }
    if d.len() > MAX_OPT_DATA {
        return Err(format!(
            "geneve: {key} {tok} is {} bytes, more than {MAX_OPT_DATA}",
            d.len()
        ));
    }
    Ok(d)
}

/// Parses one `opt` clause's keys (after `opt`).
pub(crate) fn parse_opt(
    it: &mut core::iter::Peekable<core::slice::Iter<'_, String>>,
) -> Result<OptMatch, String> {
    let mut m = OptMatch::default();
    let mut data = None;
    let mut mask = None;
    let mut any = false;
    while let Some(key) = it.peek().map(|s| s.as_str()) {
        match key {
            "class" | "type" | "data" | "mask" => {
                it.next();
                let v = value(it, key)?;
                match key {
                    "class" => {
                        m.class = Some(
                            args::parse_uint(v, 0xffff).map_err(|e| format!("geneve: class {e}"))?
                                as u16,
                        )
                    }
                    "type" => {
                        m.typ = Some(
                            args::parse_uint(v, 0xff).map_err(|e| format!("geneve: type {e}"))?
                                as u8,
                        )
                    }
                    "data" => data = Some(data_arg("data", v)?),
                    _ => mask = Some(data_arg("mask", v)?),
                }
            }
            "critical" => {
                it.next();
                m.critical = true;
            }
            _ => break,
        }
        any = true;
    }
    if !any {
        return Err("geneve: opt needs class, type, critical or data".to_string());
    }
    match (data, mask) {
        (Some(d), Some(k)) => {
            if d.len() != k.len() {
                return Err(format!(
                    "geneve: mask is {} bytes and data {}: they must be as long",
                    k.len(),
                    d.len()
                ));
            }
            m.data = Some((d, k));
        }
        (Some(d), None) => {
            let k = alloc::vec![0xff; d.len()];
            m.data = Some((d, k));
        }
        (None, Some(_)) => return Err("geneve: mask without data".to_string()),
        (None, None) => {}
    }
    if let (Some(t), true) = (m.typ, m.critical)
        && t & 0x80 == 0
    {
        return Err(format!(
            "geneve: type {t:#04x} has no critical bit (0x80), so critical never holds"
        ));
    }
    Ok(m)
}

/// Parses a use site's arguments.
pub fn parse(kind: Kind, args: &[String]) -> Result<Site, String> {
    let mut it = args.iter().peekable();
    match it.peek().map(|s| s.as_str()) {
        Some(verb @ ("encap" | "decap")) => {
            if kind == Kind::MatchExpr {
                return Err(format!("geneve: {verb} is a statement, not a match"));
            }
            if verb == "decap" {
                return match args.get(1) {
                    None => Ok(Site::Decap(DecapCounts::default())),
                    Some(t) => Err(format!("geneve: decap takes no arguments (got {t:?})")),
                };
            }
            Ok(Site::Encap(tunnel::parse_encap(&args[1..])?))
        }
        Some(verb @ ("set" | "add")) => {
            if kind == Kind::MatchExpr {
                return Err(format!("geneve: {verb} is a statement, not a match"));
            }
            it.next();
            let mut opts = Vec::new();
            while let Some(tok) = it.next() {
                if tok != "opt" {
                    return Err(format!("geneve: unexpected {tok:?} (expected opt)"));
                }
                let o = parse_opt(&mut it)?;
                let (Some(class), Some(typ)) = (o.class, o.typ) else {
                    return Err(format!("geneve: {verb} opt needs class and type"));
                };
                let Some((data, mask)) = o.data else {
                    return Err(format!(
                        "geneve: {verb} opt needs data (an option without data is refused)"
                    ));
                };
                if mask.iter().any(|&b| b != 0xff) {
                    return Err(format!("geneve: {verb} opt takes no mask"));
                }
                opts.push(NewOpt { class, typ, data });
            }
            if opts.is_empty() {
                return Err(format!("geneve: {verb} needs at least one opt"));
            }
            let total: usize = opts.iter().map(|o| 4 + o.data.len()).sum();
            if total > MAX_OPT_BLOCK {
                return Err(format!(
                    "geneve: the options take {total} bytes, more than {MAX_OPT_BLOCK}"
                ));
            }
            Ok(Site::Write(Write {
                replace: verb == "set",
                opts,
            }))
        }
        _ => {
            if kind != Kind::MatchExpr {
                return Err(
                    "geneve: as a statement, use set opt, add opt, encap or decap".to_string(),
                );
            }
            let mut m = Match::default();
            while let Some(tok) = it.next() {
                match tok.as_str() {
                    "present" => m.present = true,
                    "vni" => {
                        let v = value(&mut it, "vni")?;
                        m.vni = Some(
                            args::parse_uint(v, 0xff_ffff)
                                .map_err(|e| format!("geneve: vni {e}"))?
                                as u32,
                        );
                    }
                    "opt" => m.opts.push(parse_opt(&mut it)?),
                    other => {
                        return Err(format!(
                            "geneve: unexpected {other:?} (expected present, vni or opt)"
                        ));
                    }
                }
            }
            if m == Match::default() {
                return Err("geneve: nothing to match (present, vni N, opt ...)".to_string());
            }
            Ok(Site::Match(m))
        }
    }
}

/// The Geneve header of `p`, with the UDP header, when it is a Geneve packet.
#[inline]
pub(crate) fn geneve_of<'a>(p: &Pkt<'a>) -> Option<(Udp, Geneve<'a>)> {
    hdr::geneve_in_udp(p.l4proto, p.l4()?)
}

/// Evaluates a match on one packet.
#[inline]
pub fn eval_match(m: &Match, p: &Pkt<'_>) -> bool {
    let Some((_, g)) = geneve_of(p) else {
        return false;
    };
    if m.vni.is_some_and(|v| v != g.vni) {
        return false;
    }
    if m.present && g.opts().next().is_none() {
        return false;
    }
    m.opts.iter().all(|om| g.opts().any(|o| om.matches(&o)))
}

/// Whether match `m` on packet `p` needs bytes past `p.bytes` (a packet cut to
/// [`FIRST_WINDOW`]): the frame has more, it is UDP, and the UDP and Geneve headers, or (for a
/// match on options) the option block, are not all in the bytes. A packet that is not UDP to
/// port 6081 never does: its answer is false whatever follows.
#[inline]
pub fn needs_more(m: &Match, p: &Pkt<'_>) -> bool {
    let have = p.bytes.len();
    if have >= p.len as usize || p.l4proto != 17 || p.l4 == 0xffff {
        return false;
    }
    let l4 = p.l4 as usize;
    let head = l4 + Udp::LEN + Geneve::LEN;
    if head > have {
        // The destination port decides, if it is here.
        return hdr::be16(p.bytes, l4 + 2).is_none_or(|d| d == hdr::GENEVE_PORT);
    }
    if hdr::be16(p.bytes, l4 + 2) != Some(hdr::GENEVE_PORT) || (m.opts.is_empty() && !m.present) {
        return false;
    }
    head + (p.bytes[l4 + Udp::LEN] & 0x3f) as usize * 4 > have
}

/// The edits that write `w`'s options into packet `index`, or none when it cannot be done.
pub fn eval_write(w: &Write, index: u32, p: &Pkt<'_>, edits: &mut Vec<Edit>) {
    let Some((udp, g)) = geneve_of(p) else { return };
    if !g.complete {
        return;
    }
    let l3 = p.l3 as usize;
    let l4 = p.l4 as usize;
    let block_start = l4 + Udp::LEN + Geneve::LEN;
    let block_end = block_start + g.options.len();
    // The option walk must reach the block's end cleanly for the offsets to be right.
    let existing: Vec<GeneveOpt<'_>> = g.opts().collect();
    let mut walk = g.opts();
    walk.by_ref().for_each(drop);
    if walk.malformed() {
        return;
    }

    // Plan: per new option, overwrite in place, or remove the old one and append.
    let mut sets: Vec<(usize, Vec<u8>)> = Vec::new(); // (frame offset, new bytes) in place
    let mut removes: Vec<(usize, usize)> = Vec::new(); // (frame offset, length)
    let mut append = Vec::new();
    for o in &w.opts {
        let old = if w.replace {
            existing.iter().find(|e| {
                e.class == o.class
                    && e.typ == o.typ
                    && !removes.iter().any(|r| r.0 == block_start + e.offset)
            })
        } else {
            None
        };
        match old {
            Some(e) if e.data.len() == o.data.len() => {
                sets.push((block_start + e.offset + 4, o.data.clone()))
            }
            Some(e) => {
                removes.push((block_start + e.offset, 4 + e.data.len()));
                o.encode(&mut append);
            }
            None => o.encode(&mut append),
        }
    }
    let removed: usize = removes.iter().map(|r| r.1).sum();
    let new_block = g.options.len() - removed + append.len();
    if new_block > MAX_OPT_BLOCK {
        return;
    }
    let delta = append.len() as i64 - removed as i64;

    // Header fields (all before the option block, so their offsets stay put).
    let mut udp_csum = udp.csum;
    let mut header_sets: Vec<(usize, Vec<u8>)> = Vec::new();
    let new_udp_len = (udp.len as i64 + delta) as u16;
    match p.nfproto {
        NFPROTO_IPV4 => {
            let Some(ip) = p.bytes.get(l3..l3 + 20) else {
                return;
            };
            let ihl = (ip[0] & 0x0f) as usize * 4;
            let Some(iph) = p.bytes.get(l3..l3 + ihl) else {
                return;
            };
            let mut iph = iph.to_vec();
            let total = u16::from_be_bytes([iph[2], iph[3]]) as i64 + delta;
            iph[2..4].copy_from_slice(&(total as u16).to_be_bytes());
            let c = hdr::ipv4_checksum(&iph);
            iph[10..12].copy_from_slice(&c.to_be_bytes());
            header_sets.push((l3 + 2, iph[2..4].to_vec()));
            header_sets.push((l3 + 10, iph[10..12].to_vec()));
        }
        NFPROTO_IPV6 => {
            let Some(plen) = hdr::be16(p.bytes, l3 + 4) else {
                return;
            };
            header_sets.push((
                l3 + 4,
                ((plen as i64 + delta) as u16).to_be_bytes().to_vec(),
            ));
        }
        _ => return,
    }
    // UDP checksum: the length is in the pseudo-header and the UDP header (twice); then the
    // option words that leave and come.
    let csum_on = !(p.nfproto == NFPROTO_IPV4 && udp.csum == 0);
    if csum_on {
        let (o, n) = (udp.len.to_be_bytes(), new_udp_len.to_be_bytes());
        udp_csum = hdr::csum_update(
            udp_csum,
            &[o[0], o[1], o[0], o[1]],
            &[n[0], n[1], n[0], n[1]],
        );
        for (off, data) in &sets {
            udp_csum = hdr::csum_update(udp_csum, &p.bytes[*off..off + data.len()], data);
        }
        for (off, len) in &removes {
            udp_csum = hdr::csum_update(udp_csum, &p.bytes[*off..off + len], &[]);
        }
        udp_csum = hdr::csum_update(udp_csum, &[], &append);
        let (g0, g1) = (p.bytes[l4 + Udp::LEN], p.bytes[l4 + Udp::LEN + 1]);
        udp_csum = hdr::csum_update(
            udp_csum,
            &[g0, g1],
            &[(g0 & 0xc0) | (new_block / 4) as u8, g1],
        );
        if udp_csum == 0 {
            udp_csum = 0xffff;
        }
    }
    let mut gen0 = p.bytes[l4 + Udp::LEN];
    gen0 = (gen0 & 0xc0) | (new_block / 4) as u8;

    for (off, data) in header_sets {
        edits.push(Edit::set(index, off as u32, data));
    }
    edits.push(Edit::set(
        index,
        (l4 + 4) as u32,
        new_udp_len.to_be_bytes().to_vec(),
    ));
    if csum_on {
        edits.push(Edit::set(
            index,
            (l4 + 6) as u32,
            udp_csum.to_be_bytes().to_vec(),
        ));
    }
    edits.push(Edit::set(index, (l4 + Udp::LEN) as u32, alloc::vec![gen0]));
    for (off, data) in sets {
        edits.push(Edit::set(index, off as u32, data));
    }
    // The host applies edits one after the other, each offset in the frame as the edits before
    // left it (wit: "applied in order"). Removes go from the last to the first, so each
    // offset is still the original one; the append goes at the block's end after them.
    removes.sort_by_key(|r| core::cmp::Reverse(r.0));
    for (off, len) in &removes {
        edits.push(Edit::remove(index, *off as u32, *len as u32));
    }
    if !append.is_empty() {
        edits.push(Edit::insert(index, (block_end - removed) as u32, append));
    }
}

impl Plugin for GenevePlugin {
    fn describe(&self) -> Info {
        Info::new(
            "geneve",
            env!("CARGO_PKG_VERSION"),
            &[Kind::MatchExpr, Kind::Statement],
            WINDOW,
        )
    }

    fn configure(&mut self, site: u32, kind: Kind, args: &[String]) -> Result<(), String> {
        let s = parse(kind, args)?;
        match &s {
            Site::Match(m) => self.compiled.insert(site, Compiled::new(m)),
            _ => self.compiled.remove(site),
        };
        self.sites.insert(site, s);
        Ok(())
    }

    fn release(&mut self, site: u32) {
        self.sites.remove(site);
        self.compiled.remove(site);
    }

    fn list_state(&mut self, site: u32) -> Vec<StateEntry> {
        match self.sites.get(site) {
            Some(Site::Decap(c)) => alloc::vec![StateEntry::values(
                0,
                &[("decapsulated", c.decapsulated), ("malformed", c.malformed)],
            )],
            _ => Vec::new(),
        }
    }

    fn reset_state(&mut self, site: u32, _elem: u32) {
        if let Some(Site::Decap(c)) = self.sites.get_mut(site) {
            *c = DecapCounts::default();
        }
    }

    fn matches(&mut self, site: u32, pkts: Packets<'_>, out: &mut [bool]) {
        let (Some(Site::Match(m)), Some(c)) = (self.sites.get(site), self.compiled.get(site))
        else {
            return;
        };
        for (p, out) in pkts.iter().zip(out) {
            *out = c.eval(m, &p);
        }
    }

    fn first_window(&self) -> Option<u32> {
        Some(FIRST_WINDOW)
    }

    fn matches_first(&mut self, site: u32, pkts: Packets<'_>, out: &mut [bool], more: &mut [bool]) {
        let (Some(Site::Match(m)), Some(c)) = (self.sites.get(site), self.compiled.get(site))
        else {
            return;
        };
        for ((p, out), more) in pkts.iter().zip(out).zip(more) {
            let a = c.first(m, &p);
            *out = a == compiled::YES;
            *more = a == compiled::MORE;
        }
    }

    fn matches_first_bits(&mut self, site: u32, pkts: Packets<'_>) -> (u64, u64) {
        let (Some(Site::Match(m)), Some(c)) = (self.sites.get(site), self.compiled.get(site))
        else {
            return (0, 0);
        };
        match c.one_clause() {
            // The common match (`opt class C type T`), its dispatch out of the loop.
            Some((mask, value)) => bits(pkts, |p| compiled::first_one(mask, value, p)),
            None => bits(pkts, |p| c.first(m, p)),
        }
    }

    fn apply(
        &mut self,
        site: u32,
        pkts: Packets<'_>,
        _verdicts: &mut [Verdict],
        edits: &mut Vec<Edit>,
    ) {
        let Some(s) = self.sites.get_mut(site) else {
            return;
        };
        for (i, p) in pkts.iter().enumerate() {
            let i = i as u32;
            match s {
                Site::Write(w) => eval_write(w, i, &p, edits),
                Site::Encap(e) => tunnel::eval_encap(e, i, &p, edits),
                Site::Decap(c) => match tunnel::eval_decap(i, &p, edits) {
                    tunnel::Decap::Done => c.decapsulated += 1,
                    tunnel::Decap::Malformed => c.malformed += 1,
                    tunnel::Decap::NotGeneve | tunnel::Decap::Other => {}
                },
                Site::Match(_) => return,
            }
        }
    }
}

/// The answers of `first` for (at most 64 of) `pkts` as (hits, more) bitmasks.
#[inline(always)]
fn bits(pkts: Packets<'_>, first: impl Fn(&Pkt<'_>) -> u8) -> (u64, u64) {
    let (mut hits, mut more) = (0u64, 0u64);
    for (i, p) in pkts.iter().take(64).enumerate() {
        let a = u64::from(first(&p));
        hits |= (a & 1) << i;
        more |= (a >> 1) << i;
    }
    (hits, more)
}

wasp_plugin_sdk::export_plugin!(GenevePlugin);

pub mod compiled;
pub mod tunnel;

pub use compiled::Compiled;

#[cfg(test)]
mod tests;
