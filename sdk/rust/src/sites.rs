//! [`Sites`]: state per use site.

use alloc::vec::Vec;

/// A plugin's state per use site (the `site` argument of every call), e.g. the parsed
/// arguments of `configure`. Site ids are dense from 0 in a ruleset (wasp-core's `ExtSite`),
/// so this is indexed by site: a lookup on the packet path is two bounds checks. The slots are
/// kept in chunks of [`SITES_PER_CHUNK`], so that growing to a million sites never copies (or
/// holds twice) the whole table: a plugin's memory stays near what its sites hold, under the
/// host's memory limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sites<T> {
    chunks: Vec<Vec<Option<T>>>,
    /// Configured sites.
    count: usize,
}

/// Sites per chunk of a [`Sites`] table.
pub const SITES_PER_CHUNK: usize = 1024;

impl<T> Default for Sites<T> {
    fn default() -> Self {
        Sites {
            chunks: Vec::new(),
            count: 0,
        }
    }
}

impl<T> Sites<T> {
    /// Sets the state of `site` (replacing and returning what was there), as `configure` does.
    pub fn insert(&mut self, site: u32, value: T) -> Option<T> {
        let (c, i) = split(site);
        if c >= self.chunks.len() {
            self.chunks.resize_with(c + 1, Vec::new);
        }
        let chunk = &mut self.chunks[c];
        if chunk.is_empty() {
            chunk.reserve_exact(SITES_PER_CHUNK);
            chunk.resize_with(SITES_PER_CHUNK, || None);
        }
        let old = chunk[i].replace(value);
        self.count += usize::from(old.is_none());
        old
    }

    /// Drops the state of `site`, as `release` does.
    pub fn remove(&mut self, site: u32) -> Option<T> {
        let (c, i) = split(site);
        let old = self.chunks.get_mut(c)?.get_mut(i)?.take();
        if old.is_some() {
            self.count -= 1;
            if self.chunks[c].iter().all(Option::is_none) {
                self.chunks[c] = Vec::new();
            }
            while self.chunks.last().is_some_and(Vec::is_empty) {
                self.chunks.pop();
            }
        }
        old
    }

    /// The state of `site`, if it was configured.
    #[inline]
    pub fn get(&self, site: u32) -> Option<&T> {
        let (c, i) = split(site);
        self.chunks.get(c)?.get(i)?.as_ref()
    }

    /// The state of `site`, mutably.
    #[inline]
    pub fn get_mut(&mut self, site: u32) -> Option<&mut T> {
        let (c, i) = split(site);
        self.chunks.get_mut(c)?.get_mut(i)?.as_mut()
    }

    /// Every configured site and its state, by site id.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &T)> {
        self.chunks.iter().enumerate().flat_map(|(c, chunk)| {
            chunk
                .iter()
                .enumerate()
                .filter_map(move |(i, v)| Some(((c * SITES_PER_CHUNK + i) as u32, v.as_ref()?)))
        })
    }

    /// Every configured site and its state, mutably.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (u32, &mut T)> {
        self.chunks.iter_mut().enumerate().flat_map(|(c, chunk)| {
            chunk
                .iter_mut()
                .enumerate()
                .filter_map(move |(i, v)| Some(((c * SITES_PER_CHUNK + i) as u32, v.as_mut()?)))
        })
    }

    /// Number of configured sites.
    pub fn len(&self) -> usize {
        self.count
    }

    /// True when no site is configured.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
}

/// (chunk, slot) of `site`.
#[inline]
fn split(site: u32) -> (usize, usize) {
    let s = site as usize;
    (s / SITES_PER_CHUNK, s % SITES_PER_CHUNK)
}

#[cfg(test)]
mod tests {
    use super::Sites;

    #[test]
    fn insert_get_remove_iterate() {
        let mut s = Sites::default();
        assert!(s.is_empty());
        assert_eq!(s.insert(3, "c"), None);
        assert_eq!(s.insert(0, "a"), None);
        assert_eq!(s.insert(3, "C"), Some("c"));
        assert_eq!((s.get(3), s.get(1), s.get(99)), (Some(&"C"), None, None));
        assert_eq!(s.len(), 2);
        assert_eq!(
            s.iter().collect::<alloc::vec::Vec<_>>(),
            [(0, &"a"), (3, &"C")]
        );
        *s.get_mut(0).unwrap() = "A";
        assert_eq!(s.remove(3), Some("C"));
        assert_eq!(s.remove(3), None);
        assert_eq!(s.remove(7), None);
        assert_eq!(s.iter().collect::<alloc::vec::Vec<_>>(), [(0, &"A")]);
        assert_eq!(s.remove(0), Some("A"));
        assert!(s.is_empty());
        // Across chunks: far sites, iteration in site order, empty chunks dropped.
        let far = (3 * super::SITES_PER_CHUNK + 5) as u32;
        s.insert(far, "far");
        s.insert(1, "near");
        assert_eq!(s.get(far), Some(&"far"));
        assert_eq!(s.len(), 2);
        assert_eq!(
            s.iter().collect::<alloc::vec::Vec<_>>(),
            [(1, &"near"), (far, &"far")]
        );
        assert_eq!(s.remove(far), Some("far"));
        assert_eq!(s.chunks.len(), 1);
    }
}
