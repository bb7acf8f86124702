//! The kernel selftest's performance cases (`nft_concat_range.sh`, `performance`), built as
//! the script builds them: `entries + 1` elements `[start, start + 1]` in every field, the
//! next start at end + 1 (adjacent 2-wide ranges), the port-wrap fix-up, `inet_proto` fields a
//! single value (udp, 17). Value generators as the script's: `addr4(n) = 10.0.0.5 + n`,
//! `addr6(n) = 2001:db8::(n / 65536):(n % 65536)`, `mac(n) = 00:01:` + n as 4 bytes,
//! `port(n) = n % 65534 + 1`. Used by the lookup benchmark and `perf`'s `set-lookup` table.

/// A field kind of a selftest type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `ipv4_addr`, 4 bytes.
    Net,
    /// `ipv6_addr`, 16 bytes.
    Net6,
    /// `inet_service`, 2 bytes.
    Port,
    /// `ether_addr`, 6 bytes.
    Mac,
    /// `inet_proto`, 1 byte, always udp (17).
    Proto,
}

impl Kind {
    /// Field width in bytes.
    pub fn width(self) -> usize {
        match self {
            Kind::Net => 4,
            Kind::Net6 => 16,
            Kind::Port => 2,
            Kind::Mac => 6,
            Kind::Proto => 1,
        }
    }

    /// The field value for the selftest integer `n`, big-endian bytes.
    pub fn value(self, n: u64) -> Vec<u8> {
        match self {
            Kind::Net => (0x0a00_0005u32.wrapping_add(n as u32))
                .to_be_bytes()
                .to_vec(),
            Kind::Net6 => {
                let mut v = vec![0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0];
                v.extend_from_slice(&((n / 65536) as u16).to_be_bytes());
                v.extend_from_slice(&((n % 65536) as u16).to_be_bytes());
                v
            }
            Kind::Port => ((n % 65534 + 1) as u16).to_be_bytes().to_vec(),
            Kind::Mac => {
                let mut v = vec![0, 1];
                v.extend_from_slice(&(n as u32).to_be_bytes());
                v
            }
            Kind::Proto => vec![17],
        }
    }
}

/// One performance case.
#[derive(Debug, Clone, Copy)]
pub struct Case {
    /// The selftest's display name, e.g. `net,port`.
    pub name: &'static str,
    /// Field kinds in key order.
    pub fields: &'static [Kind],
    /// `perf_entries`.
    pub entries: u64,
    /// `start`.
    pub start: u64,
}

/// The seven cases of the kernel's performance table, in its order.
pub const CASES: [Case; 7] = [
    Case {
        name: "net,port",
        fields: &[Kind::Net, Kind::Port],
        entries: 1000,
        start: 1,
    },
    Case {
        name: "port,net",
        fields: &[Kind::Port, Kind::Net],
        entries: 100,
        start: 1,
    },
    Case {
        name: "net6,port",
        fields: &[Kind::Net6, Kind::Port],
        entries: 1000,
        start: 10,
    },
    Case {
        name: "port,proto",
        fields: &[Kind::Port, Kind::Proto],
        entries: 30000,
        start: 1,
    },
    Case {
        name: "net6,port,mac",
        fields: &[Kind::Net6, Kind::Port, Kind::Mac],
        entries: 10,
        start: 10,
    },
    Case {
        name: "net6,port,mac,proto",
        fields: &[Kind::Net6, Kind::Port, Kind::Mac, Kind::Proto],
        entries: 1000,
        start: 10,
    },
    Case {
        name: "net,mac",
        fields: &[Kind::Net, Kind::Mac],
        entries: 1000,
        start: 1,
    },
];

impl Case {
    /// Field widths in bytes.
    pub fn field_lens(&self) -> Vec<usize> {
        self.fields.iter().map(|k| k.width()).collect()
    }

    /// The `entries + 1` elements as (start key, end key).
    pub fn elements(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        let mut start = self.start;
        for _ in 0..=self.entries {
            let mut end = start + 1;
            if end / 65534 > start / 65534 {
                start = end;
                end += 1;
            }
            let mut s = Vec::new();
            let mut e = Vec::new();
            for k in self.fields {
                s.extend(k.value(start));
                e.extend(k.value(end));
            }
            out.push((s, e));
            start = end + 1;
        }
        out
    }

    /// A pipapo set of this case with the given policy (every element accepted).
    pub fn build(&self, policy: crate::pipapo::GroupPolicy) -> crate::Pipapo {
        let mut p = crate::Pipapo::with_policy(&self.field_lens(), policy).expect("valid case");
        for (s, e) in self.elements() {
            p.insert(
                crate::NewElem {
                    start: &s,
                    end: Some(&e),
                    data: 0,
                    expires: None,
                    ext: (),
                },
                crate::InsertMode::Create,
                0,
            )
            .expect("selftest elements never overlap");
        }
        p
    }

    /// `n` probe keys spread over the elements, each matching its element (start, end or
    /// the start with the last field at its end), packed back to back.
    pub fn probes(&self, n: usize) -> Vec<u8> {
        let els = self.elements();
        let mut out = Vec::new();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..n {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let (s, e) = &els[(x % els.len() as u64) as usize];
            out.extend_from_slice(if x & 1 == 0 { s } else { e });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipapo::GroupPolicy;

    #[test]
    fn cases_build_and_every_probe_matches() {
        for c in CASES {
            if c.entries > 1000 {
                continue; // port,proto is built by the benchmark (slow in debug builds)
            }
            let p = c.build(GroupPolicy::Auto);
            assert_eq!(p.len() as u64, c.entries + 1, "{}", c.name);
            let kl = p.key_len();
            for k in c.probes(200).chunks(kl) {
                assert!(p.lookup(k, 0).is_some(), "{} {:?}", c.name, k);
            }
        }
        // First elements of net,port: 10.0.0.6-10.0.0.7 . 2-3, then 10.0.0.8-10.0.0.9 . 4-5.
        let e = CASES[0].elements();
        assert_eq!(e[0], (vec![10, 0, 0, 6, 0, 2], vec![10, 0, 0, 7, 0, 3]));
        assert_eq!(e[1], (vec![10, 0, 0, 8, 0, 4], vec![10, 0, 0, 9, 0, 5]));
    }
}
