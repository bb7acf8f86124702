//! The [`Plugin`] trait.

use crate::{Edit, Info, Kind, Packets, StateEntry, Verdict};
use alloc::string::{String, ToString};
use alloc::vec::Vec;

/// A wasp plugin. Implement [`describe`](Plugin::describe) and what your kind needs; export it
/// with [`crate::export_plugin!`]. One value lives per instance (per worker), made with
/// `Default` on the first call. `site` is the use site's id (one per place the plugin appears
/// in the ruleset).
pub trait Plugin: Default + 'static {
    /// Name, kinds, window (bytes of each frame to see) and whether state moves across a hot
    /// swap. Called once after loading.
    fn describe(&self) -> Info;

    /// Sets up use site `site` used as `kind` with the rule's arguments as tokens. An `Err`
    /// refuses the ruleset with that message at the rule's file:line:col. Default: accepts.
    fn configure(&mut self, site: u32, kind: Kind, args: &[String]) -> Result<(), String> {
        let _ = (site, kind, args);
        Ok(())
    }

    /// The use site is gone: drop its state. Default: nothing.
    fn release(&mut self, site: u32) {
        let _ = site;
    }

    /// A match: set `out[i]` (all false on entry) for packet `i`. Default: nothing matches.
    fn matches(&mut self, site: u32, pkts: Packets<'_>, out: &mut [bool]) {
        let _ = (site, pkts, out);
    }

    /// Bytes of each frame a match sees first (WIT `fast-match.first-window`): `None` (the
    /// default) for the whole window of [`describe`](Plugin::describe). A plugin whose answer
    /// usually lies in fewer bytes than its window declares that many and implements
    /// [`matches_first`](Plugin::matches_first): the host then copies only those bytes per
    /// packet, and asks [`matches`](Plugin::matches) with the whole window for the packets
    /// that need more. Asked once, when the plugin is loaded.
    fn first_window(&self) -> Option<u32> {
        None
    }

    /// A match on packets cut to [`first_window`](Plugin::first_window) bytes: set `out[i]`
    /// for packet `i`, or `more[i]` when its answer needs bytes past `pkt.bytes` (then `out[i]`
    /// is ignored and the host asks [`matches`](Plugin::matches) for it with the whole
    /// window). Both all false on entry, at most 64 packets. Default: [`matches`]
    /// (Plugin::matches), which is right when `first_window` is `None`.
    fn matches_first(&mut self, site: u32, pkts: Packets<'_>, out: &mut [bool], more: &mut [bool]) {
        let _ = more;
        self.matches(site, pkts, out)
    }

    /// [`matches_first`](Plugin::matches_first) with the answers as bitmasks, as the host
    /// takes them: (hits, more), bit i for packet i (at most 64 packets; bits past them and
    /// `hits` bits of packets marked `more` are cleared by the SDK). Default: calls
    /// `matches_first` and packs its answers. A plugin may write the bits itself to save the
    /// two bool arrays and the packing per call (the geneve plugin does).
    fn matches_first_bits(&mut self, site: u32, pkts: Packets<'_>) -> (u64, u64) {
        let n = pkts.len().min(glue::FIRST_MAX);
        let (mut out, mut more) = ([false; glue::FIRST_MAX], [false; glue::FIRST_MAX]);
        self.matches_first(site, pkts, &mut out[..n], &mut more[..n]);
        let (mut hits, mut need) = (0u64, 0u64);
        for i in 0..n {
            hits |= u64::from(out[i]) << i;
            need |= u64::from(more[i]) << i;
        }
        (hits, need)
    }

    /// A statement or stateful expression: set `verdicts[i]` (all `Continue` on entry) and
    /// push edits (`Edit::packet` is the index in the batch). Default: every packet continues.
    fn apply(
        &mut self,
        site: u32,
        pkts: Packets<'_>,
        verdicts: &mut [Verdict],
        edits: &mut Vec<Edit>,
    ) {
        let _ = (site, pkts, verdicts, edits);
    }

    /// Timer `key` (armed with [`crate::host::timer_arm`]) fell due. Default: nothing.
    fn on_timer(&mut self, key: u64) {
        let _ = key;
    }

    /// The state of `site`, for listing. Default: none.
    fn list_state(&mut self, site: u32) -> Vec<StateEntry> {
        let _ = site;
        Vec::new()
    }

    /// Resets the state of `site` (`elem` 0: all of it; else that element's). Default: nothing.
    fn reset_state(&mut self, site: u32, elem: u32) {
        let _ = (site, elem);
    }

    /// The whole state as a blob for the next version after a hot swap. Default: empty.
    fn export_state(&mut self) -> Vec<u8> {
        Vec::new()
    }

    /// Takes over the state a previous version exported. Default: refuses ("no state
    /// transfer"), so the new version starts fresh.
    fn import_state(&mut self, blob: &[u8]) -> Result<(), String> {
        let _ = blob;
        Err("no state transfer".to_string())
    }
}

