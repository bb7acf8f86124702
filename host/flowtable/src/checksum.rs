//! The checksum helpers the flowtable's edits need: a per-flow constant "delta" (the ones'
//! complement sum of `~old + new` over every 16-bit word an edit changes) is computed once when
//! a flow is added, and each packet's checksum is updated with one addition (RFC 1624 eqn. 3,
//! `HC' = ~(~HC + delta)`): [`wasp_wire::checksum`], plus the TTL decrement's constant delta.

pub(crate) use wasp_wire::checksum::{apply, delta, fold, sum};

#[cfg(test)]
pub(crate) use wasp_wire::checksum::checksum;

/// The delta of a TTL or hop limit decrement by one in the 16-bit word (TTL, protocol) of an
/// IPv4 header: `~m + (m - 0x0100)` is the constant 0xfeff for every m with TTL >= 1.
pub(crate) const TTL_DEC_DELTA: u64 = 0xfeff;

#[cfg(test)]
mod tests {
    use super::*;

    /// Every TTL decrement of a real IPv4 header with the constant delta equals the checksum
    /// recomputed from scratch.
    #[test]
    fn ttl_delta_matches_recompute() {
        let mut h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0xff, 0x11, 0, 0, 0xc0, 0xa8, 0x00,
            0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        let c = checksum(&h);
        h[10..12].copy_from_slice(&c.to_be_bytes());
        while h[8] > 1 {
            h[8] -= 1;
            let hc = u16::from_be_bytes([h[10], h[11]]);
            h[10..12].copy_from_slice(&apply(hc, TTL_DEC_DELTA).to_be_bytes());
            assert_eq!(checksum(&h), 0, "ttl {}", h[8]);
        }
    }
}
