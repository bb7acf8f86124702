//! TCP tracking: the kernel's state table (`tcp_conntracks` in `nf_conntrack_proto_tcp.c`), flag
//! validation (`tcp_valid_flags`), the choice of timeout, and the ASSURED rule.
//!
//! No window tracking: sequence and acknowledgement numbers are never checked against the
//! windows, so no packet is `invalid` for being out of window. That is closest to the kernel with
//! `nf_conntrack_tcp_be_liberal=1` (which the kernel also uses for connections picked up
//! mid-stream). What the kernel's `tcp_in_window` keeps for timeouts is kept: each direction's
//! highest sequence end (`td_end`), the "data unacknowledged" flag that caps the timeout at the
//! UNACK value (300 s), and the retransmission counter that caps it at the MAX_RETRANS value
//! (300 s) after 3 identical ACK segments; a zero window caps it too.

use crate::Dir;

/// TCP conntrack states (the kernel's `enum tcp_conntrack`, same numbers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(u8)]
pub enum TcpState {
    /// No packet seen (only before the first one).
    #[default]
    None = 0,
    /// SYN seen.
    SynSent = 1,
    /// SYN/ACK seen.
    SynRecv = 2,
    /// ACK after SYN/ACK seen (or picked up mid-stream).
    Established = 3,
    /// FIN seen.
    FinWait = 4,
    /// ACK seen after FIN.
    CloseWait = 5,
    /// FIN seen in both directions.
    LastAck = 6,
    /// Last ACK seen.
    TimeWait = 7,
    /// RST seen.
    Close = 8,
    /// SYN seen from the reply direction (simultaneous open).
    SynSent2 = 9,
}

impl TcpState {
    /// The name `conntrack -L` prints (`tcp_conntrack_names`).
    pub fn name(self) -> &'static str {
        match self {
            TcpState::None => "NONE",
            TcpState::SynSent => "SYN_SENT",
            TcpState::SynRecv => "SYN_RECV",
            TcpState::Established => "ESTABLISHED",
            TcpState::FinWait => "FIN_WAIT",
            TcpState::CloseWait => "CLOSE_WAIT",
            TcpState::LastAck => "LAST_ACK",
            TcpState::TimeWait => "TIME_WAIT",
            TcpState::Close => "CLOSE",
            TcpState::SynSent2 => "SYN_SENT2",
        }
    }

    fn from_u8(v: u8) -> TcpState {
        match v {
            1 => TcpState::SynSent,
            2 => TcpState::SynRecv,
            3 => TcpState::Established,
            4 => TcpState::FinWait,
            5 => TcpState::CloseWait,
            6 => TcpState::LastAck,
            7 => TcpState::TimeWait,
            8 => TcpState::Close,
            9 => TcpState::SynSent2,
            _ => TcpState::None,
        }
    }
}

