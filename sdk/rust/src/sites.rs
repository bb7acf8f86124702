//! [`Sites`]: state per use site.

use alloc::collections::BTreeMap;

/// A plugin's state per use site (the `site` argument of every call), e.g. the parsed
/// arguments of `configure`. Ordered by site id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sites<T>(BTreeMap<u32, T>);

impl<T> Default for Sites<T> {
    fn default() -> Self {
        Sites(BTreeMap::new())
    }
}

impl<T> Sites<T> {
    /// Sets the state of `site` (replacing what was there), as `configure` does.
    pub fn insert(&mut self, site: u32, value: T) -> Option<T> {
        self.0.insert(site, value)
    }

    /// Drops the state of `site`, as `release` does.
    pub fn remove(&mut self, site: u32) -> Option<T> {
        self.0.remove(&site)
    }

    /// The state of `site`, if it was configured.
    pub fn get(&self, site: u32) -> Option<&T> {
        self.0.get(&site)
    }

    /// The state of `site`, mutably.
    pub fn get_mut(&mut self, site: u32) -> Option<&mut T> {
        self.0.get_mut(&site)
    }

    /// Every site and its state, by site id.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &T)> {
        self.0.iter().map(|(k, v)| (*k, v))
    }

    /// Every site and its state, mutably.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (u32, &mut T)> {
        self.0.iter_mut().map(|(k, v)| (*k, v))
    }

    /// Number of configured sites.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when no site is configured.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}
