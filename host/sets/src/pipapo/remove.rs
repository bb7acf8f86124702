//! Deletion, get, flush and garbage collection (`nft_pipapo_deactivate`, `pipapo_drop`,
//! `nft_pipapo_flush`, `pipapo_gc`).

use super::field::Field;
use super::{Elem, ElemHandle, Pipapo, SetError};

impl<X: Clone> Pipapo<X> {
    /// The live element that contains the point `start` (kernel `nft_pipapo_get`: keyed by the
    /// start point only; a sub-range's start inside an element finds that element).
    /// Errors: [`SetError::KeyLength`], [`SetError::NotFound`].
    pub fn get(&self, start: &[u8], now: u64) -> Result<ElemHandle, SetError> {
        self.check_len(start)?;
        self.lookup_scalar(start, now).ok_or(SetError::NotFound)
    }

    /// Delete the live element that contains the point `start` (the kernel's deactivate looks
    /// up the start key only; the request's end is not compared) and return it.
    /// Errors: [`SetError::KeyLength`], [`SetError::NotFound`] (also for expired elements).
    pub fn delete(&mut self, start: &[u8], now: u64) -> Result<Elem<X>, SetError> {
        let h = self.get(start, now)?;
        self.remove(h).ok_or(SetError::NotFound)
    }

    /// Remove the element behind `h` (whatever its expiry) and return it; `None` when `h` is
    /// not stored. Its rules are cut out of every field; later rules move down, so rule order
    /// stays insertion order.
    pub fn remove(&mut self, h: ElemHandle) -> Option<Elem<X>> {
        let e = self.slab.get_mut(h.0 as usize)?.take()?;
        let pos = self.order.iter().position(|&x| x == h.0)?;
        let last = self.fields.len() - 1;
        for i in 0..self.fields.len() {
            let at: usize = self.order[..pos]
                .iter()
                .map(|&o| self.slab[o as usize].as_ref().map_or(0, |x| x.nrules[i]) as usize)
                .sum();
            let n = e.nrules[i] as usize;
            let f: &mut Field = &mut self.fields[i];
            f.cut_rules(at, n);
            if i < last {
                let gone = e.nrules[i + 1];
                for m in &mut f.mt[at..] {
                    m.to -= gone;
                }
            }
            f.resize(f.rules);
            f.adjust_bits(self.policy);
        }
        self.order.remove(pos);
        self.expiry[h.0 as usize] = u64::MAX;
        self.free.push(h.0);
        self.bblocks_max = self.fields.iter().map(|f| f.bblocks).max().unwrap_or(0);
        Some(e)
    }

    /// Remove every element (`flush set`). Group widths restart from the policy's initial
    /// width, as the tables are empty.
    pub fn flush(&mut self) {
        let bb = if self.policy == super::GroupPolicy::Fixed4 {
            4
        } else {
            8
        };
        for f in &mut self.fields {
            *f = Field::new(f.len, bb);
        }
        self.slab.clear();
        self.expiry.clear();
        self.timed = false;
        self.free.clear();
        self.order.clear();
        self.bblocks_max = 0;
    }

    /// Remove every element expired at `now`; returns how many were removed.
    pub fn gc(&mut self, now: u64) -> usize {
        let dead: Vec<u32> = self
            .order
            .iter()
            .copied()
            .filter(|&h| self.expiry[h as usize] <= now)
            .collect();
        for &h in &dead {
            self.remove(ElemHandle(h));
        }
        dead.len()
    }
}
