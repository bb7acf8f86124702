//! A named set's elements as the model keeps them ([`crate::model::SetDecl::elements`]):
//! listed in the model, or held by something that keeps them anyway (a running program's
//! compiled set, [`HeldElements`]) and decoded from it when read.
//!
//! Contract:
//! - Reading is the same either way: [`Elements::iter`] gives every element in the set's
//!   order, [`Elements::len`] counts them. A held element is its key in listed form (a range
//!   that is a prefix is the prefix, a one-value range the value), with no data, counter,
//!   timeout or comment (only elements without them are held), and a [`Span`] that names the
//!   file it came from at line 0.
//! - Changes made while held (an element batch: [`Elements::push`], [`Elements::remove`]) are
//!   kept beside the holder until the model is given the holder's next state
//!   ([`Elements::hold`]); [`Elements::to_mut`] lists the elements in the model for any other
//!   change.

use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::Arc;

use crate::model::{ElemKey, FileId, SetElem};

/// Elements that something outside the model holds and lists on demand (the compiled set of a
/// running program: one copy of each element, not one in the model beside it).
pub trait HeldElements: std::fmt::Debug + Send + Sync {
    /// How many elements it holds.
    fn len(&self) -> usize;

    /// `true` when it holds none.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every element, in the order the set keeps them (for a concatenated set with ranges the
    /// order they were added in, which nft lists; the others are listed sorted).
    fn iter(&self) -> Box<dyn Iterator<Item = SetElem> + '_>;

    /// The element whose bounds are `lo`..=`hi` (each field's low and high bound
    /// concatenated, big-endian, as the model's value bytes), if it holds one.
    fn find(&self, lo: &[u8], hi: &[u8]) -> Option<SetElem>;

    /// The files its elements came from, each once.
    fn files(&self) -> Vec<FileId>;
}

/// Where [`Elements::remove`] took an element from, to put it back ([`Elements::unremove`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// Index in the listed elements.
    Listed(usize),
    /// Index among the elements added since the holder's state was taken.
    Added(usize),
    /// One of the holder's elements.
    Held,
}

/// A set's elements: a list in the model, or a holder and the changes made since its state was
/// taken. Cheap to clone when held (the holder is shared).
#[derive(Clone, Default)]
pub struct Elements(Repr);

#[derive(Clone)]
enum Repr {
    Listed(Vec<SetElem>),
    Held(Held),
}

impl Default for Repr {
    fn default() -> Repr {
        Repr::Listed(Vec::new())
    }
}

#[derive(Clone)]
struct Held {
    base: Arc<dyn HeldElements>,
    /// Elements added since `base` was taken, in order.
    added: Vec<SetElem>,
    /// Elements of `base` removed since, in order.
    removed: Vec<SetElem>,
}

impl Held {
    fn removed_keys(&self) -> HashSet<&ElemKey> {
        self.removed.iter().map(|e| &e.key).collect()
    }
}

impl Elements {
    /// Elements held by `base`, with no change made since.
    pub fn held(base: Arc<dyn HeldElements>) -> Elements {
        Elements(Repr::Held(Held {
            base,
            added: Vec::new(),
            removed: Vec::new(),
        }))
    }

    /// How many elements.
    pub fn len(&self) -> usize {
        match &self.0 {
            Repr::Listed(v) => v.len(),
            Repr::Held(h) => h.base.len() + h.added.len() - h.removed.len(),
        }
    }

    /// `true` when there is none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The holder, when the elements are held.
    pub fn holder(&self) -> Option<&Arc<dyn HeldElements>> {
        match &self.0 {
            Repr::Listed(_) => None,
            Repr::Held(h) => Some(&h.base),
        }
    }

    /// The listed elements; `None` when held (held elements carry no data: a verdict map's
    /// elements are always listed).
    pub fn as_slice(&self) -> Option<&[SetElem]> {
        match &self.0 {
            Repr::Listed(v) => Some(v),
            Repr::Held(_) => None,
        }
    }

    /// The elements added since the holder's state was taken (all of them when listed).
    pub fn added(&self) -> &[SetElem] {
        match &self.0 {
            Repr::Listed(v) => v,
            Repr::Held(h) => &h.added,
        }
    }

    /// Every element in order: listed ones borrowed, held ones decoded.
    pub fn iter(&self) -> Box<dyn Iterator<Item = Cow<'_, SetElem>> + '_> {
        match &self.0 {
            Repr::Listed(v) => Box::new(v.iter().map(Cow::Borrowed)),
            Repr::Held(h) => {
                let gone = h.removed_keys();
                Box::new(
                    h.base
                        .iter()
                        .filter(move |e| gone.is_empty() || !gone.contains(&e.key))
                        .map(Cow::Owned)
                        .chain(h.added.iter().map(Cow::Borrowed)),
                )
            }
        }
    }

