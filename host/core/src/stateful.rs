//! The state behind `limit` and `quota` (statements and named objects), and the sets that set
//! statements change (`dynset`): one token bucket per
//! `limit` statement or limit object, one consumed-bytes count per `quota` statement or quota
//! object, as the kernel has one per expression or object. The state is shared by the workers'
//! engines ([`Engine::stateful`](crate::Engine::stateful),
//! [`Engine::share_stateful`](crate::Engine::share_stateful)): a bucket behind a lock (the
//! kernel's `nft_limit` spinlock), a quota in an atomic (the kernel's `atomic64_t consumed`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use wasp_ruleset::model::{LIMIT_PKT_BURST_DEFAULT, Limit, Quota};

/// ns per second (`NSEC_PER_SEC`).
const NSEC_PER_SEC: u64 = 1_000_000_000;

/// One token bucket, as the kernel's `nft_limit_priv` with its `nft_limit`: tokens are ns of
/// credit, a packet costs `nsecs / rate` (packets) or `nsecs * len / rate` (bytes).
#[derive(Debug)]
pub(crate) struct Bucket {
    /// The bucket's size in ns (`tokens_max`).
    tokens_max: u64,
    /// Packets or bytes per `nsecs`.
    rate: u64,
    /// The rate's time unit in ns.
    nsecs: u64,
    /// Byte rate (NFT_LIMIT_PKT_BYTES).
    bytes: bool,
    /// `over` (NFT_LIMIT_F_INV).
    invert: bool,
    /// (tokens, last): the credit left and the time it was computed at, ns.
    state: Mutex<(u64, u64)>,
}

impl Bucket {
    /// A copy with the credit left now, its time moved back by `shift` ns (the bucket of a
    /// continuing set element, under an engine whose epoch is `shift` ns later).
    pub fn continuing(&self, shift: u64) -> Bucket {
        let (tokens, last) = *self.state.lock().unwrap_or_else(|p| p.into_inner());
        Bucket {
            tokens_max: self.tokens_max,
            rate: self.rate,
            nsecs: self.nsecs,
            bytes: self.bytes,
            invert: self.invert,
            state: Mutex::new((tokens, last.saturating_sub(shift))),
        }
    }

    /// A full bucket for `l` (`nft_limit_init`). `l` passed the kernel's checks (the parser
    /// refuses a rate of 0 and sizes that overflow); a rate of 0 here gives an empty bucket
    /// that never fills.
    pub fn new(l: &Limit) -> Bucket {
        let nsecs = l.per_secs.saturating_mul(NSEC_PER_SEC);
        let rate = l.rate.max(1);
        let tokens_max = if l.bytes {
            // tokens_max = nsecs * (rate + burst) / rate.
            let rb = u128::from(rate) + u128::from(l.burst);
            u64::try_from(u128::from(nsecs) * rb / u128::from(rate)).unwrap_or(u64::MAX)
        } else {
            let burst = if l.burst == 0 {
                LIMIT_PKT_BURST_DEFAULT
            } else {
                l.burst
            };
            (nsecs / rate).saturating_mul(u64::from(burst))
        };
        Bucket {
            tokens_max,
            rate,
            nsecs,
            bytes: l.bytes,
            invert: l.over,
            state: Mutex::new((tokens_max, 0)),
        }
    }

    /// One packet of `len_bytes` (`skb->len`) at `now_ns`: `true` when the rule goes on
    /// (`nft_limit_pkts_eval` / `nft_limit_bytes_eval` leave the verdict alone), `false` for
    /// NFT_BREAK. The bucket gains the ns elapsed since the last packet (at most up to its
    /// size); a packet that finds enough credit takes its cost and is within the rate.
    pub fn eval(&self, now_ns: u64, len_bytes: u32) -> bool {
        let cost = if self.bytes {
            // The kernel's `div64_u64(priv->nsecs * pkt->skb->len, priv->rate)` (64 bits).
            self.nsecs.wrapping_mul(u64::from(len_bytes)) / self.rate
        } else {
            self.nsecs / self.rate
        };
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let (tokens, last) = *st;
        // Workers' clocks may differ by a little: time never runs backwards for the bucket.
        let now = now_ns.max(last);
        let tokens = tokens.saturating_add(now - last).min(self.tokens_max);
        let within = match tokens.checked_sub(cost) {
            Some(left) => {
                *st = (left, now);
                true
            }
            None => {
                *st = (tokens, now);
                false
            }
        };
        within != self.invert
    }
}

/// One quota (`nft_quota`): the bytes consumed, counted at every packet that reaches it.
#[derive(Debug)]
pub(crate) struct QuotaState {
    /// The quota in bytes.
    quota: u64,
    /// `over` (NFT_QUOTA_F_INV).
    invert: bool,
    /// Bytes consumed (starts at `used`); shared with the quota of the previous program that
    /// this one continues ([`QuotaState::share_consumed`]).
    consumed: Arc<AtomicU64>,
}

impl QuotaState {
    /// The state of `q` with its `used` bytes consumed.
    pub fn new(q: &Quota) -> QuotaState {
        QuotaState {
            quota: q.bytes,
            invert: q.over,
            consumed: Arc::new(AtomicU64::new(q.used)),
        }
    }

    /// One packet of `len_bytes` (`skb->len`): `true` when the rule goes on. As
    /// `nft_quota_do_eval`: the packet's bytes are consumed first, then the rule breaks when
    /// "consumed > quota" differs from `over`.
    pub fn eval(&self, len_bytes: u32) -> bool {
        let len = u64::from(len_bytes);
        let consumed = self
            .consumed
            .fetch_add(len, Ordering::Relaxed)
            .wrapping_add(len);
        (consumed > self.quota) == self.invert
    }