/// Timeouts in seconds, as the kernel's sysctls. [`Timeouts::default`] holds the defaults read on
/// this machine (Linux 6.18, `sysctl -a | grep nf_conntrack_.*timeout`):
/// `nf_conntrack_tcp_timeout_syn_sent = 120`, `_syn_recv = 60`, `_established = 432000`,
/// `_fin_wait = 120`, `_close_wait = 60`, `_last_ack = 30`, `_time_wait = 120`, `_close = 10`,
/// `_max_retrans = 300`, `_unacknowledged = 300`, `nf_conntrack_udp_timeout = 30`,
/// `_udp_timeout_stream = 120`, `nf_conntrack_icmp_timeout = 30`, `_icmpv6_timeout = 30`,
/// `nf_conntrack_generic_timeout = 600`; SYN_SENT2 has no sysctl and is 120 s in
/// `tcp_timeouts[]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// TCP timeout per [`TcpState`] (index = state number), seconds.
    pub tcp: [u32; 10],
    /// TCP with retransmissions (`nf_conntrack_tcp_timeout_max_retrans`), seconds.
    pub tcp_max_retrans: u32,
    /// TCP with unacknowledged data, also the cap for a connection picked up mid-stream
    /// (`nf_conntrack_tcp_timeout_unacknowledged`), seconds.
    pub tcp_unack: u32,
    /// Retransmitted ACKs before `tcp_max_retrans` applies (`nf_conntrack_tcp_max_retrans`).
    pub tcp_max_retrans_count: u8,
    /// UDP before a reply (`nf_conntrack_udp_timeout`), seconds.
    pub udp: u32,
    /// UDP stream (`nf_conntrack_udp_timeout_stream`), seconds.
    pub udp_stream: u32,
    /// ICMP (`nf_conntrack_icmp_timeout`), seconds.
    pub icmp: u32,
    /// ICMPv6 (`nf_conntrack_icmpv6_timeout`), seconds.
    pub icmpv6: u32,
    /// Other protocols (`nf_conntrack_generic_timeout`), seconds.
    pub generic: u32,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            // NONE (unused; the kernel copies SYN_SENT there), SYN_SENT, SYN_RECV, ESTABLISHED,
            // FIN_WAIT, CLOSE_WAIT, LAST_ACK, TIME_WAIT, CLOSE, SYN_SENT2.
            tcp: [120, 120, 60, 432_000, 120, 60, 30, 120, 10, 120],
            tcp_max_retrans: 300,
            tcp_unack: 300,
            tcp_max_retrans_count: 3,
            udp: 30,
            udp_stream: 120,
            icmp: 30,
            icmpv6: 30,
            generic: 600,
        }
    }
}

/// Nanoseconds per second.
pub(crate) const NS: u64 = 1_000_000_000;

/// TCP header flag bits.
pub(crate) mod flags {
    pub const FIN: u8 = 0x01;
    pub const SYN: u8 = 0x02;
    pub const RST: u8 = 0x04;
    pub const PSH: u8 = 0x08;
    pub const ACK: u8 = 0x10;
    pub const URG: u8 = 0x20;
    pub const ECE: u8 = 0x40;
    pub const CWR: u8 = 0x80;
}

/// `tcp_valid_flags`: the flag combinations (PSH, ECE, CWR ignored) the kernel accepts.
pub(crate) fn valid_flags(f: u8) -> bool {
    use flags::*;
    let f = f & !(ECE | CWR | PSH);
    matches!(
        f,
        x if x == SYN
            || x == SYN | URG
            || x == SYN | ACK
            || x == RST
            || x == RST | ACK
            || x == FIN | ACK
            || x == FIN | ACK | URG
            || x == ACK
            || x == ACK | URG
    )
}

/// Index into the state table (`enum tcp_bit_set`, `get_conntrack_index`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Index {
    Syn = 0,
    SynAck = 1,
    Fin = 2,
    Ack = 3,
    Rst = 4,
    None = 5,
}

pub(crate) fn index(f: u8) -> Index {
    use flags::*;
    if f & RST != 0 {
        Index::Rst
    } else if f & SYN != 0 {
        if f & ACK != 0 {
            Index::SynAck
        } else {
            Index::Syn
        }
    } else if f & FIN != 0 {
        Index::Fin
    } else if f & ACK != 0 {
        Index::Ack
    } else {
        Index::None
    }
}

/// Table cell: a state number, IV (invalid) or IG (ignore).
const IV: u8 = 10;
const IG: u8 = 11;
const SS: u8 = 1;
const SR: u8 = 2;
const ES: u8 = 3;
const FW: u8 = 4;
const CW: u8 = 5;
const LA: u8 = 6;
const TW: u8 = 7;
const CL: u8 = 8;
const S2: u8 = 9;