    /// Element `i` in order (for held elements a walk up to it).
    pub fn get(&self, i: usize) -> Option<Cow<'_, SetElem>> {
        match &self.0 {
            Repr::Listed(v) => v.get(i).map(Cow::Borrowed),
            Repr::Held(_) => self.iter().nth(i),
        }
    }

    /// The files the elements came from (each once; a held element's is the file that added
    /// it).
    pub fn files(&self) -> Vec<FileId> {
        let mut out: Vec<FileId> = match &self.0 {
            Repr::Listed(v) => v.iter().map(|e| e.span.file).collect(),
            Repr::Held(h) => h
                .base
                .files()
                .into_iter()
                .chain(h.added.iter().map(|e| e.span.file))
                .collect(),
        };
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The elements listed in the model, to change as a list (held ones are decoded once and
    /// listed from now on).
    pub fn to_mut(&mut self) -> &mut Vec<SetElem> {
        if let Repr::Held(_) = &self.0 {
            let listed: Vec<SetElem> = self.iter().map(Cow::into_owned).collect();
            self.0 = Repr::Listed(listed);
        }
        match &mut self.0 {
            Repr::Listed(v) => v,
            Repr::Held(_) => unreachable!("listed above"),
        }
    }

    /// The elements as a list (held ones decoded).
    pub fn into_vec(mut self) -> Vec<SetElem> {
        std::mem::take(self.to_mut())
    }

    /// Add `e` at the end; returns its index when listed (a held set keeps it beside the
    /// holder). A large list that takes one element more grows by an eighth, not twice.
    pub fn push(&mut self, e: SetElem) -> Option<usize> {
        match &mut self.0 {
            Repr::Listed(v) => {
                wasp_sets::grow::room(v, 1);
                v.push(e);
                Some(v.len() - 1)
            }
            Repr::Held(h) => {
                h.added.push(e);
                None
            }
        }
    }

    /// Take back the last [`Elements::push`].
    pub fn unpush(&mut self) {
        match &mut self.0 {
            Repr::Listed(v) => {
                v.pop();
            }
            Repr::Held(h) => {
                h.added.pop();
            }
        }
    }

    /// Remove the element whose bounds are `lo`..=`hi` (as [`HeldElements::find`]); `is` tells
    /// a listed element that has them (a scan of a listed set). Returns it and where it was.
    pub fn remove(
        &mut self,
        lo: &[u8],
        hi: &[u8],
        is: impl Fn(&SetElem) -> bool,
    ) -> Option<(SetElem, Place)> {
        match &mut self.0 {
            Repr::Listed(v) => {
                let i = v.iter().position(is)?;
                Some((v.remove(i), Place::Listed(i)))
            }
            Repr::Held(h) => {
                if let Some(i) = h.added.iter().position(&is) {
                    return Some((h.added.remove(i), Place::Added(i)));
                }
                let e = h.base.find(lo, hi)?;
                if h.removed.iter().any(|r| r.key == e.key) {
                    return None;
                }
                h.removed.push(e.clone());
                Some((e, Place::Held))
            }
        }
    }

    /// Put back an element [`Elements::remove`] took from `at` (the last removal not yet put
    /// back).
    pub fn unremove(&mut self, at: Place, e: SetElem) {
        match (&mut self.0, at) {
            (Repr::Listed(v), Place::Listed(i)) => v.insert(i, e),
            (Repr::Held(h), Place::Added(i)) => h.added.insert(i, e),
            (Repr::Held(h), Place::Held) => {
                h.removed.pop();
            }
            // A place of the other kind: not made by `remove` on these elements.
            (r, _) => {
                let mut v = match std::mem::take(r) {
                    Repr::Listed(v) => v,
                    held => Elements(held).into_vec(),
                };
                v.push(e);
                *r = Repr::Listed(v);
            }
        }
    }

    /// Give back the list's growth room.
    pub fn shrink_to_fit(&mut self) {
        match &mut self.0 {
            Repr::Listed(v) => v.shrink_to_fit(),
            Repr::Held(h) => {
                h.added.shrink_to_fit();
                h.removed.shrink_to_fit();
            }
        }
    }
}

impl From<Vec<SetElem>> for Elements {
    fn from(v: Vec<SetElem>) -> Elements {
        Elements(Repr::Listed(v))
    }
}

impl FromIterator<SetElem> for Elements {
    fn from_iter<I: IntoIterator<Item = SetElem>>(iter: I) -> Elements {
        Elements(Repr::Listed(iter.into_iter().collect()))
    }
}

impl std::fmt::Debug for Elements {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Repr::Listed(v) => v.fmt(f),
            Repr::Held(h) => f
                .debug_struct("Held")
                .field("base", &h.base)
                .field("len", &self.len())
                .field("added", &h.added)
                .field("removed", &h.removed)
                .finish(),
        }
    }
}

