//! `geneve encap ...` and `geneve decap`: putting frames into Geneve over IPv4/UDP and taking
//! them out again.
//!
//! `encap` grammar (tokens; `A-B` may also come as the three tokens `A`, `-`, `B`):
//!
//! ```text
//! encap (vni N | vlan V[-V2] vni N[-N2] [vlan ... vni ...]...) src IPV4 dst IPV4
//!       [sport PORT] [smac MAC] [dmac MAC] [ttl N] [opt class C type T data D]...
//! ```
//!
//! With `vlan ... vni ...` ranges the VNI comes from the frame's first VLAN tag (802.1Q or
//! 802.1ad, still in the frame's bytes), VLAN `v` of range `V..=V2` mapping to `N + (v - V)`,
//! and that tag is removed from the inner frame, as a bridge port with VLAN-to-tunnel mapping
//! sends it (net/bridge/br_netlink_tunnel.c; cases C30). An untagged frame, or one whose VLAN
//! has no mapping, is left alone. Validation as the kernel's `br_process_vlan_tunnel_info`:
//! VLANs 1..=4094, a VLAN range and a VNI range of different sizes are refused, each VLAN maps
//! to one VNI and each VNI is used once; VNIs fit 24 bits.
//!
//! The outer headers: Ethernet (`dmac`, `smac`, default 02:00:00:00:00:01 and
//! 02:00:00:00:00:02), IPv4 (DF, `ttl` default 64, no options), UDP to 6081 from `sport` (by
//! default 49152 + a hash of the inner frame's first 64 bytes mod 16384, for ECMP entropy as
//! RFC 8926 section 3.3 asks) with a zero checksum (allowed over IPv4), Geneve with the options
//! (C set when one is critical) and protocol 0x6558 (Ethernet).
//!
//! `decap`: for a Geneve packet carrying Ethernet (0x6558), removes everything before the inner
//! frame; for one carrying IPv4 or IPv6 directly (0x0800, 0x86dd, as GCP sends), removes the
//! outer IP/UDP/Geneve headers and sets the EtherType. Other packets are left alone.

use crate::{MAX_OPT_BLOCK, NewOpt, Pkt, geneve_of};
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use wasp_plugin_sdk::hdr::{self, Geneve, Udp};
use wasp_plugin_sdk::{Edit, args};

/// One VLAN range mapped to a VNI range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VlanMap {
    /// First VLAN.
    pub vlan: u16,
    /// Last VLAN.
    pub vlan_end: u16,
    /// VNI of the first VLAN.
    pub vni: u32,
}

/// Where the VNI comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VniSource {
    /// One VNI for every frame.
    Fixed(u32),
    /// From the first VLAN tag.
    Vlan(Vec<VlanMap>),
}

/// An `encap` site.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Encap {
    /// The VNI.
    pub vni: VniSource,
    /// Outer IPv4 source.
    pub src: [u8; 4],
    /// Outer IPv4 destination.
    pub dst: [u8; 4],
    /// UDP source port; `None`: from a hash of the inner frame.
    pub sport: Option<u16>,
    /// Outer Ethernet source.
    pub smac: [u8; 6],
    /// Outer Ethernet destination.
    pub dmac: [u8; 6],
    /// Outer TTL.
    pub ttl: u8,
    /// Geneve options, in order.
    pub opts: Vec<NewOpt>,
}

