//! The `meta` keys: one table that the parser (keyword, whether it may be written without
//! `meta`), the printer (whether nft lists it without `meta`) and the model (its data type)
//! read; wasp-core maps each key to where its value comes from.
//!
//! What each key means on wasp's paths (the kernel's `nft_meta_get_eval` for a packet that
//! has no such state where wasp has none):
//! - `iif`/`oif` name a device; wasp compares the name (the kernel the index it looked the
//!   name up to at load, which refuses a device that does not exist; wasp accepts any name,
//!   since its devices are its own). `iiftype`/`oiftype` are `ether` (wasp's ports are
//!   Ethernet), `iifgroup`/`oifgroup` 0 (`"default"`).
//! - `skuid`, `skgid`, `cgroup`: wasp has no local sockets, so these never match, negated or
//!   not (the kernel's forward path: no socket, NFT_BREAK). `rtclassid`: no route realms, the
//!   same.
//! - `ipsec` (`secpath`) is always `missing`: wasp has no IPsec transformations (no xfrm).
//!   `sdif` and `sdifname` read no device (0, `""`): wasp has no VRF devices, and the kernel
//!   reads 0 outside a VRF.
//! - `priority` is 0 until `meta priority set`; `cpu` is the worker's number (0 in a replay);
//!   `random` a pseudo-random 32-bit number per packet; `pkttype` is read from the
//!   destination address (broadcast, multicast, else host).
//! - `time`, `day`, `hour` read the packet path's wall clock (a replay: the capture's
//!   timestamps), in UTC: nft converts the local times it reads to UTC with the machine's
//!   time zone, wasp takes the zone to be UTC.

use crate::model::{DataType, MetaKey};

/// One meta key.
#[derive(Debug, Clone, Copy)]
pub struct MetaRow {
    /// The key.
    pub key: MetaKey,
    /// Its keyword after `meta` (`mark`, `length`).
    pub name: &'static str,
    /// The data type of its values.
    pub dtype: DataType,
    /// nft reads it without `meta` too (its `meta_key_unqualified`).
    pub bare: bool,
    /// nft 1.0.6 lists it without `meta` (`iif "lo"`, `iifname "eth0"`).
    pub listed_bare: bool,
}

const fn m(key: MetaKey, name: &'static str, dtype: DataType, bare: bool, listed: bool) -> MetaRow {
    MetaRow {
        key,
        name,
        dtype,
        bare,
        listed_bare: listed,
    }
}

use DataType as T;
use MetaKey as K;

/// Every meta key wasp reads, in the order of [`MetaKey`].
pub static META_KEYS: &[MetaRow] = &[
    m(K::Iifname, "iifname", T::Ifname, true, true),
    m(K::Oifname, "oifname", T::Ifname, true, true),
    m(K::L4proto, "l4proto", T::InetProto, false, false),
    m(K::Nfproto, "nfproto", T::NfProto, false, false),
    m(K::Protocol, "protocol", T::EtherType, false, false),
    m(K::Len, "length", T::Integer(32), false, false),
    m(K::Mark, "mark", T::Mark, true, false),
    m(K::Nftrace, "nftrace", T::Integer(1), true, false),
    m(K::Priority, "priority", T::TcHandle, false, false),
    m(K::Iif, "iif", T::IfaceIndex, true, true),
    m(K::Oif, "oif", T::IfaceIndex, true, true),
    m(K::Iiftype, "iiftype", T::IfaceType, true, false),
    m(K::Oiftype, "oiftype", T::IfaceType, true, false),
    m(K::Iifgroup, "iifgroup", T::Devgroup, true, true),
    m(K::Oifgroup, "oifgroup", T::Devgroup, true, true),
    m(K::Skuid, "skuid", T::Uid, true, false),
    m(K::Skgid, "skgid", T::Gid, true, false),
    m(K::Cgroup, "cgroup", T::Integer(32), true, false),
    m(K::Cpu, "cpu", T::Integer(32), true, false),
    m(K::Pkttype, "pkttype", T::PktType, true, false),
    m(K::Random, "random", T::Integer(32), false, false),
    m(K::Time, "time", T::Time, true, false),
    m(K::Day, "day", T::Day, true, false),
    m(K::Hour, "hour", T::Hour, true, false),
    m(K::Rtclassid, "rtclassid", T::Realm, true, false),
    m(K::Secpath, "ipsec", T::Boolean, false, false),
    m(K::Sdif, "sdif", T::IfaceIndex, false, false),
    m(K::Sdifname, "sdifname", T::Ifname, false, false),
];

/// Other names nft reads after `meta` (its "backwards compat hack" in `meta_key_parse`):
/// (name, key).
const ALIASES: &[(&str, MetaKey)] = &[("secpath", K::Secpath)];

/// The row of `key`.
pub fn row(key: MetaKey) -> &'static MetaRow {
    &META_KEYS[key as usize]
}

/// The key whose keyword is `name` (after `meta`).
pub fn by_name(name: &str) -> Option<MetaKey> {
    META_KEYS
        .iter()
        .find(|r| r.name == name)
        .map(|r| r.key)
        .or_else(|| ALIASES.iter().find(|(a, _)| *a == name).map(|(_, k)| *k))
}

/// The key `name` names when written without `meta`.
pub fn bare(name: &str) -> Option<MetaKey> {
    META_KEYS
        .iter()
        .find(|r| r.bare && r.name == name)
        .map(|r| r.key)
}

/// The key as nft lists it: `iif`, `meta mark`.
pub fn listed(key: MetaKey) -> String {
    let r = row(key);
    if r.listed_bare {
        r.name.to_string()
    } else {
        format!("meta {}", r.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_order_is_the_enum_order() {
        for (i, r) in META_KEYS.iter().enumerate() {
            assert_eq!(r.key as usize, i, "{}", r.name);
        }
        assert_eq!(listed(MetaKey::Iif), "iif");
        assert_eq!(listed(MetaKey::Hour), "meta hour");
        assert_eq!(bare("pkttype"), Some(MetaKey::Pkttype));
        assert_eq!(bare("random"), None);
        assert_eq!(by_name("secpath"), Some(MetaKey::Secpath));
        assert_eq!(listed(MetaKey::Secpath), "meta ipsec");
    }
}
