//! IPv6 extension headers (RFC 8200 section 4, AH from RFC 4302): views for the generic
//! options-style header (hop-by-hop, destination options), routing, fragment and AH; a [`Chain`]
//! iterator over a header chain; and [`find_hdr`], a replica of the kernel's `ipv6_find_hdr`
//! (net/ipv6/exthdrs_core.c), which nftables uses to find the transport header and to answer
//! `exthdr ... exists`.

use crate::bytes::{be16, be32};
use crate::ipv4::protocol;
use crate::ipv6;
use crate::{Error, Result};

/// Byte offsets shared by every extension header.
pub mod field {
    /// Next header.
    pub const NEXT_HEADER: usize = 0;
    /// Header extension length (units depend on the header type).
    pub const LEN: usize = 1;
    /// Routing header: routing type.
    pub const ROUTING_TYPE: usize = 2;
    /// Routing header: segments left.
    pub const SEGMENTS_LEFT: usize = 3;
    /// Fragment header: fragment offset (13 bits, 8-byte units) and M flag.
    pub const FRAG_OFFSET: usize = 2;
    /// Fragment header: identification.
    pub const FRAG_IDENT: usize = 4;
    /// AH: security parameters index.
    pub const AH_SPI: usize = 4;
    /// AH: sequence number.
    pub const AH_SEQ: usize = 8;
    /// Options (hop-by-hop, destination options) start here.
    pub const OPTIONS: usize = 2;
}

/// Length in bytes of a fragment header.
pub const FRAGMENT_LEN: usize = 8;

/// Whether the kernel's `ipv6_ext_hdr` treats `nexthdr` as an extension header: hop-by-hop (0),
/// routing (43), fragment (44), AH (51), no next header (59), destination options (60). ESP and
/// mobility are not: a walk stops at them.
#[inline]
pub fn is_kernel_ext_hdr(nexthdr: u8) -> bool {
    matches!(
        nexthdr,
        protocol::HOPOPTS
            | protocol::ROUTING
            | protocol::FRAGMENT
            | protocol::AH
            | protocol::NONE
            | protocol::DSTOPTS
    )
}

/// Length in bytes of an extension header of type `kind` whose first two bytes are `first2`:
/// 8 for a fragment header, (len + 2) * 4 for AH (`ipv6_authlen`), (len + 1) * 8 otherwise
/// (`ipv6_optlen`).
#[inline]
pub fn header_len(kind: u8, len_byte: u8) -> usize {
    match kind {
        protocol::FRAGMENT => FRAGMENT_LEN,
        protocol::AH => (usize::from(len_byte) + 2) * 4,
        _ => (usize::from(len_byte) + 1) * 8,
    }
}

/// A view of one extension header of a known type, whole within the buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header<'a> {
    kind: u8,
    buf: &'a [u8],
}

impl<'a> Header<'a> {
    /// Wrap the extension header of type `kind` (0, 43, 44, 51, 60 or any options-style type)
    /// at the start of `buf`. The view covers exactly the header's length.
    ///
    /// # Errors
    /// [`Error::Truncated`] when `buf` is shorter than 2 bytes or than the header's length;
    /// [`Error::Malformed`] for an AH shorter than 12 bytes (no room for SPI and sequence).
    pub fn new_checked(kind: u8, buf: &'a [u8]) -> Result<Self> {
        let len_byte = *buf.get(field::LEN).ok_or(Error::Truncated)?;
        let len = header_len(kind, len_byte);
        if kind == protocol::AH && len < 12 {
            return Err(Error::Malformed);
        }
        let buf = buf.get(..len).ok_or(Error::Truncated)?;
        Ok(Header { kind, buf })
    }