/// What the export macro calls: the batch calls with their output buffers.
pub mod glue {
    use super::Plugin;
    use crate::{Packets, StatementResult, Verdict};
    pub use alloc::string::String;
    pub use alloc::vec::Vec;

    /// `matches` with one byte per packet of `count` (0 for packets the buffer does not hold).
    pub fn matches<P: Plugin>(
        p: &mut P,
        site: u32,
        batch: &[u8],
        count: u32,
        stride: u32,
    ) -> Vec<u8> {
        let pkts = Packets::new(batch, count, stride);
        // One allocation, the one returned; bool and u8 0/1 have the same bytes, but the
        // plugin writes bools, so convert in place.
        let mut out = alloc::vec![false; count as usize];
        p.matches(site, pkts, &mut out[..pkts.len()]);
        out.into_iter().map(u8::from).collect()
    }

    /// Most packets of a `matches-first` call (the bits of a `u64`).
    pub const FIRST_MAX: usize = 64;

    /// `fast-match.first-window`: [`Plugin::first_window`], or the whole window.
    pub fn first_window<P: Plugin>(p: &mut P) -> u32 {
        p.first_window().unwrap_or_else(|| p.describe().window)
    }

    /// `fast-match.matches-first`: (hits, more) as bitmasks, bit i for packet i; no
    /// allocation. Packets past 64 or past what the buffer holds get no bit.
    #[inline]
    pub fn matches_first<P: Plugin>(
        p: &mut P,
        site: u32,
        batch: &[u8],
        count: u32,
        stride: u32,
    ) -> (u64, u64) {
        let pkts = Packets::new(batch, count.min(FIRST_MAX as u32), stride);
        let n = pkts.len();
        let keep = if n >= 64 { !0 } else { (1u64 << n) - 1 };
        let (hits, need) = p.matches_first_bits(site, pkts);
        (hits & !need & keep, need & keep)
    }

    /// Largest batch area a plugin keeps (`area-match.batch-area`): 64 records of the largest
    /// stride (32 + 1514 bytes, rounded up to 8) fit.
    pub const AREA_MAX: u32 = 64 * 1552;

    /// `area-match.batch-area`: `area` grown to `size` bytes (zeroed), and its address in
    /// linear memory; 0 for a size over [`AREA_MAX`]. The area is only grown, here: the host
    /// asks once per instance, and the address stays valid until it asks again.
    pub fn batch_area(area: &mut Vec<u8>, size: u32) -> u32 {
        if size > AREA_MAX {
            return 0;
        }
        if area.len() < size as usize {
            area.resize(size as usize, 0);
        }
        // On wasm32 a pointer is the u32 address the host writes at (elsewhere, for tests,
        // only its low bits: nothing reads it there).
        area.as_ptr() as usize as u32
    }

    /// `apply` with one verdict per packet of `count` (`Continue` for packets the buffer does
    /// not hold), or none when every packet continues and there is no edit
    /// (`statement-result.verdicts` empty: nothing to copy or check per packet).
    pub fn apply<P: Plugin>(
        p: &mut P,
        site: u32,
        batch: &[u8],
        count: u32,
        stride: u32,
    ) -> StatementResult {
        apply_with(p, &mut Vec::new(), site, batch, count, stride)
    }

    /// [`apply`] with the verdicts written into `scratch` (kept by the export macro from call
    /// to call, so a call that only counts allocates nothing).
    pub fn apply_with<P: Plugin>(
        p: &mut P,
        scratch: &mut Vec<Verdict>,
        site: u32,
        batch: &[u8],
        count: u32,
        stride: u32,
    ) -> StatementResult {
        let pkts = Packets::new(batch, count, stride);
        scratch.clear();
        scratch.resize(count as usize, Verdict::Continue);
        let mut edits = Vec::new();
        p.apply(site, pkts, &mut scratch[..pkts.len()], &mut edits);
        let verdicts = if edits.is_empty() && scratch.iter().all(|v| matches!(v, Verdict::Continue))
        {
            Vec::new()
        } else {
            scratch.clone()
        };
        StatementResult { verdicts, edits }
    }
}

#[cfg(test)]
mod tests {
    use super::glue;
    use super::*;
    use crate::packets::testing::{TestPkt, batch};

