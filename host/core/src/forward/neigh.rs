//! The neighbour table: link-layer addresses of next hops per device, declared
//! (`neighbour ADDR lladdr MAC dev DEV`, the kernel's NUD_PERMANENT entries) or learned from ARP
//! and neighbour discovery messages addressed to the gateway.

use std::collections::HashMap;
use std::net::IpAddr;

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

/// Neighbours by (device, address).
#[derive(Debug, Clone, Default)]
pub struct NeighbourTable {
    map: HashMap<(DevId, IpAddr), Neighbour>,
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

    /// The entry for `addr` on `dev`.
    pub fn get(&self, dev: DevId, addr: IpAddr) -> Option<&Neighbour> {
        self.map.get(&(dev, addr))
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// `true` when there is no entry.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
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
}