    /// The header type this view was built for.
    pub fn kind(&self) -> u8 {
        self.kind
    }
    /// Next header.
    pub fn next_header(&self) -> u8 {
        self.buf[field::NEXT_HEADER]
    }
    /// Length of the header in bytes.
    pub fn len(&self) -> usize {
        self.buf.len()
    }
    /// Always false: a header is at least 8 bytes long.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }
    /// The whole header.
    pub fn bytes(&self) -> &'a [u8] {
        self.buf
    }
    /// Bytes after the next-header and length bytes (options, routing data, ...).
    pub fn data(&self) -> &'a [u8] {
        &self.buf[field::OPTIONS..]
    }
    /// Iterator over the options of a hop-by-hop or destination options header.
    pub fn options(&self) -> OptionIter<'a> {
        OptionIter::new(self.data())
    }
    /// Routing type, for a routing header.
    pub fn routing_type(&self) -> Option<u8> {
        (self.kind == protocol::ROUTING).then(|| self.buf[field::ROUTING_TYPE])
    }
    /// Segments left, for a routing header.
    pub fn segments_left(&self) -> Option<u8> {
        (self.kind == protocol::ROUTING).then(|| self.buf[field::SEGMENTS_LEFT])
    }
    /// Fragment offset in bytes, for a fragment header.
    pub fn frag_offset(&self) -> Option<u16> {
        (self.kind == protocol::FRAGMENT).then(|| be16(self.buf, field::FRAG_OFFSET) & !0x7)
    }
    /// More-fragments flag, for a fragment header.
    pub fn more_frags(&self) -> Option<bool> {
        (self.kind == protocol::FRAGMENT).then(|| be16(self.buf, field::FRAG_OFFSET) & 1 != 0)
    }
    /// Identification, for a fragment header.
    pub fn frag_ident(&self) -> Option<u32> {
        (self.kind == protocol::FRAGMENT).then(|| be32(self.buf, field::FRAG_IDENT))
    }
    /// Security parameters index, for AH.
    pub fn ah_spi(&self) -> Option<u32> {
        (self.kind == protocol::AH).then(|| be32(self.buf, field::AH_SPI))
    }
    /// Sequence number, for AH.
    pub fn ah_seq(&self) -> Option<u32> {
        (self.kind == protocol::AH).then(|| be32(self.buf, field::AH_SEQ))
    }
}

/// One option of a hop-by-hop or destination options header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ip6Option<'a> {
    /// Option type, kept as a number (0 = Pad1, 1 = PadN, 0xc2 = jumbo payload, ...).
    pub kind: u8,
    /// Option data (empty for Pad1).
    pub data: &'a [u8],
}

/// Iterator over IPv6 TLV options (RFC 8200 section 4.2): type 0 (Pad1) is one byte, every
/// other type has a length byte counting only the data. Stops on an option that runs past the
/// area ([`OptionIter::malformed`]).
#[derive(Debug, Clone)]
pub struct OptionIter<'a> {
    area: &'a [u8],
    pos: usize,
    malformed: bool,
}

impl<'a> OptionIter<'a> {
    /// Iterate over `area`, the bytes after a header's next-header and length bytes.
    pub fn new(area: &'a [u8]) -> Self {
        OptionIter {
            area,
            pos: 0,
            malformed: false,
        }
    }
    /// Whether the walk stopped on an option that runs past the area.
    pub fn malformed(&self) -> bool {
        self.malformed
    }
}

impl<'a> Iterator for OptionIter<'a> {
    type Item = Ip6Option<'a>;

    fn next(&mut self) -> Option<Ip6Option<'a>> {
        let kind = *self.area.get(self.pos)?;
        if kind == 0 {
            self.pos += 1;
            return Some(Ip6Option { kind, data: &[] });
        }
        let data = self.area.get(self.pos + 1).and_then(|&l| {
            let start = self.pos + 2;
            self.area.get(start..start + usize::from(l))
        });
        match data {
            Some(data) => {
                self.pos += 2 + data.len();
                Some(Ip6Option { kind, data })
            }
            None => {
                self.malformed = true;
                self.pos = self.area.len();
                None
            }
        }
    }
}

/// One header yielded by [`Chain`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChainItem<'a> {
    /// Offset of the header from the start of the IPv6 header.
    pub offset: usize,
    /// The header.
    pub header: Header<'a>,
}

/// Iterator over the extension headers behind an IPv6 header, each whole within the buffer. It
/// follows types 0, 43, 44, 51 and 60 (walking through AH), and stops at any other next header,
/// after a non-first fragment's header, or at a header cut off by the end of the buffer.
/// Afterwards [`Chain::next_header`] and [`Chain::offset`] say where the walk ended.
#[derive(Debug, Clone)]
pub struct Chain<'a> {
    ip6: &'a [u8],
    next: u8,
    offset: usize,
    state: ChainEnd,
}

