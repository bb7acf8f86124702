//! NAT bindings (`nf_nat_setup_info`, `get_unique_tuple`, `find_best_ips_proto`,
//! `nf_nat_l4proto_unique_tuple` in `nf_nat_core.c`) and the per-direction rewrite they give.

use std::net::IpAddr;

use crate::rewrite::NatRewrite;
use crate::table::{Conntrack, fmix, src_key};
use crate::tuple::{FAMILY_V4, Key, addr_bytes, bytes_addr, has_ports, is_icmp};
use crate::{Dir, status};

/// Which side a binding translates (`enum nf_nat_manip_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Manip {
    /// Source NAT (`snat`, `masquerade`; the kernel's postrouting and input hooks).
    Src,
    /// Destination NAT (`dnat`, `redirect`; prerouting and output).
    Dst,
}

/// A NAT range (`struct nf_nat_range2`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NatRange {
    /// Address range, both ends inclusive (NF_NAT_RANGE_MAP_IPS); `None` keeps the address.
    /// For masquerade the caller gives the output device's address, for redirect the input
    /// device's (both ends the same).
    pub addr: Option<(IpAddr, IpAddr)>,
    /// Port range, both ends inclusive (NF_NAT_RANGE_PROTO_SPECIFIED); for ICMP, the id range.
    pub ports: Option<(u16, u16)>,
    /// `random` (NF_NAT_RANGE_PROTO_RANDOM): the port is chosen at random in the range, even
    /// when the original one is free.
    pub random: bool,
    /// `fully-random` (NF_NAT_RANGE_PROTO_RANDOM_FULLY): the same here (the kernel differs only
    /// in how it draws the offset).
    pub fully_random: bool,
    /// `persistent` (NF_NAT_RANGE_PERSISTENT): the address is chosen from the source address
    /// only, so a client keeps its address across destinations.
    pub persistent: bool,
}

/// Why a NAT binding could not be made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NatError {
    /// `id` names no unconfirmed connection: bindings are made on a connection's first packet
    /// only (the kernel's nat chains run for IP_CT_NEW).
    #[error("no unconfirmed connection with this id")]
    NotPending,
    /// The range's addresses are of the other family, or the first is above the last.
    #[error("NAT range address of the wrong family or reversed")]
    BadRange,
}

impl Conntrack {
    /// Bind `manip` NAT for the unconfirmed connection `id` within `range`
    /// (`nf_nat_setup_info`). The new tuple is chosen by `get_unique_tuple` so that the reply
    /// tuple is used by no connection in the table: for source NAT the original source is kept
    /// if it is in range and free, else the mapping a confirmed connection from the same
    /// source already has is reused if it is in range and free (`find_appropriate_src`); the
    /// address is picked in the range by a hash of the source
    /// (and destination, unless `persistent`) address; then the port: kept if in range and free
    /// (a range of one port is taken as is), else searched in the range from a random offset,
    /// 128 tries then halving rounds (NF_NAT_MAX_ATTEMPTS). Without a port range, destination
    /// NAT never changes the port, and source NAT searches 1-511, 600-1023 or 1024-65535 by
    /// the original port. ICMP ids are searched the same way (0-65535 without a range).
    ///
    /// Each manip binds once (`nf_nat_initialized`): a second call for the same manip returns
    /// `Ok(false)` and changes nothing. `Ok(true)` when the binding is made (even a null one).
    /// Sets IPS_SRC_NAT / IPS_DST_NAT when the tuple changed and IPS_*_NAT_DONE always.
    pub fn nat_setup(&self, id: u64, manip: Manip, range: &NatRange) -> Result<bool, NatError> {
        let done = match manip {
            Manip::Src => status::SRC_NAT_DONE,
            Manip::Dst => status::DST_NAT_DONE,
        };
        let (reply, st) = self
            .with_entry(id, |e, live| (!live).then_some((e.tuple[1], e.status)))
            .flatten()
            .ok_or(NatError::NotPending)?;
        if st & done != 0 {
            return Ok(false);
        }
        let r = Range::new(range, reply.family)?;
        // The original tuple as it currently looks (earlier manips applied).
        let curr = reply.invert().ok_or(NatError::NotPending)?;
        let now = self.with_entry(id, |e, _| e.born).unwrap_or(0);
        let new = self.unique_tuple(&curr, &r, manip, id, now);
        let changed = new != curr;
        let new_reply = new.invert();
        self.with_entry(id, |e, live| {
            if live || e.status & done != 0 {
                return Err(NatError::NotPending);
            }
            if changed && let Some(nr) = new_reply {
                e.tuple[1] = nr;
                e.status |= match manip {
                    Manip::Src => status::SRC_NAT,
                    Manip::Dst => status::DST_NAT,
                };
            }
            e.status |= done;
            Ok(true)
        })
        .ok_or(NatError::NotPending)?
    }

