//! The counter plugin: packets and bytes per use site and per set element, as nft's `counter`
//! statement (net/netfilter/nft_counter.c: `nft_counter_do_eval` adds one packet and the
//! packet's length). Served for `counter` in a rule (anonymous or `counter name X`), named
//! counter objects, and `counter` on set elements (`elem` in the packet header).
//!
//! Arguments: `[name NAME] [packets N] [bytes N]` (nft's initial values; they apply when the
//! site is first configured). A stateful expression: every packet continues.
//!
//! State moves across a hot swap (`export_state` / `import_state`), so counts keep counting.
//! Re-configuring a site that already has counts keeps them.

#![cfg_attr(target_arch = "wasm32", no_std)]

extern crate alloc;

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use wasp_plugin_sdk::blob::{Reader, Writer};
use wasp_plugin_sdk::{Edit, Info, Kind, Packets, Plugin, Sites, StateEntry, Verdict, args};

/// Packets and bytes.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Count {
    /// Packets counted.
    pub packets: u64,
    /// Bytes counted (the packets' `len`).
    pub bytes: u64,
}

impl Count {
    fn add(&mut self, len: u32) {
        self.packets = self.packets.wrapping_add(1);
        self.bytes = self.bytes.wrapping_add(len as u64);
    }
}

/// One use site: its own count (packets with `elem` 0) and, when it has them, its name and one
/// count per set element. A rule's anonymous counter has neither: it takes 24 bytes, so that
/// a million counters fit the plugin's memory limit.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SiteCounts {
    /// Packets that came through the rule itself.
    pub total: Count,
    /// The name and the elements' counts, for a site that has either.
    pub more: Option<alloc::boxed::Box<More>>,
}

/// What only some sites have.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct More {
    /// `name X`, or empty.
    pub name: String,
    /// Per set element (`elem` = element id + 1).
    pub elems: BTreeMap<u32, Count>,
}

impl SiteCounts {
    fn new(name: String, total: Count, elems: BTreeMap<u32, Count>) -> SiteCounts {
        let more = (!name.is_empty() || !elems.is_empty())
            .then(|| alloc::boxed::Box::new(More { name, elems }));
        SiteCounts { total, more }
    }

    /// `name X`, or empty.
    pub fn name(&self) -> &str {
        self.more.as_ref().map_or("", |m| m.name.as_str())
    }

    /// The elements' counts.
    pub fn elems(&self) -> impl Iterator<Item = (&u32, &Count)> {
        self.more.iter().flat_map(|m| m.elems.iter())
    }

    fn more_mut(&mut self) -> &mut More {
        self.more.get_or_insert_with(Default::default)
    }
}

/// The plugin.
#[derive(Debug, Default)]
pub struct Counter {
    sites: Sites<SiteCounts>,
}

const MAGIC: &[u8] = b"wasp-counter/1";

/// Arguments: `[name NAME] [packets N] [bytes N] [elem E [packets N] [bytes N]]...`; the
/// `packets`/`bytes` after `elem E` are element `E`'s initial counts (`E` = element id + 1, as
/// the packet header's `elem`), before any `elem` the site's.
fn parse_args(args: &[String]) -> Result<(String, Count, BTreeMap<u32, Count>), String> {
    let mut name = String::new();
    let mut init = Count::default();
    let mut elems: BTreeMap<u32, Count> = BTreeMap::new();
    let mut elem = 0u32;
    let mut it = args.iter();
    while let Some(key) = it.next() {
        let value = it
            .next()
            .ok_or_else(|| format!("counter: {key} needs a value"))?;
        let target = if elem == 0 {
            &mut init
        } else {
            elems.entry(elem).or_default()
        };
        match key.as_str() {
            "name" => name = args::unquote(value).to_string(),
            "packets" => {
                target.packets = args::parse_uint(value, u64::MAX)
                    .map_err(|e| format!("counter: packets {e}"))?
            }
            "bytes" => {
                target.bytes =
                    args::parse_uint(value, u64::MAX).map_err(|e| format!("counter: bytes {e}"))?
            }
            "elem" => {
                let e = args::parse_uint(value, u64::from(u32::MAX))
                    .map_err(|e| format!("counter: elem {e}"))? as u32;
                if e == 0 {
                    return Err("counter: elem 0 is the site itself (elements count from 1)".into());
                }
                elem = e;
            }
            other => {
                return Err(format!(
                    "counter: unknown argument {other:?} (expected name, packets or bytes)"
                ));
            }
        }
    }
    Ok((name, init, elems))
}

impl Plugin for Counter {
    fn describe(&self) -> Info {
        Info::new(
            "counter",
            env!("CARGO_PKG_VERSION"),
            &[Kind::Stateful, Kind::Statement],
            0,
        )
        .with_state_transfer()
    }

    fn configure(&mut self, site: u32, _kind: Kind, args: &[String]) -> Result<(), String> {
        let (name, init, elems) = parse_args(args)?;
        match self.sites.get_mut(site) {
            Some(existing) if existing.name() != name => existing.more_mut().name = name,
            Some(_) => {}
            None => {
                self.sites.insert(site, SiteCounts::new(name, init, elems));
            }
        }
        Ok(())
    }

