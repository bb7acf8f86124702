//! [`GuestCell`]: a `static` home for a guest's state.

use core::cell::RefCell;

/// A value created on first use (with `Default`) and borrowed mutably by one call at a time:
/// the home of a plugin's state in a `static`. Guests are single-threaded (wasm32 without the
/// threads proposal) and the host never re-enters an instance, so one `RefCell` is enough.
pub struct GuestCell<T>(RefCell<Option<T>>);

// SAFETY: a component instance runs on one thread (wasm32 without shared memory: the
// `atomics` target feature is off, so no other thread can see this static), so the RefCell is
// never reached from two threads. Only compiled for such targets.
#[cfg(all(target_arch = "wasm32", not(target_feature = "atomics")))]
#[allow(unsafe_code)]
unsafe impl<T> Sync for GuestCell<T> {}

impl<T: Default> GuestCell<T> {
    /// An empty cell (the value is made on the first [`with`](Self::with)).
    pub const fn new() -> GuestCell<T> {
        GuestCell(RefCell::new(None))
    }

    /// Runs `f` on the value, creating it first if needed. A nested call (re-entry) traps.
    pub fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        let mut slot = self.0.borrow_mut();
        f(slot.get_or_insert_with(T::default))
    }
}

impl<T: Default> Default for GuestCell<T> {
    fn default() -> Self {
        GuestCell::new()
    }
}

#[cfg(test)]
mod tests {
    use super::GuestCell;

    #[test]
    fn value_is_made_once_and_kept() {
        let cell: GuestCell<u32> = GuestCell::new();
        assert_eq!(cell.with(|v| *v), 0);
        cell.with(|v| *v += 5);
        assert_eq!(cell.with(|v| *v), 5);
    }
}