    /// The null binding (`nf_nat_alloc_null_binding`) for a new connection that no nat rule
    /// bound for `manip`: the address stays (the range is the current address), but the port
    /// may still change when the reply tuple is taken (the kernel's implicit source port
    /// translation). Same results as [`Conntrack::nat_setup`].
    pub fn nat_null_binding(&self, id: u64, manip: Manip) -> Result<bool, NatError> {
        let reply = self
            .with_entry(id, |e, _| e.tuple[1])
            .ok_or(NatError::NotPending)?;
        let a = bytes_addr(
            match manip {
                Manip::Src => &reply.dst,
                Manip::Dst => &reply.src,
            },
            reply.family,
        );
        self.nat_setup(
            id,
            manip,
            &NatRange {
                addr: Some((a, a)),
                ..NatRange::default()
            },
        )
    }

    /// The rewrite for a packet of connection `id` travelling in `dir` (confirmed or not):
    /// what the kernel's `nf_nat_packet` writes at the hooks of both manips, from the packet's
    /// tuple to the inverse of the other direction's tuple. `None` when nothing changes or the
    /// id is gone. Cheap: one lock, no allocation.
    pub fn nat_rewrite(&self, id: u64, dir: Dir) -> Option<NatRewrite> {
        self.with_entry(id, |e, _| rewrite_for(&e.tuple, dir))
            .flatten()
    }

    fn unique_tuple(&self, orig: &Key, r: &Range, manip: Manip, id: u64, now: u64) -> Key {
        let random_all = r.random;
        // 1) Source NAT: the original tuple if it is in range and unused; else the mapping an
        //    earlier connection from the same source got, if it is in range and unused.
        if manip == Manip::Src && !random_all {
            if r.addr_in(&orig.src) && (r.ports.is_none() || l4_in_range(orig, manip, r.ports)) {
                if !self.used(orig, id, now) {
                    return *orig;
                }
            } else if let Some(t) = self.appropriate_src(orig, r, now)
                && !self.used(&t, id, now)
            {
                return t;
            }
        }
        // 2) The address.
        let mut t = *orig;
        r.best_ip(&mut t, manip);
        // 3) The port, if needed.
        if !random_all {
            match r.ports {
                Some((lo, hi)) => {
                    if l4_in_range(&t, manip, r.ports) && (lo == hi || !self.used(&t, id, now)) {
                        return t;
                    }
                }
                None => {
                    if !self.used(&t, id, now) {
                        return t;
                    }
                }
            }
        }
        self.unique_port(&mut t, r, manip, id, now);
        t
    }

    /// `find_appropriate_src`: a confirmed connection from the same original source (address,
    /// port, protocol, zone) that was source-NATed: its translated source with `orig`'s
    /// destination, if the translated address is in the range.
    fn appropriate_src(&self, orig: &Key, r: &Range, now: u64) -> Option<Key> {
        let ids = self.bysource.lock().get(&src_key(orig)).cloned()?;
        ids.into_iter().find_map(|id| {
            self.with_entry(id, |e, live| {
                let same = e.tuple[0].src == orig.src && e.tuple[0].sport == orig.sport;
                if !live || e.expired(now) || !same {
                    return None;
                }
                let mut t = *orig;
                t.src = e.tuple[1].dst;
                t.sport = e.tuple[1].dport;
                if is_icmp(t.proto) {
                    t.sport = e.tuple[1].sport;
                }
                r.addr_in(&t.src).then_some(t)
            })
            .flatten()
        })
    }

    /// `nf_nat_used_tuple`: is the reply tuple of `t` (original orientation) taken?
    fn used(&self, t: &Key, id: u64, now: u64) -> bool {
        match t.invert() {
            Some(reply) => self.tuple_taken(&reply, id, now),
            None => false,
        }
    }

    /// `nf_nat_l4proto_unique_tuple`.
    fn unique_port(&self, t: &mut Key, r: &Range, manip: Manip, id: u64, now: u64) {
        let icmp = is_icmp(t.proto);
        if !icmp && !has_ports(t.proto) {
            return;
        }
        let cur = if icmp || manip == Manip::Src {
            t.sport
        } else {
            t.dport
        };
        let (min, size): (u32, u32) = match r.ports {
            Some((lo, hi)) => (u32::from(lo), u32::from(hi) - u32::from(lo) + 1),
            None if icmp => (0, 65536),
            None => {
                if manip == Manip::Dst {
                    return;
                }
                if cur < 512 {
                    (1, 511)
                } else if cur < 1024 {
                    (600, 424)
                } else {
                    (1024, 64512)
                }
            }
        };
        let mut off: u32 = if r.random || manip != Manip::Dst {
            (self.random() & 0xffff) as u32
        } else {
            0
        };
        let mut attempts = size.min(128);
        loop {
            for _ in 0..attempts {
                let p = (min + off % size) as u16;
                if icmp || manip == Manip::Src {
                    t.sport = p;
                } else {
                    t.dport = p;
                }
                if !self.used(t, id, now) {
                    return;
                }
                off = off.wrapping_add(1);
            }
            if attempts >= size || attempts < 16 {
                return;
            }
            attempts /= 2;
            off = (self.random() & 0xffff) as u32;
        }
    }
}