fn ipv4(key: &str, tok: &str) -> Result<[u8; 4], String> {
    let mut out = [0u8; 4];
    let mut parts = tok.split('.');
    for b in &mut out {
        let p = parts
            .next()
            .ok_or_else(|| format!("geneve: {key} {tok:?} is not an IPv4 address"))?;
        *b = p
            .parse::<u8>()
            .ok()
            .filter(|_| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
            .ok_or_else(|| format!("geneve: {key} {tok:?} is not an IPv4 address"))?;
    }
    if parts.next().is_some() {
        return Err(format!("geneve: {key} {tok:?} is not an IPv4 address"));
    }
    Ok(out)
}

fn mac(key: &str, tok: &str) -> Result<[u8; 6], String> {
    let mut out = [0u8; 6];
    let parts: Vec<&str> = tok.split(':').collect();
    if parts.len() != 6 {
        return Err(format!("geneve: {key} {tok:?} is not a MAC address"));
    }
    for (b, p) in out.iter_mut().zip(parts) {
        if p.is_empty() || p.len() > 2 {
            return Err(format!("geneve: {key} {tok:?} is not a MAC address"));
        }
        *b = u8::from_str_radix(p, 16)
            .map_err(|_| format!("geneve: {key} {tok:?} is not a MAC address"))?;
    }
    Ok(out)
}

/// `A` or `A-B`, each at most `max`.
fn range(key: &str, tok: &str, max: u64) -> Result<(u64, u64), String> {
    let (a, b) = tok.split_once('-').unwrap_or((tok, tok));
    let a = args::parse_uint(a, max).map_err(|e| format!("geneve: {key} {e}"))?;
    let b = args::parse_uint(b, max).map_err(|e| format!("geneve: {key} {e}"))?;
    if b < a {
        return Err(format!("geneve: {key} range {tok} ends before it starts"));
    }
    Ok((a, b))
}

/// Joins `A`, `-`, `B` into `A-B`.
fn join_ranges(args: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < args.len() {
        if args[i] == "-" && !out.is_empty() && i + 1 < args.len() {
            let last = out.pop().unwrap_or_default();
            out.push(format!("{last}-{}", args[i + 1]));
            i += 2;
        } else {
            out.push(args[i].clone());
            i += 1;
        }
    }
    out
}

/// Parses `encap ...` (the tokens after `encap`).
pub fn parse_encap(args: &[String]) -> Result<Encap, String> {
    let args = join_ranges(args);
    let mut it = args.iter().peekable();
    let mut fixed = None;
    let mut maps: Vec<VlanMap> = Vec::new();
    let (mut src, mut dst, mut sport, mut ttl) = (None, None, None, 64u8);
    let mut smac = [0x02, 0, 0, 0, 0, 0x01];
    let mut dmac = [0x02, 0, 0, 0, 0, 0x02];
    let mut opts = Vec::new();
    while let Some(key) = it.next() {
        let key = key.as_str();
        if key == "opt" {
            let o = crate::parse_opt(&mut it)?;
            let (Some(class), Some(typ), Some((data, mask))) = (o.class, o.typ, o.data) else {
                return Err("geneve: encap opt needs class, type and data".to_string());
            };
            if mask.iter().any(|&b| b != 0xff) {
                return Err("geneve: encap opt takes no mask".to_string());
            }
            opts.push(NewOpt { class, typ, data });
            continue;
        }
        let v = it
            .next()
            .ok_or_else(|| format!("geneve: {key} needs a value"))?;
        match key {
            "vni" => {
                fixed = Some(
                    args::parse_uint(v, 0xff_ffff).map_err(|e| format!("geneve: vni {e}"))? as u32,
                )
            }
            "vlan" => {
                let (a, b) = range("vlan", v, 4094)?;
                if a == 0 {
                    return Err("geneve: vlan 0 is not a VLAN (1 to 4094)".to_string());
                }
                if it.next().map(String::as_str) != Some("vni") {
                    return Err(format!("geneve: vlan {v} needs a vni after it"));
                }
                let n = it.next().ok_or("geneve: vni needs a value")?;
                let (x, y) = range("vni", n, 0xff_ffff)?;
                let y = if n.contains('-') { y } else { x + (b - a) };
                if y - x != b - a {
                    return Err(format!(
                        "geneve: vlan {v} and vni {n} are ranges of different sizes"
                    ));
                }
                if y > 0xff_ffff {
                    return Err(format!("geneve: vlan {v} maps past vni 0xffffff"));
                }
                for m in &maps {
                    let (mv, mve) = (m.vlan as u64, m.vlan_end as u64);
                    let (mn, mne) = (m.vni as u64, m.vni as u64 + (mve - mv));
                    if a <= mve && mv <= b {
                        return Err(format!("geneve: vlan {v} is mapped twice"));
                    }
                    if x <= mne && mn <= y {
                        return Err(format!("geneve: vni {n} is used twice"));
                    }
                }
                maps.push(VlanMap {
                    vlan: a as u16,
                    vlan_end: b as u16,
                    vni: x as u32,
                });
            }
            "src" => src = Some(ipv4("src", v)?),
            "dst" => dst = Some(ipv4("dst", v)?),
            "sport" => {
                sport = Some(
                    args::parse_uint(v, 0xffff).map_err(|e| format!("geneve: sport {e}"))? as u16,
                )
            }
            "ttl" => ttl = args::parse_uint(v, 255).map_err(|e| format!("geneve: ttl {e}"))? as u8,
            "smac" => smac = mac("smac", v)?,
            "dmac" => dmac = mac("dmac", v)?,
            other => {
                return Err(format!(
                    "geneve: unexpected {other:?} in encap (expected vni, vlan, src, dst, sport, smac, dmac, ttl or opt)"
                ));
            }
        }
    }
    let vni = match (fixed, maps.is_empty()) {
        (Some(_), false) => {
            return Err(
                "geneve: encap takes vni N or vlan ... vni ... ranges, not both".to_string(),
            );
        }
        (Some(n), true) => VniSource::Fixed(n),
        (None, false) => VniSource::Vlan(maps),
        (None, true) => return Err("geneve: encap needs vni N or vlan V vni N".to_string()),
    };
    let total: usize = opts.iter().map(|o| 4 + o.data.len()).sum();
    if total > MAX_OPT_BLOCK {
        return Err(format!(
            "geneve: the options take {total} bytes, more than {MAX_OPT_BLOCK}"
        ));
    }
    Ok(Encap {
        vni,
        src: src.ok_or("geneve: encap needs src")?,
        dst: dst.ok_or("geneve: encap needs dst")?,
        sport,
        smac,
        dmac,
        ttl,
        opts,
    })
}

/// The VNI of `vid` under `maps`.
pub fn map_vlan(maps: &[VlanMap], vid: u16) -> Option<u32> {
    maps.iter()
        .find(|m| (m.vlan..=m.vlan_end).contains(&vid))
        .map(|m| m.vni + u32::from(vid - m.vlan))
}

/// The edits that encapsulate packet `index`.
pub fn eval_encap(e: &Encap, index: u32, p: &Pkt<'_>, edits: &mut Vec<Edit>) {
    let (vni, strip) = match &e.vni {
        VniSource::Fixed(n) => (*n, false),
        VniSource::Vlan(maps) => {
            let Some(tpid) = hdr::be16(p.bytes, 12) else {
                return;
            };
            if tpid != 0x8100 && tpid != 0x88a8 {
                return;
            }
            let Some(tci) = hdr::be16(p.bytes, 14) else {
                return;
            };
            let Some(vni) = map_vlan(maps, tci & 0x0fff) else {
                return;
            };
            (vni, true)
        }
    };
    let inner_len = p.len as usize - if strip { 4 } else { 0 };
    let mut block = Vec::new();
    for o in &e.opts {
        o.encode(&mut block);
    }
    let udp_len = Udp::LEN + Geneve::LEN + block.len() + inner_len;
    let ip_len = 20 + udp_len;
    if ip_len > 0xffff {
        return;
    }
    let sport = e.sport.unwrap_or_else(|| {
        let n = p.bytes.len().min(64);
        let h = p.bytes[..n].iter().fold(0x811c_9dc5u32, |h, &b| {
            (h ^ b as u32).wrapping_mul(0x0100_0193)
        });
        49152 + (h % 16384) as u16
    });
    let mut out = Vec::with_capacity(14 + 20 + 16 + block.len());
    out.extend_from_slice(&e.dmac);
    out.extend_from_slice(&e.smac);
    out.extend_from_slice(&[0x08, 0x00]);
    let ip_start = out.len();
    out.extend_from_slice(&[0x45, 0x00]);
    out.extend_from_slice(&(ip_len as u16).to_be_bytes());
    out.extend_from_slice(&[0, 0, 0x40, 0x00, e.ttl, 17, 0, 0]);
    out.extend_from_slice(&e.src);
    out.extend_from_slice(&e.dst);
    let c = hdr::ipv4_checksum(&out[ip_start..]);
    out[ip_start + 10..ip_start + 12].copy_from_slice(&c.to_be_bytes());
    out.extend_from_slice(&sport.to_be_bytes());
    out.extend_from_slice(&hdr::GENEVE_PORT.to_be_bytes());
    out.extend_from_slice(&(udp_len as u16).to_be_bytes());
    out.extend_from_slice(&[0, 0]);
    let critical = e.opts.iter().any(|o| o.typ & 0x80 != 0);
    out.push((block.len() / 4) as u8);
    out.push(if critical { 0x40 } else { 0 });
    out.extend_from_slice(&[0x65, 0x58]);
    out.extend_from_slice(&vni.to_be_bytes()[1..]);
    out.push(0);
    out.extend_from_slice(&block);
    if strip {
        edits.push(Edit::remove(index, 12, 4));
    }
    edits.push(Edit::insert(index, 0, out));
}

/// What `decap` did with one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decap {
    /// Not a complete Geneve packet, or nothing inside: left as it is.
    NotGeneve,
    /// The inner frame or packet replaced the outer one.
    Done,
    /// The Geneve header names an inner protocol whose header does not fit what follows (an
    /// Ethernet frame shorter than its header, an IPv4 or IPv6 packet shorter than its header
    /// or of another version): left as it is, counted as malformed.
    Malformed,
    /// An inner protocol `decap` does not take (not Ethernet, IPv4 or IPv6): left as it is.
    Other,
}

