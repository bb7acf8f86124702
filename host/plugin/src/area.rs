//! The batch area (WIT `area-match`): the host writes a match batch's records straight into
//! the plugin's linear memory, at the buffer the plugin gave with `batch-area`, while the
//! call's arguments are lowered. A `list<u8>` argument costs more: a call of the plugin's
//! `cabi_realloc`, a copy of the host's buffer into the new block, and a free in the plugin
//! when the call ends (perf/RESULTS.md, "Geneve match: batch area").
//!
//! The component API does not hand out a component's core memory; the one place it is
//! reachable is the lowering of an argument ([`Lower`], whose [`LowerContext`] holds the
//! memory of the function's canonical options). [`AreaCount`] is the `count` argument of
//! `matches-first-at`: it lowers as the `u32` it is, and writes the records first. Its
//! [`ComponentType`] and [`Lower`] implementations are `unsafe impl`s (wasmtime's traits are
//! `unsafe`: the ABI description must match the lowering), the only unsafe code of this
//! crate; the safe twin is `fast-match.matches-first` with a `list<u8>`
//! (`Runtime::set_batch_area(false)`), and tests/area.rs checks that both answer the same.

#![allow(unsafe_code)]

use std::mem::MaybeUninit;

use wasmtime::Store;
use wasmtime::component::__internal::{
    CanonicalAbiInfo, InstanceType, InterfaceType, LowerContext,
};
use wasmtime::component::{ComponentType, Func, Lower, TypedFunc};
use wasp_core::ExtPacket;

use crate::bindings::StoreState;
use crate::pack;

/// Where a plugin's batch area is in its linear memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Area {
    /// Its address (the offset in linear memory).
    pub(crate) addr: usize,
    /// Its size in bytes, as the host asked for it.
    pub(crate) size: usize,
}

/// The `count` argument of `area-match.matches-first-at`: `pkts.len()`, and while it is
/// lowered, the records of `pkts` (the layout of `pack::pack`, `window` bytes of each frame,
/// `stride` bytes each) written at the start of `area`.
pub(crate) struct AreaCount<'a, 'p> {
    pub(crate) pkts: &'a [ExtPacket<'p>],
    pub(crate) window: u32,
    pub(crate) stride: usize,
    pub(crate) area: Area,
}

impl AreaCount<'_, '_> {
    /// Write the records into `mem` (the plugin's whole linear memory). Errors (the call is
    /// then malformed, as for a result out of range): the records do not fit in the area the
    /// host asked for, or the area is not inside the memory.
    fn write(&self, mem: &mut [u8]) -> wasmtime::Result<u32> {
        let need = self.pkts.len() * self.stride;
        let count = u32::try_from(self.pkts.len())?;
        if need > self.area.size {
            wasmtime::bail!(
                "{need} bytes of records for a batch area of {}",
                self.area.size
            );
        }
        let Some(dst) = mem
            .get_mut(self.area.addr..)
            .and_then(|m| m.get_mut(..need))
        else {
            wasmtime::bail!(
                "batch area at {:#x} ({} bytes) is outside the plugin's {}-byte memory",
                self.area.addr,
                self.area.size,
                mem.len()
            );
        };
        pack::pack_into(dst, self.pkts, self.window, self.stride);
        Ok(count)
    }
}

// SAFETY: `AreaCount` claims to be exactly a `u32` to the canonical ABI: the same lowered
// representation (`Lower`), ABI (size, alignment, flat count) and type check as `u32`'s own
// implementation, and its lowering below ends in `u32`'s lowering of the count. Writing the
// records into linear memory beforehand goes through the safe, bounds-checked slice
// `LowerContext::as_slice_mut` and changes nothing the ABI describes.
unsafe impl ComponentType for AreaCount<'_, '_> {
    type Lower = <u32 as ComponentType>::Lower;

    const ABI: CanonicalAbiInfo = <u32 as ComponentType>::ABI;

    const MAY_REQUIRE_REALLOC: bool = false;

    fn typecheck(ty: &InterfaceType, types: &InstanceType<'_>) -> wasmtime::Result<()> {
        <u32 as ComponentType>::typecheck(ty, types)
    }
}