/// `l4proto_in_range`: the port (source for SNAT, destination for DNAT) or ICMP id is within
/// `ports`; protocols without ports are always in range.
fn l4_in_range(t: &Key, manip: Manip, ports: Option<(u16, u16)>) -> bool {
    let Some((lo, hi)) = ports else {
        return true;
    };
    let p = if is_icmp(t.proto) || manip == Manip::Src {
        t.sport
    } else if has_ports(t.proto) {
        t.dport
    } else {
        return true;
    };
    (lo..=hi).contains(&p)
}

/// A range in the table's address form.
struct Range {
    /// Inclusive bounds as integers (IPv4 in the low 32 bits).
    addr: Option<(u128, u128)>,
    ports: Option<(u16, u16)>,
    random: bool,
    persistent: bool,
    family: u8,
}

fn to_int(b: &[u8; 16], family: u8) -> u128 {
    if family == FAMILY_V4 {
        u128::from(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    } else {
        u128::from_be_bytes(*b)
    }
}

fn from_int(v: u128, family: u8) -> [u8; 16] {
    if family == FAMILY_V4 {
        let mut b = [0u8; 16];
        b[..4].copy_from_slice(&(v as u32).to_be_bytes());
        b
    } else {
        v.to_be_bytes()
    }
}

impl Range {
    fn new(r: &NatRange, family: u8) -> Result<Range, NatError> {
        let addr = match r.addr {
            Some((a, b)) => {
                let (a, fa) = addr_bytes(a);
                let (b, fb) = addr_bytes(b);
                if fa != family || fb != family {
                    return Err(NatError::BadRange);
                }
                let (a, b) = (to_int(&a, family), to_int(&b, family));
                if a > b {
                    return Err(NatError::BadRange);
                }
                Some((a, b))
            }
            None => None,
        };
        if let Some((lo, hi)) = r.ports
            && lo > hi
        {
            return Err(NatError::BadRange);
        }
        Ok(Range {
            addr,
            ports: r.ports,
            random: r.random || r.fully_random,
            persistent: r.persistent,
            family,
        })
    }

    /// `nf_nat_inet_in_range` on the source address.
    fn addr_in(&self, a: &[u8; 16]) -> bool {
        match self.addr {
            None => true,
            Some((lo, hi)) => (lo..=hi).contains(&to_int(a, self.family)),
        }
    }

    /// `find_best_ips_proto`: the address in the range for this connection, from a hash of the
    /// source address and (unless persistent) the destination address.
    fn best_ip(&self, t: &mut Key, manip: Manip) {
        let Some((lo, hi)) = self.addr else {
            return;
        };
        let pick = if lo == hi {
            lo
        } else {
            let s = to_int(&t.src, self.family);
            let mut j = fmix(s as u64 ^ (s >> 64) as u64 ^ 0x6a09_e667_f3bc_c908);
            if !self.persistent {
                let d = to_int(&t.dst, self.family);
                j = fmix(j ^ d as u64 ^ (d >> 64) as u64 ^ u64::from(t.zone));
            }
            let dist = hi.wrapping_sub(lo).wrapping_add(1);
            if dist == 0 {
                u128::from(j)
            } else {
                lo + u128::from(j) % dist
            }
        };
        let b = from_int(pick, self.family);
        match manip {
            Manip::Src => t.src = b,
            Manip::Dst => t.dst = b,
        }
    }
}

/// The rewrite for a packet in `dir` of a connection with tuples `tuple`.
pub(crate) fn rewrite_for(tuple: &[Key; 2], dir: Dir) -> Option<NatRewrite> {
    let tin = tuple[dir as usize];
    let tout = tuple[dir.flip() as usize].invert()?;
    let icmp = is_icmp(tin.proto);
    let ports = has_ports(tin.proto);
    let src_changed = tin.src != tout.src || (ports && tin.sport != tout.sport);
    let dst_changed = tin.dst != tout.dst || (ports && tin.dport != tout.dport);
    let id_changed = icmp && tin.sport != tout.sport;
    if !src_changed && !dst_changed && !id_changed {
        return None;
    }
    let fam = tin.family;
    let mut rw = NatRewrite {
        src: src_changed.then(|| (bytes_addr(&tout.src, fam), tout.sport)),
        dst: dst_changed.then(|| (bytes_addr(&tout.dst, fam), tout.dport)),
        icmp_id: None,
    };
    if icmp {
        if id_changed {
            rw.icmp_id = Some(tout.sport);
        }
        // The ICMP "ports" are the id and the type: only addresses and the id move.
        if let Some(s) = &mut rw.src {
            s.1 = tout.sport;
        }
        if let Some(d) = &mut rw.dst {
            d.1 = tout.sport;
        }
    }
    Some(rw)
}
