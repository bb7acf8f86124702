//! Property tests of `parse`: no panic and every reported offset inside the frame, for arbitrary
//! bytes, for mutations of the sample frames, and for IPv6 extension header chains (where the
//! `ip6_exthdrs` mask is checked against `ipv6_find_hdr`'s replica, one target at a time).

use proptest::prelude::*;
use wasp_wire::ipv6_ext::find_hdr;
use wasp_wire::{PacketMeta, exthdr_bit, parse, samples};

/// Assert every offset `m` reports is within `frame`.
fn check_offsets(frame: &[u8], m: &PacketMeta) {
    let len = frame.len();
    assert_eq!(m.len as usize, len);
    assert!(usize::from(m.net_offset) <= len);
    assert!(usize::from(m.inner_l3_offset) <= len);
    assert!(usize::from(m.vlan_count) <= m.vlans.len());
    for t in &m.vlans[..usize::from(m.vlan_count)] {
        let at = usize::from(t.offset);
        assert!(at + 6 <= len, "tag at {at} in {len}");
        assert_eq!(u16::from_be_bytes([frame[at], frame[at + 1]]), t.tpid);
        assert_eq!(u16::from_be_bytes([frame[at + 2], frame[at + 3]]), t.tci);
    }
    for l4 in [m.l4, m.inner_l4].into_iter().flatten() {
        assert!(usize::from(l4.offset) <= len);
    }
    if let Some(t) = m.tunnel {
        assert!(usize::from(t.offset) <= len);
        if let Some(i) = t.inner_offset {
            assert!(usize::from(i) < len);
        }
    }
    if m.l4.is_some() {
        assert!(matches!(m.protocol, 0x0800 | 0x86dd));
    }
}

/// One extension header choice for chain generation.
fn chain_strategy() -> impl Strategy<Value = Vec<u8>> {
    let kinds = prop::sample::select(vec![0u8, 43, 44, 51, 60, 50, 135, 6, 17, 58, 59]);
    (
        prop::collection::vec((kinds, 0u8..4, any::<u16>()), 0..6),
        0usize..120,
    )
        .prop_map(|(hdrs, cut)| {
            let first = hdrs.first().map_or(17, |h| h.0);
            let mut body = Vec::new();
            for (i, &(kind, len, frag)) in hdrs.iter().enumerate() {
                let next = hdrs.get(i + 1).map_or(17, |h| h.0);
                let size = match kind {
                    44 => 8,
                    51 => (usize::from(len) + 2) * 4,
                    0 | 43 | 60 => (usize::from(len) + 1) * 8,
                    _ => break,
                };
                let start = body.len();
                body.resize(start + size, 0);
                body[start] = next;
                body[start + 1] = len;
                if kind == 44 {
                    body[start + 2..start + 4].copy_from_slice(&frag.to_be_bytes());
                }
            }
            body.extend_from_slice(&[0; 8]);
            let mut ip = samples::ipv6(first, &body);
            ip.truncate(40 + cut.min(body.len()));
            ip
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    #[test]
    fn arbitrary_bytes(frame in prop::collection::vec(any::<u8>(), 0..256)) {
        check_offsets(&frame, &parse(&frame));
    }

    #[test]
    fn arbitrary_bytes_behind_known_ethertypes(
        ty in prop::sample::select(vec![0x0800u16, 0x86dd, 0x0806, 0x8100, 0x88a8, 0x9100, 0x0010]),
        body in prop::collection::vec(any::<u8>(), 0..200),
    ) {
        let frame = samples::ethernet(&[], ty, &body);
        check_offsets(&frame, &parse(&frame));
    }

    #[test]
    fn mutated_samples(
        pick in any::<prop::sample::Index>(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..6),
        cut in any::<prop::sample::Index>(),
    ) {
        let all = samples::all();
        let mut frame = all[pick.index(all.len())].1.clone();
        if !frame.is_empty() {
            for (at, v) in flips {
                let i = at.index(frame.len());
                frame[i] = v;
            }
            let keep = cut.index(frame.len() + 1);
            frame.truncate(keep.max(frame.len() / 2));
        }
        check_offsets(&frame, &parse(&frame));
    }

    #[test]
    fn exthdr_mask_matches_find_hdr(ip in chain_strategy()) {
        let frame = samples::ethernet(&[], 0x86dd, &ip);
        let m = parse(&frame);
        check_offsets(&frame, &m);
        for t in [0u8, 43, 44, 60, 135, 51, 50] {
            let bit = exthdr_bit(t).unwrap();
            let found = find_hdr(&ip, Some(t), false).is_ok();
            prop_assert_eq!(m.ip6_exthdrs & bit != 0, found, "type {}", t);
        }
        // l4 agrees with the transport walk whenever validation passes.
        if let Ok(f) = find_hdr(&ip, None, true) {
            if let Some(l4) = m.l4 {
                prop_assert_eq!(l4.proto, f.proto);
                prop_assert_eq!(l4.fragoff, f.fragoff);
                prop_assert_eq!(usize::from(l4.offset), (14 + f.offset).min(frame.len()));
            }
        } else {
            prop_assert_eq!(m.l4, None);
        }
    }
}
