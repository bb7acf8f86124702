//! [`Sites`]: state per use site.

use alloc::vec::Vec;

/// A plugin's state per use site (the `site` argument of every call), e.g. the parsed
/// arguments of `configure`. Site ids are dense from 0 in a ruleset (wasp-core's `ExtSite`),
/// so this is a vector indexed by site: a lookup on the packet path is one bounds check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sites<T>(Vec<Option<T>>);

impl<T> Default for Sites<T> {
    fn default() -> Self {
        Sites(Vec::new())
    }
}

impl<T> Sites<T> {
    /// Sets the state of `site` (replacing and returning what was there), as `configure` does.
    pub fn insert(&mut self, site: u32, value: T) -> Option<T> {
        let i = site as usize;
        if i >= self.0.len() {
            self.0.resize_with(i + 1, || None);
        }
        self.0[i].replace(value)
    }

    /// Drops the state of `site`, as `release` does.
    pub fn remove(&mut self, site: u32) -> Option<T> {
        let old = self.0.get_mut(site as usize)?.take();
        while self.0.last().is_some_and(Option::is_none) {
            self.0.pop();
        }
        old
    }

    /// The state of `site`, if it was configured.
    pub fn get(&self, site: u32) -> Option<&T> {
        self.0.get(site as usize)?.as_ref()
    }

    /// The state of `site`, mutably.
    pub fn get_mut(&mut self, site: u32) -> Option<&mut T> {
        self.0.get_mut(site as usize)?.as_mut()
    }

    /// Every configured site and its state, by site id.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &T)> {
        self.0
            .iter()
            .enumerate()
            .filter_map(|(i, v)| Some((i as u32, v.as_ref()?)))
    }

    /// Every configured site and its state, mutably.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (u32, &mut T)> {
        self.0
            .iter_mut()
            .enumerate()
            .filter_map(|(i, v)| Some((i as u32, v.as_mut()?)))
    }

    /// Number of configured sites.
    pub fn len(&self) -> usize {
        self.0.iter().filter(|v| v.is_some()).count()
    }

    /// True when no site is configured.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
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
    }
}
