//! The neighbour table: link-layer addresses of next hops per device, declared
//! (`neighbour ADDR lladdr MAC dev DEV`, the kernel's NUD_PERMANENT entries) or learned from ARP
//! and neighbour discovery messages addressed to the gateway.
//!
//! Each worker's [`super::Gateway`] is a clone with its own table, but what one learns every
//! clone knows (the kernel has one neighbour table for all CPUs): a learned entry goes into
//! the worker's own map and into one shared by the clones; a lookup that misses the own map
//! reads the shared one (a read lock, only for entries another worker learned). Without this,
//! a reply that the port's hashing gives to another worker than the one that saw the ARP
//! exchange would wait for a neighbour forever. A clone's own entry wins over the shared one
//! (no lock on the common path), so a MAC that changes is seen first by the worker that hears
//! of it; the others keep theirs until they hear of it too.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use parking_lot::RwLock;

use super::DevId;

/// One neighbour entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Neighbour {
    /// Its link-layer (MAC) address.
    pub mac: [u8; 6],
    /// Declared in the gateway file: never replaced by what is learned (as the kernel keeps a
    /// NUD_PERMANENT entry).
    pub permanent: bool,
    /// When it was last learned or confirmed (ns on the packet clock; 0 for a declared one).
    pub updated_ns: u64,
}

type Map = HashMap<(DevId, IpAddr), Neighbour>;

/// Neighbours by (device, address): this clone's, and the learned entries of every clone.
#[derive(Debug, Clone, Default)]
pub struct NeighbourTable {
    map: Map,
    learned: Arc<RwLock<Map>>,
}

impl NeighbourTable {
    /// Declare a permanent entry (replaces any entry for the same device and address).
    pub fn declare(&mut self, dev: DevId, addr: IpAddr, mac: [u8; 6]) {
        self.map.insert(
            (dev, addr),
            Neighbour {
                mac,
                permanent: true,
                updated_ns: 0,
            },
        );
    }

    /// Learn (or refresh) an entry from a message of `addr` with link-layer address `mac` seen
    /// on `dev` at `now_ns`. A permanent entry is left as it is. Returns `true` when the table
    /// changed. Multicast, broadcast and zero MACs are not learned.
    pub fn learn(&mut self, dev: DevId, addr: IpAddr, mac: [u8; 6], now_ns: u64) -> bool {
        if mac[0] & 1 != 0 || mac == [0; 6] {
            return false;
        }
        let n = Neighbour {
            mac,
            permanent: false,
            updated_ns: now_ns,
        };
        if !self.map.get(&(dev, addr)).is_some_and(|n| n.permanent) {
            self.learned.write().insert((dev, addr), n);
        }
        match self.map.get_mut(&(dev, addr)) {
            Some(n) if n.permanent => false,
            Some(n) => {
                let changed = n.mac != mac;
                n.mac = mac;
                n.updated_ns = now_ns;
                changed
            }
            None => {
                self.map.insert(
                    (dev, addr),
                    Neighbour {
                        mac,
                        permanent: false,
                        updated_ns: now_ns,
                    },
                );
                true
            }
        }
    }

    /// The entry for `addr` on `dev`: this clone's, else one another clone learned.
    pub fn get(&self, dev: DevId, addr: IpAddr) -> Option<Neighbour> {
        match self.map.get(&(dev, addr)) {
            Some(n) => Some(*n),
            None => self.learned.read().get(&(dev, addr)).copied(),
        }
    }

    /// Number of entries this clone knows (its own and those the others learned).
    pub fn len(&self) -> usize {
        let l = self.learned.read();
        self.map.len() + l.keys().filter(|k| !self.map.contains_key(k)).count()
    }

    /// `true` when there is no entry.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_entries_are_not_overridden() {
        let mut t = NeighbourTable::default();
        let a: IpAddr = "10.0.2.2".parse().unwrap();
        t.declare(DevId(1), a, [2, 0, 0, 0, 2, 2]);
        assert!(!t.learn(DevId(1), a, [2, 0, 0, 0, 9, 9], 5));
        assert_eq!(t.get(DevId(1), a).unwrap().mac, [2, 0, 0, 0, 2, 2]);
        // Same address on another device: another entry.
        assert!(t.get(DevId(0), a).is_none());
        assert!(t.learn(DevId(0), a, [2, 0, 0, 0, 9, 9], 5));
        assert!(!t.learn(DevId(0), a, [2, 0, 0, 0, 9, 9], 6));
        assert_eq!(t.get(DevId(0), a).unwrap().updated_ns, 6);
        // Broadcast and multicast MACs are not neighbours.
        assert!(!t.learn(DevId(2), a, [0xff; 6], 7));
        assert!(!t.learn(DevId(2), a, [0x33, 0x33, 0, 0, 0, 1], 7));
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn what_one_clone_learns_the_others_find() {
        let mut a = NeighbourTable::default();
        let p: IpAddr = "10.0.9.9".parse().unwrap();
        a.declare(DevId(0), p, [2, 0, 0, 0, 0, 1]);
        let mut b = a.clone();
        let q: IpAddr = "10.0.2.2".parse().unwrap();
        assert!(a.get(DevId(1), q).is_none());
        assert!(b.learn(DevId(1), q, [2, 0, 0, 0, 2, 2], 5));
        let n = a.get(DevId(1), q).unwrap();
        assert_eq!(
            (n.mac, n.permanent, n.updated_ns),
            ([2, 0, 0, 0, 2, 2], false, 5)
        );
        assert_eq!((a.len(), b.len()), (2, 2));
        // A declared entry stays what the file says, in every clone.
        assert!(!b.learn(DevId(0), p, [2, 0, 0, 0, 9, 9], 6));
        assert_eq!(a.get(DevId(0), p).unwrap().mac, [2, 0, 0, 0, 0, 1]);
        // A clone's own entry wins over the shared one.
        assert!(a.learn(DevId(1), q, [2, 0, 0, 0, 3, 3], 7));
        assert_eq!(b.get(DevId(1), q).unwrap().mac, [2, 0, 0, 0, 2, 2]);
        assert_eq!(a.get(DevId(1), q).unwrap().mac, [2, 0, 0, 0, 3, 3]);
    }
}
