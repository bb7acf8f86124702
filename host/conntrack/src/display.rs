//! Snapshots of entries and their `conntrack -L` form.

use std::fmt;

use crate::status;
use crate::table::Entry;
use crate::tcp::{NS, TcpState};
use crate::tuple::{Tuple, proto};

/// One connection as `conntrack -L` shows it, taken at some `now_ns`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryInfo {
    /// The connection's id.
    pub id: u64,
    /// Original tuple.
    pub orig: Tuple,
    /// Reply tuple (after NAT).
    pub reply: Tuple,
    /// TCP state (TCP only).
    pub tcp_state: Option<TcpState>,
    /// [`crate::status`] bits.
    pub status: u32,
    /// `ct mark`.
    pub mark: u32,
    /// `ct label`: bit N is `1 << N`.
    pub label: u128,
    /// The event mask `ct event set` gave (stored only; see [`crate::Conntrack::set_events`]).
    pub events: u32,
    /// Time left before expiry, ns (for an unconfirmed entry, its whole timeout).
    pub timeout_ns: u64,
    /// Packets per direction (original, reply).
    pub packets: [u64; 2],
    /// Bytes per direction (IP length).
    pub bytes: [u64; 2],
    /// In the table (false for an unconfirmed entry).
    pub confirmed: bool,
}

impl EntryInfo {
    pub(crate) fn new(id: u64, e: &Entry, live: bool, now: u64) -> EntryInfo {
        EntryInfo {
            id,
            orig: e.tuple[0].to_tuple(),
            reply: e.tuple[1].to_tuple(),
            tcp_state: (e.tuple[0].proto == proto::TCP).then(|| e.tcp.state()),
            status: e.status,
            mark: e.mark,
            label: 0,
            events: 0,
            timeout_ns: if live {
                e.deadline.saturating_sub(now)
            } else {
                e.deadline
            },
            packets: e.packets,
            bytes: e.bytes,
            confirmed: live,
        }
    }
}

/// The protocol's name as `conntrack -L` prints it.
pub(crate) fn proto_name(p: u8) -> &'static str {
    match p {
        proto::TCP => "tcp",
        proto::UDP => "udp",
        proto::ICMP => "icmp",
        proto::ICMPV6 => "icmpv6",
        proto::UDPLITE => "udplite",
        33 => "dccp",
        47 => "gre",
        132 => "sctp",
        _ => "unknown",
    }
}

fn tuple(f: &mut fmt::Formatter<'_>, t: &Tuple) -> fmt::Result {
    write!(f, "src={} dst={} ", t.src, t.dst)?;
    match t.proto {
        proto::ICMP | proto::ICMPV6 => {
            write!(
                f,
                "type={} code={} id={} ",
                t.icmp_type(),
                t.icmp_code(),
                t.sport
            )
        }
        p if crate::tuple::has_ports(p) => write!(f, "sport={} dport={} ", t.sport, t.dport),
        _ => Ok(()),
    }
}

/// One line as `conntrack -L` prints it (libnetfilter_conntrack's default output):
/// `tcp      6 431999 ESTABLISHED src=10.0.0.1 dst=10.0.0.2 sport=40000 dport=80 src=10.0.0.2
/// dst=10.0.0.1 sport=80 dport=40000 [ASSURED] mark=0 use=1`, with `[UNREPLIED]` after the
/// original tuple until a reply is seen, `[OFFLOAD]` (and no TCP state) for an offloaded flow,
/// `zone=N` when not 0. The timeout is in whole seconds, rounded down. The alternate form
/// (`{:#}`) adds `packets=N bytes=N` after each tuple, as with `nf_conntrack_acct=1`.
impl fmt::Display for EntryInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = self.orig.proto;
        write!(f, "{:<8} {} {} ", proto_name(p), p, self.timeout_ns / NS)?;
        if let Some(s) = self.tcp_state
            && self.status & status::OFFLOAD == 0
        {
            write!(f, "{} ", s.name())?;
        }
        tuple(f, &self.orig)?;
        if f.alternate() {
            write!(f, "packets={} bytes={} ", self.packets[0], self.bytes[0])?;
        }
        if self.status & status::SEEN_REPLY == 0 {
            f.write_str("[UNREPLIED] ")?;
        }
        tuple(f, &self.reply)?;
        if f.alternate() {
            write!(f, "packets={} bytes={} ", self.packets[1], self.bytes[1])?;
        }
        if self.status & status::HW_OFFLOAD != 0 {
            f.write_str("[HW_OFFLOAD] ")?;
        } else if self.status & status::OFFLOAD != 0 {
            f.write_str("[OFFLOAD] ")?;
        }
        if self.status & status::ASSURED != 0 {
            f.write_str("[ASSURED] ")?;
        }
        write!(f, "mark={} ", self.mark)?;
        if self.orig.zone != 0 {
            write!(f, "zone={} ", self.orig.zone)?;
        }
        f.write_str("use=1")
    }
}