/// Equal when they hold the same elements in the same order (the same holder with the same
/// changes is equal without a walk).
impl PartialEq for Elements {
    fn eq(&self, other: &Elements) -> bool {
        if let (Repr::Held(a), Repr::Held(b)) = (&self.0, &other.0)
            && std::ptr::addr_eq(Arc::as_ptr(&a.base), Arc::as_ptr(&b.base))
            && a.added == b.added
            && a.removed == b.removed
        {
            return true;
        }
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for Elements {}

impl<'a> IntoIterator for &'a Elements {
    type Item = Cow<'a, SetElem>;
    type IntoIter = Box<dyn Iterator<Item = Cow<'a, SetElem>> + 'a>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{DataType, KeyPart, Span, Value};

    fn elem(n: u8, file: FileId) -> SetElem {
        let v = Value {
            dtype: DataType::Ipv4Addr,
            bytes: smallvec::smallvec![10, 0, 0, n],
            wildcard: false,
        };
        SetElem::new(
            smallvec::smallvec![KeyPart::Value(v)],
            Span {
                file,
                ..Span::default()
            },
        )
    }

    /// A holder of the elements 10.0.0.1 ..= 10.0.0.n, all of file 7.
    #[derive(Debug)]
    struct Upto(u8);

    impl HeldElements for Upto {
        fn len(&self) -> usize {
            usize::from(self.0)
        }
        fn iter(&self) -> Box<dyn Iterator<Item = SetElem> + '_> {
            Box::new((1..=self.0).map(|n| elem(n, 7)))
        }
        fn find(&self, lo: &[u8], hi: &[u8]) -> Option<SetElem> {
            (lo == hi && lo.len() == 4 && lo[3] >= 1 && lo[3] <= self.0).then(|| elem(lo[3], 7))
        }
        fn files(&self) -> Vec<FileId> {
            vec![7]
        }
    }

    fn keys(e: &Elements) -> Vec<u8> {
        e.iter()
            .map(|e| match &e.key[0] {
                KeyPart::Value(v) => v.bytes[3],
                _ => 0,
            })
            .collect()
    }

    #[test]
    fn held_elements_read_as_listed_ones_through_changes_and_their_undoing() {
        let mut h = Elements::held(Arc::new(Upto(4)));
        assert_eq!(keys(&h), [1, 2, 3, 4]);
        assert_eq!(h.len(), 4);
        assert_eq!(h.push(elem(9, 2)), None);
        let (gone, at) = h.remove(&[10, 0, 0, 2], &[10, 0, 0, 2], |_| false).unwrap();
        assert_eq!((gone.clone(), at), (elem(2, 7), Place::Held));
        // Removed once: not found again.
        assert!(
            h.remove(&[10, 0, 0, 2], &[10, 0, 0, 2], |_| false)
                .is_none()
        );
        assert_eq!(keys(&h), [1, 3, 4, 9]);
        assert_eq!(h.len(), 4);
        assert_eq!(h.files(), [2, 7]);
        // An added element is removed from the added ones.
        let nine = elem(9, 2);
        let (e9, at9) = h
            .remove(&[10, 0, 0, 9], &[10, 0, 0, 9], |e| *e == nine)
            .unwrap();
        assert_eq!(at9, Place::Added(0));
        assert_eq!(keys(&h), [1, 3, 4]);
        h.unremove(at9, e9);
        h.unremove(at, gone);
        h.unpush();
        assert_eq!(keys(&h), [1, 2, 3, 4]);
        assert_eq!(h, Elements::held(Arc::new(Upto(4))));
        // Listed, the same elements compare equal.
        let listed: Elements = (1..=4).map(|n| elem(n, 7)).collect();
        assert_eq!(h, listed);
        h.to_mut().push(elem(5, 1));
        assert!(h.holder().is_none());
        assert_eq!(keys(&h), [1, 2, 3, 4, 5]);
    }
}
