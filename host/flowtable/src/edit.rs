//! [`FlowEdit`]: what the fast path does to one packet, applied by the caller while it copies
//! the frame into its send buffer (one copy, no lock held).

use std::net::IpAddr;
use std::sync::Arc;

use wasp_wire::{ethernet, ipv4, ipv6, tcp, th, udp};

use crate::key::{Dir, TCP};
use crate::route::{DirPlan, TunnelWork};

/// Why [`FlowEdit::write`] wrote nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum EditError {
    /// The output buffer is shorter than [`FlowEdit::out_len`].
    #[error("output buffer of {have} bytes, {need} needed")]
    ShortBuffer {
        /// Bytes needed.
        need: usize,
        /// Bytes given.
        have: usize,
    },
    /// The input is shorter than the frame the edit was made for (not the same frame).
    #[error("input frame of {have} bytes, the edit was made for one of at least {need}")]
    WrongInput {
        /// Bytes the edit reads.
        need: usize,
        /// Bytes given.
        have: usize,
    },
}

/// The rewrite of one packet of an offloaded flow, made by [`crate::Flowtable::fast_path`] for
/// the frame it was given. It holds the flow direction's cached route (shared, immutable) and
/// where the packet's headers are; [`FlowEdit::write`] makes the frame to send:
///
/// 1. a decapsulating direction drops the outer Ethernet + IP + UDP + Geneve (`strip` bytes);
///    Ethernet padding after the IP packet is dropped too (as `pskb_trim_rcsum`);
/// 2. the Ethernet destination and source become the route's `dmac` and `smac`
///    (`dev_hard_header` in `nf_flow_queue_xmit`);
/// 3. NAT: ports then addresses, each checksum updated incrementally (RFC 1624) from deltas
///    computed when the flow was added: the IPv4 header checksum, the TCP/UDP checksum with the
///    pseudo-header; a UDP checksum of 0 (none, IPv4) stays 0 and a result of 0 is sent as
///    0xffff (`CSUM_MANGLED_0`), as `nf_flow_nat_port_udp`;
/// 4. the TTL (with the IPv4 checksum) or the hop limit is decremented (`ip_decrease_ttl`,
///    `ip6h->hop_limit--`);
/// 5. an encapsulating direction prepends its [`crate::EncapTemplate`] with the lengths and
///    checksums set for this packet.
#[derive(Debug, Clone)]
pub struct FlowEdit {
    pub(crate) plan: Arc<DirPlan>,
    pub(crate) dir: Dir,
    /// Bytes dropped in front (outer headers of a decapsulated packet).
    pub(crate) strip: usize,
    /// IP packet length, bytes.
    pub(crate) l3_len: usize,
    pub(crate) ipv6: bool,
}

impl FlowEdit {
    /// Length in bytes of the frame [`FlowEdit::write`] makes: the template (encap) + 14 + the
    /// IP packet's length.
    pub fn out_len(&self) -> usize {
        self.plan.encap_len() + ethernet::HEADER_LEN + self.l3_len
    }

    /// Bytes of the input frame the edit reads: the outer headers (decap) + 14 + the IP
    /// packet's length. Bytes after these (Ethernet padding) are not sent.
    pub fn in_len(&self) -> usize {
        self.strip + ethernet::HEADER_LEN + self.l3_len
    }

    /// Which direction of the flow the packet is.
    pub fn dir(&self) -> Dir {
        self.dir
    }

    /// Output device id.
    pub fn out_dev(&self) -> u16 {
        self.plan.route.out_dev
    }

    /// Write the frame to send into `out[..self.out_len()]` from `input` (the frame given to
    /// the fast path) and return its length. Errors, with nothing written: `out` too short, or
    /// `input` shorter than [`FlowEdit::in_len`].
    pub fn write(&self, input: &[u8], out: &mut [u8]) -> Result<usize, EditError> {
        let need = self.out_len();
        if out.len() < need {
            return Err(EditError::ShortBuffer {
                need,
                have: out.len(),
            });
        }
        if input.len() < self.in_len() {
            return Err(EditError::WrongInput {
                need: self.in_len(),
                have: input.len(),
            });
        }
        let t = self.plan.encap_len();
        let inner_len = ethernet::HEADER_LEN + self.l3_len;
        let frame = &mut out[t..t + inner_len];
        frame.copy_from_slice(&input[self.strip..self.strip + inner_len]);
        self.rewrite(frame);
        if let TunnelWork::Encap(tpl) = &self.plan.route.tunnel {
            tpl.write(&mut out[..need], inner_len);
        }
        Ok(need)
    }

    /// [`FlowEdit::write`] into a new buffer.
    pub fn to_vec(&self, input: &[u8]) -> Result<Vec<u8>, EditError> {
        let mut v = vec![0; self.out_len()];
        self.write(input, &mut v)?;
        Ok(v)
    }

    /// Steps 2-4 on `f`, the forwarded Ethernet frame (14 + `l3_len` bytes; the fast path's
    /// packets have an IP header without options or extension headers, and a whole TCP or UDP
    /// header: `parse_at`).
    fn rewrite(&self, f: &mut [u8]) {
        let r = &self.plan.route;
        let Ok(mut eth) = ethernet::FrameMut::new_checked(f) else {
            return;
        };
        eth.set_dst(r.dmac);
        eth.set_src(r.smac);
        let ip_len = if self.ipv6 {
            ipv6::HEADER_LEN
        } else {
            ipv4::MIN_HEADER_LEN
        };
        let Some((l3, l4)) = eth.payload_mut().split_at_mut_checked(ip_len) else {
            return;
        };
        if let Some(n) = &self.plan.nat {
            if let Ok(mut ports) = th::PortsMut::new_checked(l4) {
                if let Some(p) = n.src_port {
                    ports.set_src_port(p);
                }
                if let Some(p) = n.dst_port {
                    ports.set_dst_port(p);
                }
            }
            match (n.src, n.dst) {
                (s, d) if !self.ipv6 => {
                    if let Ok(mut h) = ipv4::PacketMut::new_checked(l3) {
                        if let Some(IpAddr::V4(a)) = s {
                            h.set_src(a.octets());
                        }
                        if let Some(IpAddr::V4(a)) = d {
                            h.set_dst(a.octets());
                        }
                    }
                }
                (s, d) => {
                    if let Ok(mut h) = ipv6::PacketMut::new_checked(l3) {
                        if let Some(IpAddr::V6(a)) = s {
                            h.set_src(a.octets());
                        }
                        if let Some(IpAddr::V6(a)) = d {
                            h.set_dst(a.octets());
                        }
                    }
                }
            }
            if self.plan.l4proto == TCP {
                if let Ok(mut t) = tcp::PacketMut::new_checked(l4) {
                    t.apply_checksum_delta(n.l4_delta);
                }
            } else if let Ok(mut u) = udp::PacketMut::new_checked(l4) {
                let c = udp::apply_checksum_delta(u.checksum(), n.l4_delta);
                u.set_checksum(c);
            }
        }
        if self.ipv6 {
            if let (true, Ok(mut h)) = (r.dec_ttl, ipv6::PacketMut::new_checked(l3)) {
                h.decrement_hop_limit();
            }
        } else if let Ok(mut h) = ipv4::PacketMut::new_checked(l3) {
            let mut delta = self.plan.nat.as_ref().map_or(0, |n| n.l3_delta);
            if r.dec_ttl {
                h.set_ttl(h.ttl().wrapping_sub(1));
                delta += ipv4::TTL_DECREMENT_DELTA;
            }
            if delta != 0 {
                h.apply_checksum_delta(delta);
            }
        }
    }
}