/// The edits that decapsulate packet `index`, and what became of it.
pub fn eval_decap(index: u32, p: &Pkt<'_>, edits: &mut Vec<Edit>) -> Decap {
    let Some((_, g)) = geneve_of(p) else {
        return Decap::NotGeneve;
    };
    if !g.complete {
        return Decap::NotGeneve;
    }
    let inner = p.l4 as usize + Udp::LEN + Geneve::LEN + g.options.len();
    if inner >= p.len as usize {
        return Decap::NotGeneve; // nothing inside (zeek-geneve-truncated.pcapng)
    }
    let rest = p.len as usize - inner;
    // The first byte of the inner packet (the window may hold less than the whole frame).
    let first = p.bytes.get(inner).copied();
    match g.protocol {
        0x6558 if rest < 14 => Decap::Malformed,
        0x6558 => {
            edits.push(Edit::remove(index, 0, inner as u32));
            Decap::Done
        }
        0x0800 | 0x86dd => {
            let (need, version) = match g.protocol {
                0x0800 => (20, 4),
                _ => (40, 6),
            };
            // IPv4's header length (IHL, in 32-bit words) within what follows.
            let ihl = |b: u8| usize::from(b & 0x0f) * 4;
            let ihl_bad =
                g.protocol == 0x0800 && first.is_some_and(|b| ihl(b) < 20 || ihl(b) > rest);
            if rest < need || first.is_some_and(|b| b >> 4 != version) || ihl_bad {
                return Decap::Malformed;
            }
            let l3 = p.l3 as usize;
            // The EtherType in front of the outer IP header (none without an Ethernet header).
            if l3 < 14 {
                return Decap::Other;
            }
            edits.push(Edit::set(
                index,
                (l3 - 2) as u32,
                g.protocol.to_be_bytes().to_vec(),
            ));
            edits.push(Edit::remove(index, l3 as u32, (inner - l3) as u32));
            Decap::Done
        }
        _ => Decap::Other,
    }
}
