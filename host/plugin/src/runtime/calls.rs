//! The packet calls: for each vector, one batched call per use site (the packets packed into
//! one flat buffer, the WIT layout), its result checked before it is used; matches through a
//! plugin's `fast-match` export (and its batch area) when it has one.

use wasp_core::{ExtEdit, ExtKind, ExtPacket, ExtVerdict, Extensions, Fallback};

use super::Runtime;
use super::containment::{CallError, fail_apply, fail_matches};
use crate::area::{self, AreaCount};
use crate::error::FailureReason;
use crate::host::{Live, MatchesFirstParams, MatchesFirstResults};
use crate::pack;

impl Runtime {
    /// Check and fetch a site for a packet call.
    fn call_site(&self, site: u32, want: &[ExtKind]) -> Option<(usize, Fallback)> {
        let s = self.site(site)?;
        want.contains(&s.kind).then_some((s.slot, s.fallback))
    }

    /// One batched call on the slot's instance: pack `pkts` into the flat buffer (the WIT
    /// layout, `window` bytes of each frame), then run `call(live, buffer, count, stride)`
    /// under [`Runtime::guarded`]. The buffer is reused across calls.
    fn call_batch<R>(
        &mut self,
        slot: usize,
        pkts: &[ExtPacket<'_>],
        window: u32,
        call: impl FnOnce(&mut Live, &[u8], u32, u32) -> wasmtime::Result<R>,
    ) -> Result<R, CallError> {
        let stride = pack::batch_stride(pkts, window, pack::stride(window));
        let mut buf = std::mem::take(&mut self.buf);
        pack::pack(&mut buf, pkts, window, stride);
        let n = pkts.len() as u32;
        let r = self.guarded(slot, |live| call(live, &buf, n, stride as u32));
        self.buf = buf;
        r
    }

    /// `plugin.matches` on `pkts` with the plugin's whole window.
    fn matches_whole(
        &mut self,
        slot: usize,
        site: u32,
        pkts: &[ExtPacket<'_>],
        out: &mut [bool],
    ) -> Result<(), CallError> {
        let window = self.slots[slot].plugin.info().window;
        let res = self.call_batch(slot, pkts, window, |live, buf, n, stride| {
            live.bindings
                .wasp_plugin_plugin()
                .call_matches(&mut live.store, site, buf, n, stride)
        })?;
        pack::check_matches(&res, out).map_err(|m| CallError::Failed(FailureReason::Malformed, m))
    }

    /// `fast-match.matches-first` on `pkts` (at most 64) with the plugin's first window, then
    /// `plugin.matches` with the whole window for the packets it marked `more`.
    fn matches_first(
        &mut self,
        slot: usize,
        site: u32,
        pkts: &[ExtPacket<'_>],
        first: u32,
        out: &mut [bool],
    ) -> Result<(), CallError> {
        if self.batch_area
            && self.slots[slot]
                .live
                .as_ref()
                .is_some_and(|l| l.area_fns.is_some() && l.area.is_none())
        {
            // The first match of this instance: ask for its batch area (a failure is this
            // call's).
            self.guarded(slot, |live| live.ask_area(first))?;
        }
        let area = self.batch_area
            && self.slots[slot]
                .live
                .as_ref()
                .is_some_and(|l| l.area().is_some());
        let (hits, more) = if area {
            let stride = pack::batch_stride(pkts, first, pack::stride(first));
            self.guarded(slot, |live| {
                let Some((f, area)) = live.area() else {
                    wasmtime::bail!("area-match is not exported");
                };
                let f = area::typed(f);
                let count = AreaCount {
                    pkts,
                    window: first,
                    stride,
                    area,
                };
                Ok(f.call(&mut live.store, (site, count, stride as u32))?.0)
            })?
        } else {
            self.call_batch(slot, pkts, first, |live, buf, n, stride| {
                let f = live
                    .matches_first
                    .ok_or_else(|| wasmtime::format_err!("matches-first is not exported"))?;
                // The type was checked at load; this repeats it (a few comparisons).
                let f = f.typed::<MatchesFirstParams<'_>, MatchesFirstResults>(&live.store)?;
                Ok(f.call(&mut live.store, (site, buf, n, stride))?.0)
            })?
        };
        pack::check_first(hits, more, out)
            .map_err(|m| CallError::Failed(FailureReason::Malformed, m))?;
        if more == 0 {
            return Ok(());
        }
        let again: Vec<usize> = (0..pkts.len()).filter(|i| more >> i & 1 == 1).collect();
        let sub: Vec<ExtPacket<'_>> = again.iter().map(|&i| pkts[i]).collect();
        let mut answers = vec![false; sub.len()];
        self.matches_whole(slot, site, &sub, &mut answers)?;
        for (&i, a) in again.iter().zip(answers) {
            out[i] = a;
        }
        Ok(())
    }
}

impl Extensions for Runtime {
    fn matches(&mut self, site: u32, pkts: &[ExtPacket<'_>], out: &mut [bool]) {
        self.last_failed = false;
        let Some((slot, fallback)) = self.call_site(site, &[ExtKind::Match]) else {
            return fail_matches(out, Fallback::Absent);
        };
        if pkts.is_empty() {
            return;
        }
        if self.backing_off(site, slot) {
            self.last_failed = true;
            return fail_matches(out, fallback);
        }
        let r = match self.slots[slot].plugin.info().first_window {
            Some(first) if self.fast_match && pkts.len() <= pack::FIRST_MAX => {
                self.matches_first(slot, site, pkts, first, out)
            }
            _ => self.matches_whole(slot, site, pkts, out),
        };
        match r {
            Ok(()) => self.call_ok(site),
            Err(e) => {
                fail_matches(out, fallback);
                self.call_failed(slot, e, &format!("matches at use site {site}"));
                self.site_failed(site);
            }
        }
    }

    fn apply(
        &mut self,
        site: u32,
        pkts: &[ExtPacket<'_>],
        verdicts: &mut [ExtVerdict],
        edits: &mut Vec<(usize, ExtEdit)>,
    ) {
        self.last_failed = false;
        let Some((slot, fallback)) = self.call_site(site, &[ExtKind::Statement, ExtKind::Stateful])
        else {
            return fail_apply(verdicts, Fallback::Absent);
        };
        if pkts.is_empty() {
            return;
        }
        if self.backing_off(site, slot) {
            self.last_failed = true;
            return fail_apply(verdicts, fallback);
        }
        let window = self.slots[slot].plugin.info().window;
        let r = self
            .call_batch(slot, pkts, window, |live, buf, n, stride| {
                live.bindings
                    .wasp_plugin_plugin()
                    .call_apply(&mut live.store, site, buf, n, stride)
            })
            .and_then(|res| {
                pack::check_apply(&res.verdicts, res.edits, pkts, verdicts, edits)
                    .map_err(|m| CallError::Failed(FailureReason::Malformed, m))
            });
        match r {
            Ok(()) => self.call_ok(site),
            Err(e) => {
                fail_apply(verdicts, fallback);
                self.call_failed(slot, e, &format!("apply at use site {site}"));
                self.site_failed(site);
            }
        }
    }

    fn advance(&mut self, now_ns: u64) {
        self.advance_clocks(now_ns, now_ns);
    }

    fn last_call_failed(&mut self) -> bool {
        self.last_failed
    }
}