/// Why a [`Chain`] stopped (or `Running` while it has not).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChainEnd {
    /// The walk has not ended yet.
    Running,
    /// Reached a next header that is not an extension header (or 59, no next header).
    Upper,
    /// Walked a fragment header with a non-zero offset: what follows is not a header.
    NonFirstFragment,
    /// A header is cut off by the end of the buffer.
    Truncated,
}

impl<'a> Chain<'a> {
    /// Walk the extension headers of `packet`.
    pub fn new(packet: ipv6::Packet<'a>) -> Self {
        Chain {
            ip6: packet.bytes(),
            next: packet.next_header(),
            offset: ipv6::HEADER_LEN,
            state: ChainEnd::Running,
        }
    }
    /// The next-header value where the walk is (after the end: the upper-layer protocol).
    pub fn next_header(&self) -> u8 {
        self.next
    }
    /// Offset from the IPv6 header of the header the walk is at.
    pub fn offset(&self) -> usize {
        self.offset
    }
    /// Why the walk ended.
    pub fn end(&self) -> ChainEnd {
        self.state
    }
}

impl<'a> Iterator for Chain<'a> {
    type Item = ChainItem<'a>;

    fn next(&mut self) -> Option<ChainItem<'a>> {
        if self.state != ChainEnd::Running {
            return None;
        }
        if !is_kernel_ext_hdr(self.next) || self.next == protocol::NONE {
            self.state = ChainEnd::Upper;
            return None;
        }
        let rest = self.ip6.get(self.offset..).unwrap_or(&[]);
        let Ok(header) = Header::new_checked(self.next, rest) else {
            self.state = ChainEnd::Truncated;
            return None;
        };
        let item = ChainItem {
            offset: self.offset,
            header,
        };
        self.offset += header.len();
        self.next = header.next_header();
        if header.frag_offset().is_some_and(|o| o != 0) {
            self.state = ChainEnd::NonFirstFragment;
        }
        Some(item)
    }
}

/// What [`find_hdr`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Found {
    /// The protocol number returned (the kernel's `nexthdr` return value).
    pub proto: u8,
    /// Offset from the start of the IPv6 header, as `*offset`. May lie past the end of the
    /// buffer: the kernel checks only the bytes it reads, not the length of the last header.
    /// For a non-first fragment found with no target, the kernel returns the fragment header's
    /// next header without writing `*offset` ("*offset is meaningless" in its comment), so the
    /// caller's initial 0 stays: this is 0 then, i.e. the IPv6 header itself. nftables'
    /// `__nft_set_pktinfo_ipv6_validate` starts from `thoff = 0` and keeps that as `pkt->thoff`,
    /// and the kernel's fast payload path (`nft_payload_fast_eval`) reads transport fields of
    /// such a fragment from the IPv6 header.
    pub offset: usize,
    /// Fragment offset in bytes of a non-first fragment header met on the way, else 0.
    pub fragoff: u16,
}

/// Why [`find_hdr`] failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FindError {
    /// `-ENOENT`: the target header is not in the chain.
    NotFound,
    /// `-EBADMSG`: a header the walk needed to read is cut off.
    Truncated,
}