/// `tcp_conntracks[dir][index][state]` as in Linux 6.x (columns: NONE, SYN_SENT, SYN_RECV,
/// ESTABLISHED, FIN_WAIT, CLOSE_WAIT, LAST_ACK, TIME_WAIT, CLOSE, SYN_SENT2).
const TABLE: [[[u8; 10]; 6]; 2] = [
    [
        /* syn    */ [SS, SS, IG, IG, IG, IG, IG, SS, SS, S2],
        /* synack */ [IV, IV, SR, IV, IV, IV, IV, IV, IV, SR],
        /* fin    */ [IV, IV, FW, FW, LA, LA, LA, TW, CL, IV],
        /* ack    */ [ES, IV, ES, ES, CW, CW, TW, TW, CL, IV],
        /* rst    */ [IV, CL, CL, CL, CL, CL, CL, CL, CL, CL],
        /* none   */ [IV, IV, IV, IV, IV, IV, IV, IV, IV, IV],
    ],
    [
        /* syn    */ [IV, S2, IV, IV, IV, IV, IV, SS, IV, S2],
        /* synack */ [IV, SR, IG, IG, IG, IG, IG, IG, IG, SR],
        /* fin    */ [IV, IV, FW, FW, LA, LA, LA, TW, CL, IV],
        /* ack    */ [IV, IG, SR, ES, CW, CW, TW, TW, CL, IG],
        /* rst    */ [IV, CL, CL, CL, CL, CL, CL, CL, CL, CL],
        /* none   */ [IV, IV, IV, IV, IV, IV, IV, IV, IV, IV],
    ],
];

/// Per-direction flags (`IP_CT_TCP_FLAG_*`).
const CLOSE_INIT: u8 = 0x04;
const DATA_UNACK: u8 = 0x10;
/// `last_flags` bits.
const SIMULTANEOUS_OPEN: u8 = 0x04;
const EXP_CHALLENGE_ACK: u8 = 0x40;

/// The TCP fields of one segment that tracking reads.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Segment {
    pub flags: u8,
    pub seq: u32,
    pub ack: u32,
    pub win: u16,
    /// Payload length in bytes (IP payload minus the TCP header).
    pub payload: u32,
}

impl Segment {
    /// `segment_seq_plus_len`.
    fn end(&self) -> u32 {
        self.seq
            .wrapping_add(self.payload)
            .wrapping_add(u32::from(self.flags & flags::SYN != 0))
            .wrapping_add(u32::from(self.flags & flags::FIN != 0))
    }
}

/// `after(a, b)` of the kernel's sequence arithmetic.
fn after(a: u32, b: u32) -> bool {
    (b.wrapping_sub(a) as i32) < 0
}

/// TCP tracking state of one connection (a subset of `struct ip_ct_tcp`).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Tcp {
    pub state: u8,
    last_index: u8,
    last_dir: u8,
    retrans: u8,
    last_flags: u8,
    /// Per direction: `IP_CT_TCP_FLAG_*`.
    flag: [u8; 2],
    /// Per direction: sender state initialised (the kernel's `td_maxwin != 0`).
    seen: [bool; 2],
    last_win: u16,
    td_end: [u32; 2],
    last_seq: u32,
    last_ack: u32,
    last_end: u32,
}

/// What the TCP tracker decided for a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Accepted; set the timeout to this many seconds and count the packet
    /// (`nf_ct_refresh_acct`).
    Refresh(u32),
    /// Accepted without refreshing or counting (ignored packets, SYN retransmissions).
    Accept,
    /// `-NF_ACCEPT`: the packet gets no conntrack (`invalid`); the entry is unchanged.
    Invalid,
    /// A SYN reopening a closed connection: delete the entry and track the packet as new
    /// (`nf_ct_kill` and `-NF_REPEAT`).
    Reopen,
}

impl Tcp {
    /// `tcp_new`: the state of a connection's first packet; `None` if it cannot start one (only
    /// SYN, and an ACK picked up mid-stream as with `nf_conntrack_tcp_loose=1`, can).
    pub fn new(seg: &Segment) -> Option<Tcp> {
        let s = TABLE[0][index(seg.flags) as usize][0];
        if s >= IV {
            return None;
        }
        let mut t = Tcp {
            last_index: Index::None as u8,
            ..Tcp::default()
        };
        t.td_end[0] = seg.end();
        t.seen[0] = true;
        Some(t)
    }

    pub fn state(&self) -> TcpState {
        TcpState::from_u8(self.state)
    }

    /// Force a state (flowtable teardown).
    pub fn set_state(&mut self, s: TcpState) {
        self.state = s as u8;
    }

    /// Whether conncount treats the connection as closed (`already_closed`: TIME_WAIT or
    /// CLOSE).
    pub fn closed(&self) -> bool {
        matches!(self.state(), TcpState::TimeWait | TcpState::Close)
    }