    /// Bytes consumed so far.
    pub fn consumed(&self) -> u64 {
        self.consumed.load(Ordering::Relaxed)
    }

    /// The bytes consumed, zeroed in the same step (`reset quotas`).
    pub fn take(&self) -> u64 {
        self.consumed.swap(0, Ordering::Relaxed)
    }

    /// Count in `other`'s cell from now on (this quota continues `other` across a ruleset
    /// change: the bytes either consumes count once).
    pub fn share_consumed(&mut self, other: &QuotaState) {
        self.consumed = Arc::clone(&other.consumed);
    }

    /// The same quota, sharing the bytes consumed (a continuing set element's).
    pub fn continuing(&self) -> QuotaState {
        QuotaState {
            quota: self.quota,
            invert: self.invert,
            consumed: Arc::clone(&self.consumed),
        }
    }
}

/// Where a quota's state belongs in the ruleset, to list its consumed bytes as `used`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum QuotaOwner {
    /// The `nth` `quota` statement of rule `handle` of chain `chain` of table `table`.
    Rule {
        table: u32,
        chain: u32,
        handle: u64,
        nth: u32,
    },
    /// Quota object `name` of table `table`.
    Object { table: u32, name: String },
}

/// The limit buckets and quotas of a compiled ruleset, shared by the engines of the workers
/// that run it (see [`crate::Engine::share_stateful`]).
#[derive(Debug, Default)]
pub struct Stateful {
    /// One per `limit` statement and limit object, in the order the compiler met them.
    pub(crate) limits: Vec<Bucket>,
    /// One per `quota` statement and quota object, in the order the compiler met them.
    pub(crate) quotas: Vec<QuotaState>,
    /// Whose each quota is (parallel to `quotas`).
    pub(crate) quota_owners: Vec<QuotaOwner>,
    /// The named sets that set statements change, in the order the compiler met them (a set
    /// that continues through a ruleset change takes the running one's elements:
    /// [`crate::Engine::carry_dynamic`]).
    pub(crate) dynsets: Vec<crate::dynset::DynSet>,
    /// Whose each dynamic set is: (table index, set name, its key's field widths in bytes),
    /// parallel to `dynsets`.
    pub(crate) dynset_owners: Vec<(u32, String, Vec<u8>)>,
    /// One counter per `numgen inc` expression, in the order the compiler met them (the
    /// last value given; see `calc::numgen_inc`).
    pub(crate) numgens: Vec<std::sync::atomic::AtomicU32>,
}

impl Stateful {
    /// `true` when `other` has as many buckets and quotas, owned by the same statements and
    /// objects (both compiled from the same ruleset).
    pub fn same_shape(&self, other: &Stateful) -> bool {
        self.limits.len() == other.limits.len()
            && self.quota_owners == other.quota_owners
            && self.dynsets.len() == other.dynsets.len()
            && self.numgens.len() == other.numgens.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn pkts(rate: u64, per_secs: u64, burst: u32, over: bool) -> Bucket {
        Bucket::new(&Limit {
            over,
            rate,
            per_secs,
            burst,
            bytes: false,
        })
    }

    #[test]
    fn a_packet_limit_passes_its_burst_then_one_packet_per_interval() {
        // 10/second, burst 5: 5 packets at once, then one every 100 ms.
        let b = pkts(10, 1, 5, false);
        let t0 = 1_000 * MS;
        for _ in 0..5 {
            assert!(b.eval(t0, 60));
        }
        assert!(!b.eval(t0, 60));
        assert!(!b.eval(t0 + 99 * MS, 60));
        // 100 ms of credit since t0 (the failed packet at +99 ms kept what it found).
        assert!(b.eval(t0 + 100 * MS, 60));
        assert!(!b.eval(t0 + 100 * MS, 60));
        // A long pause fills the bucket to its burst, no more.
        let later = t0 + 60_000 * MS;
        for _ in 0..5 {
            assert!(b.eval(later, 60));
        }
        assert!(!b.eval(later, 60));
    }

    #[test]
    fn over_matches_the_packets_beyond_the_rate() {
        let b = pkts(1, 60, 2, true);
        assert!(!b.eval(0, 60));
        assert!(!b.eval(0, 60));
        assert!(b.eval(0, 60));
        assert!(b.eval(30_000 * MS, 60));
        // A minute after the start the bucket had a packet's credit again.
        assert!(!b.eval(60_000 * MS, 60));
    }

    #[test]
    fn a_byte_limit_costs_each_packet_its_length() {
        // 1000 bytes/second, burst 500 bytes: the bucket holds 1.5 s of credit; a 1000-byte
        // packet costs 1 s.
        let b = Bucket::new(&Limit {
            over: false,
            rate: 1000,
            per_secs: 1,
            burst: 500,
            bytes: true,
        });
        assert!(b.eval(0, 1000));
        assert!(!b.eval(0, 1000));
        assert!(b.eval(0, 500));
        assert!(!b.eval(0, 1));
        assert!(b.eval(1_000 * MS, 1000));
    }

    #[test]
    fn a_quota_matches_until_its_bytes_are_exceeded() {
        let q = QuotaState::new(&Quota {
            over: false,
            bytes: 1000,
            used: 100,
        });
        assert!(q.eval(400));
        assert!(q.eval(500)); // consumed 1000: not beyond the quota
        assert!(!q.eval(1));
        assert!(!q.eval(1));
        assert_eq!(q.consumed(), 1002);
        let over = QuotaState::new(&Quota {
            over: true,
            bytes: 1000,
            used: 0,
        });
        assert!(!over.eval(1000));
        assert!(over.eval(1));
    }
}
