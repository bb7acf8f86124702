//! Events for `wasp ctl monitor`: plugin events (IDLETIMER expiries, traps, swaps) and
//! ruleset changes, fanned out to every subscriber. A subscriber that stops reading is dropped
//! once its queue is full (it never holds up a worker).

use std::sync::Mutex;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};

/// Events a subscriber may have queued before it counts as gone.
const QUEUE: usize = 4096;

/// One event line, as `wasp ctl monitor` prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// What kind (`plugin`, `ruleset`, `flow`).
    pub kind: &'static str,
    /// The line `wasp ctl monitor` prints (`idletimer wlan0 expired`, `ruleset generation 2
    /// applied`, `plugin counter swapped to v2.wasm`).
    pub text: String,
}

/// The subscribers.
#[derive(Debug, Default)]
pub struct EventBus {
    subs: Mutex<Vec<SyncSender<Event>>>,
}

impl EventBus {
    /// A new subscription: events published from now on.
    pub fn subscribe(&self) -> Receiver<Event> {
        let (tx, rx) = sync_channel(QUEUE);
        self.lock().push(tx);
        rx
    }

    /// Send `ev` to every subscriber; one whose queue is full or who went away is dropped.
    pub fn publish(&self, ev: Event) {
        let mut subs = self.lock();
        if subs.is_empty() {
            return;
        }
        subs.retain(|s| match s.try_send(ev.clone()) {
            Ok(()) => true,
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => false,
        });
    }

    /// Subscribers now.
    pub fn subscribers(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<SyncSender<Event>>> {
        self.subs.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fan_out_and_drop_gone() {
        let bus = EventBus::default();
        let a = bus.subscribe();
        let b = bus.subscribe();
        bus.publish(Event {
            kind: "plugin",
            text: "idletimer x expired".into(),
        });
        assert_eq!(a.recv().unwrap().text, "idletimer x expired");
        assert_eq!(b.recv().unwrap().kind, "plugin");
        drop(b);
        bus.publish(Event {
            kind: "ruleset",
            text: "x".into(),
        });
        assert_eq!(bus.subscribers(), 1);
        assert_eq!(a.recv().unwrap().kind, "ruleset");
    }
}
