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
        self.remove_many(&[h]).pop()
    }

    /// Remove the elements behind `hs` (handles not stored, and repeats, are skipped) in one
    /// pass over every bucket, and return them in insertion order. Cost: one walk of the
    /// insertion order plus, per bucket, the blocks from the first cut rule to its last
    /// non-zero block; the kernel's `pipapo_drop` runs once per element instead.
    pub fn remove_many(&mut self, hs: &[ElemHandle]) -> Vec<Elem<X>> {
        let mut gone = vec![false; self.slab.len()];
        let mut any = false;
        for h in hs {
            if self.slab.get(h.0 as usize).is_some_and(|s| s.is_some()) {
                gone[h.0 as usize] = true;
                any = true;
            }
        }
        if !any {
            return Vec::new();
        }
        self.note_remove((0..gone.len() as u32).filter(|&h| gone[h as usize]));
        // Rule spans to cut per field, merged where gone elements are adjacent.
        let nf = self.fields.len();
        let mut cuts: Vec<Vec<(usize, usize)>> = vec![Vec::new(); nf];
        let mut pos = vec![0usize; nf];
        for &o in &self.order {
            let nr = self.nrules_of(o);
            for i in 0..nf {
                let n = nr[i] as usize;
                if gone[o as usize] && n > 0 {
                    match cuts[i].last_mut() {
                        Some(c) if c.0 + c.1 == pos[i] => c.1 += n,
                        _ => cuts[i].push((pos[i], n)),
                    }
                }
                pos[i] += n;
            }
        }
        let last = nf - 1;
        for i in 0..nf {
            let f: &mut Field = &mut self.fields[i];
            f.cut_rules(&cuts[i]);
            if i < last {
                // Mapping slots point at rules of the next field: move them down by the
                // next field's rules cut below them.
                let next = &cuts[i + 1];
                let (mut k, mut below) = (0, 0u32);
                for m in &mut f.mt {
                    while k < next.len() && (next[k].0 as u32) < m.to {
                        below += next[k].1 as u32;
                        k += 1;
                    }
                    m.to -= below;
                }
            }
            f.resize(f.rules);
            f.adjust_bits(self.policy);
        }
        let mut out = Vec::new();
        for &o in &self.order {
            if gone[o as usize]
                && let Some(slot) = self.slab[o as usize].take()
            {
                let (start, end) = self.keys_of(o);
                out.push(Elem {
                    start: start.into(),
                    end: end.into(),
                    data: slot.data,
                    expires: self.expires_of(o),
                    ext: slot.ext,
                });
                if let Some(t) = self.expiry.get_mut(o as usize) {
                    *t = u64::MAX;
                }
                self.free.push(o);
            }
        }
        self.order.retain(|&o| !gone[o as usize]);
        self.bblocks_max = self.fields.iter().map(|f| f.bblocks).max().unwrap_or(0);
        out
    }

    /// Give back what the set holds beyond its elements: the lookup tables' growth slack and
    /// every buffer's spare capacity (as a set just built at once; the next insertion grows
    /// them again). Lookups are unchanged.
    pub fn shrink_to_fit(&mut self) {
        for f in &mut self.fields {
            f.shrink_to_fit();
        }
        self.slab.shrink_to_fit();
        self.keys.shrink_to_fit();
        self.nrules.shrink_to_fit();
        self.expiry.shrink_to_fit();
        self.free.shrink_to_fit();
        self.order.shrink_to_fit();
    }

    /// Remove every element (`flush set`). Group widths restart from the policy's initial
    /// width, as the tables are empty.
    pub fn flush(&mut self) {
        let bb = if self.policy == super::GroupPolicy::Fixed4 {
            4
        } else {
            8
        };
        self.touched();
        for f in &mut self.fields {
            *f = Field::new(f.len, bb);
        }
        self.slab.clear();
        self.keys.clear();
        self.nrules.clear();
        self.expiry.clear();
        self.timed = false;
        self.free.clear();
        self.order.clear();
        self.bblocks_max = 0;
    }

    /// Remove every element expired at `now` in one pass ([`Pipapo::remove_many`]); returns
    /// how many were removed. The kernel runs this (`pipapo_gc`) on the clone at commit.
    pub fn gc(&mut self, now: u64) -> usize {
        let dead: Vec<ElemHandle> = self
            .order
            .iter()
            .filter(|&&h| !self.live(h, now))
            .map(|&h| ElemHandle(h))
            .collect();
        self.remove_many(&dead).len()
    }
}