    fn release(&mut self, site: u32) {
        self.sites.remove(site);
    }

    fn apply(
        &mut self,
        site: u32,
        pkts: Packets<'_>,
        _verdicts: &mut [Verdict],
        _edits: &mut Vec<Edit>,
    ) {
        let Some(s) = self.sites.get_mut(site) else {
            return;
        };
        for p in pkts.iter() {
            if p.elem == 0 {
                s.total.add(p.len);
            } else {
                s.more_mut().elems.entry(p.elem).or_default().add(p.len);
            }
        }
    }

    fn list_state(&mut self, site: u32) -> Vec<StateEntry> {
        let Some(s) = self.sites.get(site) else {
            return Vec::new();
        };
        let entry = |elem: u32, c: &Count| {
            let mut e = StateEntry::values(elem, &[("packets", c.packets), ("bytes", c.bytes)]);
            e.text = if s.name().is_empty() || elem != 0 {
                format!("packets {} bytes {}", c.packets, c.bytes)
            } else {
                format!("counter {} packets {} bytes {}", s.name(), c.packets, c.bytes)
            };
            e
        };
        let mut out = Vec::with_capacity(1 + s.more.as_ref().map_or(0, |m| m.elems.len()));
        out.push(entry(0, &s.total));
        out.extend(s.elems().map(|(e, c)| entry(*e, c)));
        out
    }

    fn reset_state(&mut self, site: u32, elem: u32) {
        let Some(s) = self.sites.get_mut(site) else {
            return;
        };
        if elem == 0 {
            s.total = Count::default();
            if let Some(m) = s.more.as_mut() {
                m.elems.clear();
            }
        } else if let Some(m) = s.more.as_mut() {
            m.elems.remove(&elem);
        }
    }

    fn export_state(&mut self) -> Vec<u8> {
        let mut w = Writer::new(MAGIC);
        w.u32(self.sites.len() as u32);
        for (site, s) in self.sites.iter() {
            w.u32(site)
                .bytes(s.name().as_bytes())
                .u64(s.total.packets)
                .u64(s.total.bytes);
            w.u32(s.more.as_ref().map_or(0, |m| m.elems.len()) as u32);
            for (elem, c) in s.elems() {
                w.u32(*elem).u64(c.packets).u64(c.bytes);
            }
        }
        w.finish()
    }

    /// Takes the counts of every site in the blob (creating sites not configured yet, so the
    /// host may call this before or after `configure`). Nothing changes on an error.
    fn import_state(&mut self, blob: &[u8]) -> Result<(), String> {
        let mut r = Reader::new(blob, MAGIC)?;
        let mut sites = Vec::new();
        for _ in 0..r.u32()? {
            let site = r.u32()?;
            let name = String::from_utf8_lossy(r.bytes()?).into_owned();
            let total = Count {
                packets: r.u64()?,
                bytes: r.u64()?,
            };
            let mut elems = BTreeMap::new();
            for _ in 0..r.u32()? {
                let elem = r.u32()?;
                elems.insert(
                    elem,
                    Count {
                        packets: r.u64()?,
                        bytes: r.u64()?,
                    },
                );
            }
            sites.push((site, SiteCounts::new(name, total, elems)));
        }
        if !r.is_empty() {
            return Err("state blob has trailing bytes".to_string());
        }
        for (site, counts) in sites {
            match self.sites.get_mut(site) {
                Some(s) => {
                    s.total = counts.total;
                    let elems = counts.more.map(|m| m.elems).unwrap_or_default();
                    if !elems.is_empty() || s.more.is_some() {
                        s.more_mut().elems = elems;
                    }
                }
                None => {
                    self.sites.insert(site, counts);
                }
            }
        }
        Ok(())
    }
}

wasp_plugin_sdk::export_plugin!(Counter);

#[cfg(test)]
mod tests {
    use super::*;
    use wasp_plugin_sdk::testing::{TestPkt, batch};

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    fn pkt(len: usize, elem: u32) -> TestPkt {
        TestPkt {
            frame: alloc::vec![0; len],
            elem,
            l3: 0xffff,
            l4: 0xffff,
            ..Default::default()
        }
    }

    fn run(c: &mut Counter, site: u32, pkts: &[TestPkt]) -> Vec<Verdict> {
        let (buf, count, stride) = batch(pkts, 0);
        let r = wasp_plugin_sdk::__glue::apply(c, site, &buf, count, stride);
        assert!(r.edits.is_empty());
        // Every packet continues: the empty verdict list says so.
        assert!(r.verdicts.is_empty());
        vec![Verdict::Continue; pkts.len()]
    }

    fn values(e: &StateEntry) -> (u32, u64, u64) {
        (e.elem, e.values[0].1, e.values[1].1)
    }