    /// `nf_conntrack_tcp_packet` for a segment in `dir`. `seen_reply` and `assured` are the
    /// entry's status bits before this packet; returns the verdict and whether to set ASSURED.
    /// A RST while no reply was seen asks for the entry's deletion through `kill`.
    pub fn packet(
        &mut self,
        dir: Dir,
        seg: &Segment,
        seen_reply: bool,
        assured: bool,
        to: &Timeouts,
    ) -> (Verdict, bool, bool) {
        let d = dir as usize;
        let idx = index(seg.flags);
        let old = self.state;
        let mut new = TABLE[d][idx as usize][usize::from(old.min(9))];
        let mut old_eff = old;
        let mut skip_window = false;
        match new {
            SS if old >= TW => {
                if (self.flag[d] | self.flag[1 - d]) & CLOSE_INIT != 0
                    || (self.last_dir == d as u8 && self.last_index == Index::Rst as u8)
                {
                    return (Verdict::Reopen, false, false);
                }
                if let Some(v) = self.ignore(dir, idx, seg, &mut new, &mut old_eff) {
                    return (v, false, false);
                }
            }
            IG => {
                if let Some(v) = self.ignore(dir, idx, seg, &mut new, &mut old_eff) {
                    return (v, false, false);
                }
            }
            IV => return (Verdict::Invalid, false, false),
            TW if old == LA
                && idx == Index::Ack
                && self.last_dir != d as u8
                && self.last_index == Index::Syn as u8
                && self.last_flags & EXP_CHALLENGE_ACK != 0 =>
            {
                // An RFC 5961 challenge ACK, not the last ACK.
                self.last_flags &= !EXP_CHALLENGE_ACK;
                return (Verdict::Accept, false, false);
            }
            S2 => self.last_flags |= SIMULTANEOUS_OPEN,
            SR if dir == Dir::Reply
                && idx == Index::Ack
                && self.last_flags & SIMULTANEOUS_OPEN != 0 =>
            {
                new = ES;
            }
            CL => {
                // Sequence checks of RSTs need window tracking; every RST is in window here.
                skip_window = true;
            }
            _ => {}
        }
        if !skip_window {
            self.in_window(dir, idx, seg, old_eff);
        }
        // in_window:
        self.last_index = idx as u8;
        self.last_dir = d as u8;
        self.state = new;
        if old_eff != new && new == FW {
            self.flag[d] |= CLOSE_INIT;
        }
        let t = &to.tcp;
        let state_t = t[usize::from(new)];
        let mut timeout =
            if self.retrans >= to.tcp_max_retrans_count && state_t > to.tcp_max_retrans {
                to.tcp_max_retrans
            } else if idx == Index::Rst {
                t[TcpState::Close as usize]
            } else if (self.flag[0] | self.flag[1]) & DATA_UNACK != 0 && state_t > to.tcp_unack {
                to.tcp_unack
            } else if self.last_win == 0 && state_t > to.tcp_max_retrans {
                to.tcp_max_retrans
            } else {
                state_t
            };
        let mut set_assured = false;
        let mut kill = false;
        if !seen_reply {
            if seg.flags & flags::RST != 0 {
                // Only a RST as reply: no connection, delete it now (nf_ct_kill_acct).
                kill = true;
            } else if idx == Index::Syn && old_eff == SS {
                // No timeout renewal on SYN retransmission.
                return (Verdict::Accept, false, false);
            } else if new == ES && timeout > to.tcp_unack {
                // Picked up mid-stream: no long ESTABLISHED timeout before a reply.
                timeout = to.tcp_unack;
            }
        } else if !assured && (old_eff == SR || old_eff == ES) && new == ES {
            set_assured = true;
        }
        (Verdict::Refresh(timeout), set_assured, kill)
    }