    #[derive(Default)]
    struct Nothing;

    impl Plugin for Nothing {
        fn describe(&self) -> Info {
            Info::new("nothing", "0", &[Kind::MatchExpr, Kind::Statement], 0)
        }
    }

    #[test]
    fn defaults() {
        let mut p = Nothing;
        assert_eq!(p.configure(0, Kind::MatchExpr, &[]), Ok(()));
        let (buf, count, stride) = batch(&[TestPkt::default(), TestPkt::default()], 0);
        assert_eq!(glue::matches(&mut p, 0, &buf, count, stride), [0, 0]);
        let r = glue::apply(&mut p, 0, &buf, count, stride);
        assert!(
            r.verdicts.is_empty(),
            "every packet continues: no verdict list"
        );
        assert!(r.edits.is_empty());
        // count larger than the buffer: still one result per packet of count.
        assert_eq!(glue::matches(&mut p, 0, &buf, 3, stride), [0, 0, 0]);
        assert!(p.list_state(0).is_empty());
        assert!(p.export_state().is_empty());
        assert_eq!(p.import_state(b"x"), Err("no state transfer".to_string()));
        assert!(!p.describe().state_transfer);
        assert_eq!(glue::first_window(&mut p), 0, "the whole window");
        assert_eq!(glue::matches_first(&mut p, 0, &buf, count, stride), (0, 0));
    }

    /// Matches packets longer than 50 bytes; with a first window of 8 bytes it asks for more
    /// when the first byte is 0xff.
    #[derive(Default)]
    struct Long;

    impl Plugin for Long {
        fn describe(&self) -> Info {
            Info::new("long", "0", &[Kind::MatchExpr], 64)
        }
        fn matches(&mut self, _: u32, pkts: Packets<'_>, out: &mut [bool]) {
            for (p, o) in pkts.iter().zip(out) {
                *o = p.len > 50;
            }
        }
        fn first_window(&self) -> Option<u32> {
            Some(8)
        }
        fn matches_first(
            &mut self,
            s: u32,
            pkts: Packets<'_>,
            out: &mut [bool],
            more: &mut [bool],
        ) {
            self.matches(s, pkts, out);
            for (p, m) in pkts.iter().zip(more) {
                *m = p.bytes.first() == Some(&0xff);
            }
        }
    }

    #[test]
    fn matches_first_answers_with_bitmasks() {
        let mut p = Long;
        assert_eq!(glue::first_window(&mut p), 8);
        let pkt = |len: usize, first: u8| TestPkt {
            frame: alloc::vec![first; len],
            ..Default::default()
        };
        let pkts = [pkt(60, 0), pkt(20, 0), pkt(60, 0xff), pkt(51, 1)];
        let (buf, count, stride) = batch(&pkts, 8);
        // Packet 2 asks for more: its answer bit is cleared.
        assert_eq!(
            glue::matches_first(&mut p, 0, &buf, count, stride),
            (0b1001, 0b0100)
        );
        // 70 packets: only the first 64 get bits.
        let many: alloc::vec::Vec<TestPkt> = (0..70).map(|_| pkt(60, 0)).collect();
        let (buf, count, stride) = batch(&many, 8);
        assert_eq!(glue::matches_first(&mut p, 0, &buf, count, stride), (!0, 0));
        // A count past the buffer: bits for the packets it holds only.
        let (buf, _, stride) = batch(&pkts[..2], 8);
        assert_eq!(glue::matches_first(&mut p, 0, &buf, 5, stride), (0b01, 0));
    }

    #[test]
    fn batch_area_grows_once_and_refuses_too_much() {
        let mut area = Vec::new();
        let a = glue::batch_area(&mut area, 6144);
        assert_eq!(area.len(), 6144);
        assert_ne!(a, 0);
        // The same size again (or a smaller one): the same buffer.
        assert_eq!(glue::batch_area(&mut area, 6144), a);
        assert_eq!(glue::batch_area(&mut area, 100), a);
        assert_eq!(area.len(), 6144);
        assert_eq!(glue::batch_area(&mut area, glue::AREA_MAX + 1), 0);
        assert_eq!(area.len(), 6144);
        // What the host wrote there is what matches-first-at reads (the same glue).
        let mut p = Long;
        let pkts = [TestPkt {
            frame: alloc::vec![0; 60],
            ..Default::default()
        }];
        let (buf, count, stride) = batch(&pkts, 8);
        area[..buf.len()].copy_from_slice(&buf);
        assert_eq!(glue::matches_first(&mut p, 0, &area, count, stride), (1, 0));
    }
}