// SAFETY: both methods lower the value as `u32` does (see the `ComponentType` impl above),
// after writing the records through a bounds-checked slice of the memory.
unsafe impl Lower for AreaCount<'_, '_> {
    fn linear_lower_to_flat<T>(
        &self,
        cx: &mut LowerContext<'_, T>,
        ty: InterfaceType,
        dst: &mut MaybeUninit<Self::Lower>,
    ) -> wasmtime::Result<()> {
        let count = self.write(cx.as_slice_mut())?;
        count.linear_lower_to_flat(cx, ty, dst)
    }

    fn linear_lower_to_memory<T>(
        &self,
        cx: &mut LowerContext<'_, T>,
        ty: InterfaceType,
        offset: usize,
    ) -> wasmtime::Result<()> {
        let count = self.write(cx.as_slice_mut())?;
        count.linear_lower_to_memory(cx, ty, offset)
    }
}

/// `area-match.matches-first-at`'s parameters: (site, count writing the batch, stride).
pub(crate) type MatchesAtParams<'a, 'p> = (u32, AreaCount<'a, 'p>, u32);

/// `area-match.matches-first-at`'s result: (hits, more) bitmasks.
pub(crate) type MatchesAtResults = ((u64, u64),);

/// Check that `f` is `matches-first-at` as [`typed`] takes it; once per instance.
pub(crate) fn check(f: Func, store: &Store<StoreState>) -> wasmtime::Result<()> {
    f.typed::<MatchesAtParams<'_, '_>, MatchesAtResults>(store)
        .map(drop)
}

/// `f` as a typed function without checking its type again (`Func::typed` costs about 30 ns
/// per call, 1 ns per packet at vector 32: perf/RESULTS.md, "Geneve match: batch area").
pub(crate) fn typed<'a, 'p>(f: Func) -> TypedFunc<MatchesAtParams<'a, 'p>, MatchesAtResults> {
    // SAFETY: `f` is the `matches-first-at` of a `Live`, which `Plugin::instantiate` stored only
    // after `check` accepted it for this instance with these very types (lifetimes do not enter
    // the component type).
    unsafe { TypedFunc::new_unchecked(f) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkt(frame: &[u8]) -> ExtPacket<'_> {
        ExtPacket {
            frame,
            len: frame.len() as u32,
            iif: 3,
            mark: 9,
            elem: 0,
            l3: 14,
            l4: 34,
            l4proto: 17,
            nfproto: 2,
            iftype: 1,
        }
    }

    #[test]
    fn records_are_those_of_the_list_buffer() {
        let (a, b) = ((0..100u8).collect::<Vec<_>>(), vec![7u8; 20]);
        let pkts = [pkt(&a), pkt(&b)];
        let stride = pack::stride(64);
        let mut list = Vec::new();
        pack::pack(&mut list, &pkts, 64, stride);
        // Memory with leftovers of an earlier batch where the area is.
        let mut mem = vec![0xee; 4096];
        let c = AreaCount {
            pkts: &pkts,
            window: 64,
            stride,
            area: Area {
                addr: 1000,
                size: 64 * stride,
            },
        };
        assert_eq!(c.write(&mut mem).unwrap(), 2);
        assert_eq!(mem[1000..1000 + list.len()], list[..]);
        assert!(mem[..1000].iter().all(|b| *b == 0xee));
        assert!(mem[1000 + list.len()..].iter().all(|b| *b == 0xee));
    }

    #[test]
    fn an_area_out_of_memory_or_too_small_is_an_error() {
        let f = [0u8; 60];
        let pkts = [pkt(&f); 3];
        let stride = pack::stride(64);
        let mut mem = vec![0u8; 1024];
        let at = |addr, size| AreaCount {
            pkts: &pkts,
            window: 64,
            stride,
            area: Area { addr, size },
        };
        // Past the end of memory, or partly.
        assert!(at(4096, 3 * stride).write(&mut mem).is_err());
        assert!(at(1024 - 2 * stride, 3 * stride).write(&mut mem).is_err());
        assert!(at(usize::MAX - 10, 3 * stride).write(&mut mem).is_err());
        // An area smaller than the records.
        assert!(at(0, 2 * stride).write(&mut mem).is_err());
        assert!(mem.iter().all(|b| *b == 0), "nothing written on error");
        assert_eq!(
            at(1024 - 3 * stride, 3 * stride).write(&mut mem).unwrap(),
            3
        );
    }
}