    /// The `TCP_CONNTRACK_IGNORE` case: `Some(verdict)` to return, or `None` after resyncing on a
    /// SYN/ACK that answers a SYN ignored earlier (then `new`/`old` are SYN_RECV/SYN_SENT).
    fn ignore(
        &mut self,
        dir: Dir,
        idx: Index,
        seg: &Segment,
        new: &mut u8,
        old: &mut u8,
    ) -> Option<Verdict> {
        let d = dir as u8;
        if idx == Index::SynAck
            && self.last_index == Index::Syn as u8
            && self.last_dir != d
            && seg.ack == self.last_end
        {
            *old = SS;
            *new = SR;
            let ld = usize::from(self.last_dir & 1);
            self.td_end[ld] = self.last_end;
            self.seen[ld] = true;
            self.last_flags &= !EXP_CHALLENGE_ACK;
            self.flag[ld] = 0;
            self.seen[usize::from(d)] = false;
            self.td_end[usize::from(d)] = 0;
            self.flag[usize::from(d)] = 0;
            return None;
        }
        let old_state = *old;
        self.last_index = idx as u8;
        self.last_dir = d;
        self.last_seq = seg.seq;
        self.last_end = seg.end();
        self.last_win = seg.win;
        if idx == Index::Syn && dir == Dir::Original {
            self.last_flags = 0;
            if old_state == LA {
                self.last_flags |= EXP_CHALLENGE_ACK;
            }
        }
        if old_state == SS && idx == Index::Ack && dir == Dir::Reply {
            self.last_ack = seg.ack;
        }
        Some(Verdict::Accept)
    }

    /// The bookkeeping half of `tcp_in_window` (no window checks, see the module docs).
    fn in_window(&mut self, dir: Dir, idx: Index, seg: &Segment, state: u8) {
        let s = dir as usize;
        let r = 1 - s;
        let mut end = seg.end();
        let mut seq = seg.seq;
        let mut ack = seg.ack;
        let is = |f: u8| seg.flags & f != 0;
        if !self.seen[s] {
            self.td_end[s] = end;
            self.seen[s] = true;
            if is(flags::SYN) {
                if !is(flags::ACK) {
                    return;
                }
            } else if !self.seen[r] {
                self.td_end[r] = ack;
            } else if ack == self.td_end[r].wrapping_add(1) {
                self.td_end[r] = self.td_end[r].wrapping_add(1);
            }
        } else if is(flags::SYN) && after(end, self.td_end[s]) && (state == SS || state == SR) {
            self.td_end[s] = end;
            if dir == Dir::Reply && !is(flags::ACK) {
                return;
            }
        }
        if !is(flags::ACK) || (is(flags::RST) && ack == 0) {
            ack = self.td_end[r];
        }
        if is(flags::RST) && seq == 0 && state == SS {
            seq = self.td_end[s];
            end = seq;
        }
        if after(end, self.td_end[s]) {
            self.td_end[s] = end;
            self.flag[s] |= DATA_UNACK;
        }
        if ack == self.td_end[r] {
            self.flag[r] &= !DATA_UNACK;
        }
        if idx == Index::Ack {
            if self.last_dir == s as u8
                && self.last_seq == seq
                && self.last_ack == ack
                && self.last_end == end
                && self.last_win == seg.win
            {
                self.retrans = self.retrans.saturating_add(1);
            } else {
                self.last_dir = s as u8;
                self.last_seq = seq;
                self.last_ack = ack;
                self.last_end = end;
                self.last_win = seg.win;
                self.retrans = 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_flag_combinations() {
        use flags::*;
        for f in [
            SYN,
            SYN | ACK,
            RST,
            RST | ACK,
            FIN | ACK,
            ACK,
            ACK | PSH,
            SYN | ECE | CWR,
        ] {
            assert!(valid_flags(f), "{f:#x}");
        }
        for f in [
            0,
            FIN,
            SYN | FIN,
            SYN | RST,
            FIN | RST | ACK,
            SYN | ACK | URG,
            URG,
        ] {
            assert!(!valid_flags(f), "{f:#x}");
        }
    }

    #[test]
    fn index_order_rst_first() {
        use flags::*;
        assert_eq!(index(RST | SYN), Index::Rst);
        assert_eq!(index(SYN | ACK), Index::SynAck);
        assert_eq!(index(FIN | ACK), Index::Fin);
        assert_eq!(index(PSH), Index::None);
    }
}
