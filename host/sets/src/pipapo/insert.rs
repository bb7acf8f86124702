//! Element insertion with the kernel's overlap rules (`nft_pipapo_insert`).

use super::expand::{Prefix, be_value, expand};
use super::field::Map;
use super::{ElemHandle, InsertMode, NewElem, Pipapo, SetError, Slot};
use crate::grow::room;

/// `NFT_PIPAPO_RULE0_MAX` on 64-bit: most rules in one field.
pub const RULE0_MAX: usize = (1 << 31) - 256;

impl<X: Clone> Pipapo<X> {
    /// Insert an element, as the kernel does in a transaction whose timestamp is `now`.
    ///
    /// Order of checks: key lengths ([`SetError::KeyLength`]); every field's start <= end
    /// ([`SetError::InvalidRange`]); then the overlap check on the live (not expired at `now`)
    /// elements: the start point inside an element that has the same start and end is
    /// [`SetError::Exists`] (returned as `Ok` of that element for [`InsertMode::Add`]), inside
    /// any other element [`SetError::Overlap`]; the end point inside any element is
    /// [`SetError::Overlap`]. A new element that contains older ones without covering either
    /// of its corners is accepted and shadowed by them where they overlap (oldest wins).
    pub fn insert(
        &mut self,
        e: NewElem<'_, X>,
        mode: InsertMode,
        now: u64,
    ) -> Result<ElemHandle, SetError> {
        let start = e.start;
        let end = e.end.unwrap_or(start);
        self.check_len(start)?;
        self.check_len(end)?;
        for (i, sp) in self.field_spans().enumerate() {
            if end[sp.clone()] < start[sp] {
                return Err(SetError::InvalidRange { field: i });
            }
        }
        if let Some(h) = self.lookup(start, now) {
            let d = self.elem(h).ok_or(SetError::NotFound)?;
            if d.start == start && d.end == end {
                return match mode {
                    InsertMode::Add => Ok(h),
                    InsertMode::Create => Err(SetError::Exists(h)),
                };
            }
            return Err(SetError::Overlap(h));
        }
        if let Some(h) = self.lookup(end, now) {
            return Err(SetError::Overlap(h));
        }

        let rules: Vec<Vec<Prefix>> = self
            .field_spans()
            .map(|sp| {
                let bits = (sp.len() * 8) as u32;
                expand(be_value(&start[sp.clone()]), be_value(&end[sp]), bits)
            })
            .collect();
        if self
            .fields
            .iter()
            .zip(&rules)
            .any(|(f, r)| f.rules + r.len() > RULE0_MAX)
        {
            return Err(SetError::Full);
        }
        let h = match self.free.pop() {
            Some(h) => h,
            None => {
                let h = u32::try_from(self.slab.len()).map_err(|_| SetError::Full)?;
                room(&mut self.slab, 1);
                room(&mut self.keys, 2 * self.key_len);
                room(&mut self.nrules, self.fields.len());
                self.slab.push(None);
                if self.timed {
                    room(&mut self.expiry, 1);
                    self.expiry.push(u64::MAX);
                }
                self.keys.resize(self.keys.len() + 2 * self.key_len, 0);
                self.nrules.resize(self.nrules.len() + self.fields.len(), 0);
                h
            }
        };
        let firsts: Vec<usize> = self.fields.iter().map(|f| f.rules).collect();
        let last = self.fields.len() - 1;
        for (i, f) in self.fields.iter_mut().enumerate() {
            let n = rules[i].len();
            f.resize(f.rules + n);
            for (k, p) in rules[i].iter().enumerate() {
                f.set_rule(f.rules + k, *p);
            }
            f.rules += n;
            if i < last {
                let slot = Map {
                    to: firsts[i + 1] as u32,
                    n: rules[i + 1].len() as u32,
                };
                room(&mut f.mt, n);
                f.mt.extend(std::iter::repeat_n(slot, n));
            } else {
                room(&mut f.ends, n);
                f.ends.extend(std::iter::repeat_n(h, n));
            }
            f.adjust_bits(self.policy);
        }
        self.bblocks_max = self.fields.iter().map(|f| f.bblocks).max().unwrap_or(0);
        self.slab[h as usize] = Some(Slot {
            data: e.data,
            ext: e.ext,
        });
        let (kl, nf) = (self.key_len, self.fields.len());
        let at = h as usize * 2 * kl;
        self.keys[at..at + kl].copy_from_slice(start);
        self.keys[at + kl..at + 2 * kl].copy_from_slice(end);
        for (i, r) in rules.iter().enumerate() {
            // `expand` gives at most 2 * 128 - 2 prefixes.
            self.nrules[h as usize * nf + i] = u8::try_from(r.len()).unwrap_or(u8::MAX);
        }
        if let Some(t) = e.expires {
            if !self.timed {
                // The first element with an expiry: every slot gets one.
                self.expiry = vec![u64::MAX; self.slab.len()];
                self.timed = true;
            }
            self.expiry[h as usize] = t;
        } else if let Some(t) = self.expiry.get_mut(h as usize) {
            *t = u64::MAX;
        }
        room(&mut self.order, 1);
        self.order.push(h);
        self.note_insert(h);
        Ok(ElemHandle(h))
    }
}