    #[test]
    fn counts_per_site_and_element() {
        let mut c = Counter::default();
        c.configure(0, Kind::Stateful, &[]).unwrap();
        c.configure(1, Kind::Stateful, &args("packets 10 bytes 1000"))
            .unwrap();
        let v = run(
            &mut c,
            0,
            &[
                pkt(60, 0),
                pkt(1514, 0),
                pkt(100, 3),
                pkt(200, 3),
                pkt(64, 9),
            ],
        );
        assert_eq!(v, [Verdict::Continue; 5]);
        run(&mut c, 1, &[pkt(42, 0)]);
        let s0: Vec<_> = c.list_state(0).iter().map(values).collect();
        assert_eq!(s0, [(0, 2, 1574), (3, 2, 300), (9, 1, 64)]);
        let s1 = c.list_state(1);
        assert_eq!(values(&s1[0]), (0, 11, 1042));
        assert_eq!(s1[0].text, "packets 11 bytes 1042");
        // An unconfigured site counts nothing and lists nothing.
        run(&mut c, 7, &[pkt(42, 0)]);
        assert!(c.list_state(7).is_empty());
    }

    #[test]
    fn reset_all_or_one_element() {
        let mut c = Counter::default();
        c.configure(0, Kind::Stateful, &args("name \"web\""))
            .unwrap();
        run(&mut c, 0, &[pkt(60, 0), pkt(100, 3), pkt(200, 4)]);
        assert_eq!(c.list_state(0)[0].text, "counter web packets 1 bytes 60");
        c.reset_state(0, 3);
        let s: Vec<_> = c.list_state(0).iter().map(values).collect();
        assert_eq!(s, [(0, 1, 60), (4, 1, 200)]);
        c.reset_state(0, 0);
        let s: Vec<_> = c.list_state(0).iter().map(values).collect();
        assert_eq!(s, [(0, 0, 0)]);
    }

    #[test]
    fn element_initial_counts() {
        let mut c = Counter::default();
        c.configure(
            1,
            Kind::Stateful,
            &args("packets 1 bytes 2 elem 3 packets 5 bytes 300"),
        )
        .unwrap();
        run(&mut c, 1, &[pkt(100, 3), pkt(40, 0)]);
        let got: Vec<_> = c.list_state(1).iter().map(values).collect();
        assert_eq!(got, [(0, 2, 42), (3, 6, 400)]);
        assert!(c.configure(2, Kind::Stateful, &args("elem 0")).is_err());
    }

    #[test]
    fn a_site_without_name_or_elements_is_small() {
        // A million rule counters within the plugin's 64 MiB: 24 bytes each, 32 in `Sites`.
        assert_eq!(core::mem::size_of::<SiteCounts>(), 24);
        let mut c = Counter::default();
        c.configure(0, Kind::Stateful, &[]).unwrap();
        assert!(c.sites.get(0).unwrap().more.is_none());
        run(&mut c, 0, &[pkt(60, 0)]);
        assert!(c.sites.get(0).unwrap().more.is_none(), "no element counted");
    }

    #[test]
    fn bad_arguments() {
        let mut c = Counter::default();
        assert_eq!(
            c.configure(0, Kind::Stateful, &args("packets")),
            Err("counter: packets needs a value".into())
        );
        assert_eq!(
            c.configure(0, Kind::Stateful, &args("packets x")),
            Err("counter: packets \"x\" is not a number".into())
        );
        assert_eq!(
            c.configure(0, Kind::Stateful, &args("frobs 3")),
            Err("counter: unknown argument \"frobs\" (expected name, packets or bytes)".into())
        );
    }

    #[test]
    fn state_survives_a_swap_and_release_drops_it() {
        let mut v1 = Counter::default();
        v1.configure(0, Kind::Stateful, &[]).unwrap();
        v1.configure(2, Kind::Stateful, &args("name c2")).unwrap();
        run(&mut v1, 0, &[pkt(60, 0), pkt(70, 5)]);
        run(&mut v1, 2, &[pkt(80, 0)]);
        let blob = v1.export_state();

        let mut v2 = Counter::default();
        v2.configure(0, Kind::Stateful, &[]).unwrap();
        v2.import_state(&blob).unwrap();
        run(&mut v2, 0, &[pkt(40, 0)]);
        let s: Vec<_> = v2.list_state(0).iter().map(values).collect();
        assert_eq!(s, [(0, 2, 100), (5, 1, 70)]);
        // Site 2 was not configured yet: imported all the same, configure keeps the counts.
        v2.configure(2, Kind::Stateful, &args("name c2")).unwrap();
        assert_eq!(values(&v2.list_state(2)[0]), (0, 1, 80));

        assert!(v2.import_state(b"junk").is_err());
        assert!(v2.import_state(&blob[..blob.len() - 3]).is_err());
        assert_eq!(
            values(&v2.list_state(0)[0]),
            (0, 2, 100),
            "a failed import changes nothing"
        );

        v2.release(0);
        assert!(v2.list_state(0).is_empty());
        v2.configure(0, Kind::Stateful, &[]).unwrap();
        assert_eq!(values(&v2.list_state(0)[0]), (0, 0, 0));
        assert!(v2.describe().state_transfer);
    }
}