/// Replica of the kernel's `ipv6_find_hdr(skb, &offset, target, &fragoff, &flags)` over `ip6`,
/// the bytes from the IPv6 header to the end of the frame, starting with `*offset == 0`.
///
/// `target` `None` is the kernel's -1: find the transport header. `auth_stops` is the
/// `IP6_FH_F_AUTH` flag: with no target, the walk stops at AH and returns 51. nftables' IPv6
/// validation calls it with `(None, true)`; `exthdr ... exists` calls it with
/// `(Some(type), false)`. Reads only the bytes the kernel reads (two bytes of each header, four
/// of a routing header, the offset field of a fragment header), so a last header longer than the
/// buffer is not an error, as in the kernel.
///
/// # Errors
/// [`FindError::Truncated`] when `ip6` is shorter than 40 bytes or a needed byte is missing;
/// [`FindError::NotFound`] when a target is given and not found, or when the walk with no target
/// meets a non-first fragment followed by another extension header.
pub fn find_hdr(
    ip6: &[u8],
    target: Option<u8>,
    auth_stops: bool,
) -> core::result::Result<Found, FindError> {
    let packet = ipv6::Packet::new_checked(ip6).map_err(|_| FindError::Truncated)?;
    let mut nexthdr = packet.next_header();
    let mut start = ipv6::HEADER_LEN;
    loop {
        let found = Some(nexthdr) == target;
        if !is_kernel_ext_hdr(nexthdr) || nexthdr == protocol::NONE {
            if target.is_none() || found {
                break;
            }
            return Err(FindError::NotFound);
        }
        let hp_next = *ip6.get(start).ok_or(FindError::Truncated)?;
        let hp_len = *ip6.get(start + 1).ok_or(FindError::Truncated)?;
        if nexthdr == protocol::ROUTING && ip6.get(start + 3).is_none() {
            return Err(FindError::Truncated);
        }
        let hdrlen = if nexthdr == protocol::FRAGMENT {
            let frag = crate::bytes::get_be16(ip6, start + field::FRAG_OFFSET)
                .ok_or(FindError::Truncated)?;
            let frag_off = frag & !0x7;
            if frag_off != 0 {
                if target.is_none() && (!is_kernel_ext_hdr(hp_next) || hp_next == protocol::NONE) {
                    // `*offset` is not written: it keeps the caller's 0.
                    return Ok(Found {
                        proto: hp_next,
                        offset: 0,
                        fragoff: frag_off,
                    });
                }
                if !found {
                    return Err(FindError::NotFound);
                }
                return Ok(Found {
                    proto: nexthdr,
                    offset: start,
                    fragoff: frag_off,
                });
            }
            FRAGMENT_LEN
        } else if nexthdr == protocol::AH {
            if auth_stops && target.is_none() {
                break;
            }
            header_len(protocol::AH, hp_len)
        } else {
            header_len(nexthdr, hp_len)
        };
        if found {
            break;
        }
        nexthdr = hp_next;
        start += hdrlen;
    }
    Ok(Found {
        proto: nexthdr,
        offset: start,
        fragoff: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// IPv6 header (payload 48) + hop-by-hop (8, PadN) + routing type 0 (24, segments left 1) +
    /// fragment (offset 0, M, ident 0xabcd) + UDP.
    fn chain_packet() -> Vec<u8> {
        let mut p = vec![0x60, 0, 0, 0, 0, 48, 0, 64];
        p.extend_from_slice(&[0; 32]);
        p.extend_from_slice(&[43, 0, 1, 4, 0, 0, 0, 0]); // HBH -> routing, PadN 4
        p.extend_from_slice(&[44, 2, 0, 1, 0, 0, 0, 0]); // routing -> fragment, 24 bytes
        p.extend_from_slice(&[0; 16]);
        p.extend_from_slice(&[17, 0, 0x00, 0x01, 0, 0, 0xab, 0xcd]); // fragment -> UDP, M
        p.extend_from_slice(&[0x04, 0xd2, 0x00, 0x35, 0, 8, 0, 0]); // UDP 1234 -> 53
        p
    }

    #[test]
    fn header_views() {
        let p = chain_packet();
        let hbh = Header::new_checked(0, &p[40..]).unwrap();
        assert_eq!((hbh.next_header(), hbh.len()), (43, 8));
        let opts: Vec<(u8, usize)> = hbh.options().map(|o| (o.kind, o.data.len())).collect();
        assert_eq!(opts, vec![(1, 4)]);
        let rt = Header::new_checked(43, &p[48..]).unwrap();
        assert_eq!(
            (rt.len(), rt.routing_type(), rt.segments_left()),
            (24, Some(0), Some(1))
        );
        let fr = Header::new_checked(44, &p[72..]).unwrap();
        assert_eq!(fr.frag_offset(), Some(0));
        assert_eq!(fr.more_frags(), Some(true));
        assert_eq!(fr.frag_ident(), Some(0xabcd));
        assert_eq!(fr.routing_type(), None);
        assert_eq!(Header::new_checked(43, &p[48..70]), Err(Error::Truncated));
        // AH: payload len 4 -> (4 + 2) * 4 = 24 bytes, SPI 0x100, seq 7.
        let ah = [
            6, 4, 0, 0, 0, 0, 1, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        ];
        let ah = Header::new_checked(51, &ah).unwrap();
        assert_eq!(
            (ah.len(), ah.ah_spi(), ah.ah_seq()),
            (24, Some(0x100), Some(7))
        );
        assert_eq!(
            Header::new_checked(51, &[6, 0, 0, 0, 0, 0, 0, 0]),
            Err(Error::Malformed)
        );
    }

    #[test]
    fn chain_walks_to_udp() {
        let p = chain_packet();
        let mut c = Chain::new(ipv6::Packet::new_checked(&p).unwrap());
        let got: Vec<(usize, u8)> = c.by_ref().map(|i| (i.offset, i.header.kind())).collect();
        assert_eq!(got, vec![(40, 0), (48, 43), (72, 44)]);
        assert_eq!(
            (c.end(), c.next_header(), c.offset()),
            (ChainEnd::Upper, 17, 80)
        );
    }

    #[test]
    fn find_hdr_like_the_kernel() {
        let p = chain_packet();
        let tr = find_hdr(&p, None, true).unwrap();
        assert_eq!(
            tr,
            Found {
                proto: 17,
                offset: 80,
                fragoff: 0
            }
        );
        assert_eq!(find_hdr(&p, Some(43), false).unwrap().offset, 48);
        assert_eq!(find_hdr(&p, Some(60), false), Err(FindError::NotFound));
        // Cut inside the routing header: its first 4 bytes are all the kernel reads, so the walk
        // goes on and fails at the fragment header, which lies past the end.
        assert_eq!(find_hdr(&p[..52], None, true), Err(FindError::Truncated));
        assert_eq!(
            find_hdr(&p[..51], Some(43), false),
            Err(FindError::Truncated)
        );
        assert_eq!(find_hdr(&p[..52], Some(43), false).unwrap().offset, 48);
        // Cut right after the fragment header: the transport offset is past the end, not an error.
        assert_eq!(find_hdr(&p[..76], None, true).unwrap().offset, 80);
    }

    #[test]
    fn non_first_fragment_stops_the_walk() {
        let mut p = chain_packet();
        p[74] = 0x00;
        p[75] = 0xb9; // offset 23 * 8 = 184, M set
        assert_eq!(
            find_hdr(&p, None, true),
            Ok(Found {
                proto: 17,
                offset: 0,
                fragoff: 184
            })
        );
        assert_eq!(find_hdr(&p, Some(44), false).unwrap().fragoff, 184);
        // A non-first fragment followed by another extension header: -ENOENT.
        p[72] = 60;
        assert_eq!(find_hdr(&p, None, true), Err(FindError::NotFound));
        let mut c = Chain::new(ipv6::Packet::new_checked(&p).unwrap());
        assert_eq!(c.by_ref().count(), 3);
        assert_eq!(c.end(), ChainEnd::NonFirstFragment);
    }

    #[test]
    fn ah_stops_the_transport_walk() {
        let mut p = vec![0x60, 0, 0, 0, 0, 32, 51, 64];
        p.extend_from_slice(&[0; 32]);
        p.extend_from_slice(&[6, 4, 0, 0, 0, 0, 1, 0, 0, 0, 0, 7]);
        p.extend_from_slice(&[0; 12]);
        p.extend_from_slice(&[0; 20]); // TCP
        assert_eq!(
            find_hdr(&p, None, true).unwrap(),
            Found {
                proto: 51,
                offset: 40,
                fragoff: 0
            }
        );
        assert_eq!(
            find_hdr(&p, None, false).unwrap(),
            Found {
                proto: 6,
                offset: 64,
                fragoff: 0
            }
        );
        assert_eq!(find_hdr(&p, Some(51), false).unwrap().offset, 40);
    }

    #[test]
    fn ip6_option_iter_stops_on_overrun() {
        let mut it = OptionIter::new(&[0, 1, 1, 0, 0xc2, 4, 0, 1]);
        assert_eq!(it.next(), Some(Ip6Option { kind: 0, data: &[] }));
        assert_eq!(
            it.next(),
            Some(Ip6Option {
                kind: 1,
                data: &[0]
            })
        );
        assert_eq!(it.next(), None);
        assert!(it.malformed());
    }
}
