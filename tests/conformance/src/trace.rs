//! nftables trace events as the kernel sends them on the NFNLGRP_NFTRACE netlink group
//! (`NFT_MSG_TRACE`, built by nf_tables_trace.c), and the folding of one packet's events into
//! its [`Decision`].
//!
//! The harness reads the netlink messages itself rather than through `nft monitor trace`:
//! nft 1.0.6 aborts (`payload_expr_pctx_update: Assertion 'base->length > 0'`) while printing
//! the packet headers of some frames (an IPv6 AH header, for one), which would kill the
//! monitor in the middle of a run.

use std::fmt;

use crate::verdict::{Decision, Place, Source, Verdict};

/// `NFNL_SUBSYS_NFTABLES << 8 | NFT_MSG_TRACE`.
const MSG_TRACE: u16 = (10 << 8) | 17;
/// enum nft_trace_attributes (include/uapi/linux/netfilter/nf_tables.h).
const NFTA_TRACE_TABLE: u16 = 1;
const NFTA_TRACE_CHAIN: u16 = 2;
const NFTA_TRACE_RULE_HANDLE: u16 = 3;
const NFTA_TRACE_TYPE: u16 = 4;
const NFTA_TRACE_VERDICT: u16 = 5;
const NFTA_TRACE_ID: u16 = 6;
const NFTA_TRACE_MARK: u16 = 14;
const NFTA_TRACE_POLICY: u16 = 16;
/// enum nft_verdict_attributes.
const NFTA_VERDICT_CODE: u16 = 1;
const NFTA_VERDICT_CHAIN: u16 = 2;
/// enum nft_trace_types.
const NFT_TRACETYPE_POLICY: u32 = 1;
const NFT_TRACETYPE_RETURN: u32 = 2;
const NFT_TRACETYPE_RULE: u32 = 3;
/// Attribute type bits that are flags, not the type (NLA_F_NESTED, NLA_F_NET_BYTEORDER).
const NLA_TYPE_MASK: u16 = 0x3fff;

/// A verdict code as the trace reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TraceVerdict {
    /// NF_ACCEPT.
    Accept,
    /// NF_DROP.
    Drop,
    /// NFT_CONTINUE.
    Continue,
    /// NFT_RETURN.
    Return,
    /// NFT_JUMP to the chain.
    Jump(String),
    /// NFT_GOTO to the chain.
    Goto(String),
    /// Another code (NF_QUEUE, NF_STOLEN, NFT_BREAK...).
    Other(i32),
}

impl TraceVerdict {
    fn from_code(code: i32, chain: Option<String>) -> Self {
        match code {
            1 => TraceVerdict::Accept,
            0 => TraceVerdict::Drop,
            -1 => TraceVerdict::Continue,
            -5 => TraceVerdict::Return,
            -3 => TraceVerdict::Jump(chain.unwrap_or_default()),
            -4 => TraceVerdict::Goto(chain.unwrap_or_default()),
            c => TraceVerdict::Other(c),
        }
    }
}

impl fmt::Display for TraceVerdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TraceVerdict::Accept => f.write_str("accept"),
            TraceVerdict::Drop => f.write_str("drop"),
            TraceVerdict::Continue => f.write_str("continue"),
            TraceVerdict::Return => f.write_str("return"),
            TraceVerdict::Jump(c) => write!(f, "jump {c}"),
            TraceVerdict::Goto(c) => write!(f, "goto {c}"),
            TraceVerdict::Other(c) => write!(f, "code {c}"),
        }
    }
}

/// What one trace event reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TraceKind {
    /// A rule matched fully and gave a verdict (NFT_TRACETYPE_RULE).
    Rule {
        /// The rule's handle.
        handle: u64,
        /// Its verdict.
        verdict: TraceVerdict,
    },
    /// The end of a base chain: its policy (NFT_TRACETYPE_POLICY).
    Policy(TraceVerdict),
    /// NFT_TRACETYPE_RETURN.
    Return,
    /// Another type.
    Other(u32),
}

/// One trace event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceEvent {
    /// The trace id (a hash of the skb: the same for all events of one packet's walk).
    pub id: u32,
    /// Table family (NFPROTO_*: 1 inet, 5 netdev...).
    pub family: u8,
    /// Table name.
    pub table: String,
    /// Chain name.
    pub chain: String,
    /// What the event reports.
    pub kind: TraceKind,
    /// The packet mark, when not 0.
    pub mark: Option<u32>,
}

impl fmt::Display for TraceEvent {
    /// In the shape of `nft monitor trace`, without the packet headers.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let family = match self.family {
            1 => "inet",
            2 => "ip",
            3 => "arp",
            5 => "netdev",
            7 => "bridge",
            10 => "ip6",
            _ => "?",
        };
        write!(
            f,
            "trace id {:08x} {family} {} {} ",
            self.id, self.table, self.chain
        )?;
        match &self.kind {
            TraceKind::Rule { handle, verdict } => {
                write!(f, "rule handle {handle} (verdict {verdict})")?
            }
            TraceKind::Policy(v) => write!(f, "policy {v}")?,
            TraceKind::Return => f.write_str("return")?,
            TraceKind::Other(t) => write!(f, "type {t}")?,
        }
        if let Some(m) = self.mark {
            write!(f, " meta mark 0x{m:08x}")?;
        }
        Ok(())
    }
}

/// Splits `buf` into (type, payload) attributes; stops at the first malformed one.
fn attrs(mut buf: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        if buf.len() < 4 {
            return None;
        }
        let len = usize::from(u16::from_ne_bytes([buf[0], buf[1]]));
        let ty = u16::from_ne_bytes([buf[2], buf[3]]) & NLA_TYPE_MASK;
        if len < 4 || len > buf.len() {
            return None;
        }
        let payload = &buf[4..len];
        buf = &buf[len.next_multiple_of(4).min(buf.len())..];
        Some((ty, payload))
    })
}

fn be32(p: &[u8]) -> Option<u32> {
    Some(u32::from_be_bytes(p.get(..4)?.try_into().ok()?))
}

fn string(p: &[u8]) -> String {
    let end = p.iter().position(|&b| b == 0).unwrap_or(p.len());
    String::from_utf8_lossy(&p[..end]).into_owned()
}

/// Parses the trace events in one netlink datagram (other messages are ignored).
pub fn parse_datagram(mut buf: &[u8]) -> Vec<TraceEvent> {
    let mut out = Vec::new();
    while buf.len() >= 16 {
        let len = u32::from_ne_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
        let ty = u16::from_ne_bytes([buf[4], buf[5]]);
        if len < 16 || len > buf.len() {
            break;
        }
        let msg = &buf[16..len];
        buf = &buf[len.next_multiple_of(4).min(buf.len())..];
        if ty != MSG_TRACE || msg.len() < 4 {
            continue;
        }
        if let Some(ev) = parse_trace(msg[0], &msg[4..]) {
            out.push(ev);
        }
    }
    out
}

fn parse_trace(family: u8, body: &[u8]) -> Option<TraceEvent> {
    let (mut table, mut chain, mut handle, mut ty, mut id, mut mark, mut policy) =
        (None, None, None, None, None, None, None);
    let mut verdict = None;
    for (t, p) in attrs(body) {
        match t {
            NFTA_TRACE_TABLE => table = Some(string(p)),
            NFTA_TRACE_CHAIN => chain = Some(string(p)),
            NFTA_TRACE_RULE_HANDLE => {
                handle = p
                    .get(..8)
                    .map(|b| u64::from_be_bytes(b.try_into().unwrap_or_default()))
            }
            NFTA_TRACE_TYPE => ty = be32(p),
            NFTA_TRACE_ID => id = be32(p),
            NFTA_TRACE_MARK => mark = be32(p),
            NFTA_TRACE_POLICY => policy = be32(p),
            NFTA_TRACE_VERDICT => {
                let (mut code, mut target) = (None, None);
                for (vt, vp) in attrs(p) {
                    match vt {
                        NFTA_VERDICT_CODE => code = be32(vp),
                        NFTA_VERDICT_CHAIN => target = Some(string(vp)),
                        _ => {}
                    }
                }
                verdict = code.map(|c| TraceVerdict::from_code(c as i32, target));
            }
            _ => {}
        }
    }
    let kind = match ty? {
        NFT_TRACETYPE_RULE => TraceKind::Rule {
            handle: handle?,
            verdict: verdict?,
        },
        NFT_TRACETYPE_POLICY => TraceKind::Policy(TraceVerdict::from_code(policy? as i32, None)),
        NFT_TRACETYPE_RETURN => TraceKind::Return,
        other => TraceKind::Other(other),
    };
    Some(TraceEvent {
        id: id?,
        family,
        table: table?,
        chain: chain?,
        kind,
        mark: mark.filter(|&m| m != 0),
    })
}

/// Folds the trace events of one packet into its decision. The harness's own table frames the
/// walk: its head chain (lowest priority) sets nftrace, its tail chain (highest priority) only
/// runs when every other base chain accepted, so its policy event ends an accepted walk; a
/// drop ends a dropped one. Events are not told apart by trace id (a hash of the skb that a
/// later packet may share): the caller feeds the events that follow its frame's send.
#[derive(Debug)]
pub struct Walk {
    harness_table: String,
    tail_chain: String,
    last_accept: Option<Place>,
    events: Vec<TraceEvent>,
}

impl Walk {
    /// A walk that ignores `harness_table` except for the policy event of its `tail_chain`.
    pub fn new(harness_table: &str, tail_chain: &str) -> Self {
        Walk {
            harness_table: harness_table.to_string(),
            tail_chain: tail_chain.to_string(),
            last_accept: None,
            events: Vec::new(),
        }
    }

    /// The events fed so far.
    pub fn events(&self) -> &[TraceEvent] {
        &self.events
    }

    /// Whether an event of the walk arrived.
    pub fn started(&self) -> bool {
        !self.events.is_empty()
    }

    /// Feeds one event; returns the decision once the walk has ended.
    pub fn feed(&mut self, ev: &TraceEvent) -> Option<Decision> {
        self.events.push(ev.clone());
        let place = |source| Place {
            table: ev.table.clone(),
            chain: ev.chain.clone(),
            source,
        };
        if ev.table == self.harness_table {
            if ev.chain == self.tail_chain && matches!(ev.kind, TraceKind::Policy(_)) {
                return Some(Decision {
                    verdict: Verdict::Accept,
                    place: self.last_accept.take(),
                });
            }
            return None;
        }
        let (verdict, source) = match &ev.kind {
            TraceKind::Rule { handle, verdict } => (verdict, Source::Rule(*handle)),
            TraceKind::Policy(verdict) => (verdict, Source::Policy),
            TraceKind::Return | TraceKind::Other(_) => return None,
        };
        match verdict {
            TraceVerdict::Accept => {
                self.last_accept = Some(place(source));
                None
            }
            TraceVerdict::Drop => Some(Decision {
                verdict: Verdict::Drop,
                place: Some(place(source)),
            }),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr(ty: u16, payload: &[u8]) -> Vec<u8> {
        let mut a = ((4 + payload.len()) as u16).to_ne_bytes().to_vec();
        a.extend_from_slice(&ty.to_ne_bytes());
        a.extend_from_slice(payload);
        a.resize(a.len().next_multiple_of(4), 0);
        a
    }

    fn message(family: u8, attrs: &[Vec<u8>]) -> Vec<u8> {
        let body: Vec<u8> = attrs.concat();
        let len = 16 + 4 + body.len();
        let mut m = (len as u32).to_ne_bytes().to_vec();
        m.extend_from_slice(&MSG_TRACE.to_ne_bytes());
        m.extend_from_slice(&[0; 10]);
        m.extend_from_slice(&[family, 0, 0, 0]);
        m.extend_from_slice(&body);
        m
    }

    #[test]
    fn parses_rule_and_policy_events() {
        let verdict = [
            attr(NFTA_VERDICT_CODE, &(-3i32).to_be_bytes()),
            attr(NFTA_VERDICT_CHAIN, b"sub\0"),
        ]
        .concat();
        let rule = message(
            5,
            &[
                attr(NFTA_TRACE_TABLE, b"t\0"),
                attr(NFTA_TRACE_CHAIN, b"a\0"),
                attr(NFTA_TRACE_ID, &0x591f_420fu32.to_be_bytes()),
                attr(NFTA_TRACE_RULE_HANDLE, &6u64.to_be_bytes()),
                attr(NFTA_TRACE_TYPE, &3u32.to_be_bytes()),
                attr(NFTA_TRACE_VERDICT | 0x8000, &verdict),
            ],
        );
        let policy = message(
            5,
            &[
                attr(NFTA_TRACE_TABLE, b"t\0"),
                attr(NFTA_TRACE_CHAIN, b"b\0"),
                attr(NFTA_TRACE_ID, &0x591f_420fu32.to_be_bytes()),
                attr(NFTA_TRACE_TYPE, &1u32.to_be_bytes()),
                attr(NFTA_TRACE_POLICY, &0u32.to_be_bytes()),
                attr(NFTA_TRACE_MARK, &5u32.to_be_bytes()),
            ],
        );
        let evs = parse_datagram(&[rule, policy].concat());
        assert_eq!(evs.len(), 2);
        assert_eq!(
            evs[0].to_string(),
            "trace id 591f420f netdev t a rule handle 6 (verdict jump sub)"
        );
        assert_eq!(
            evs[1].to_string(),
            "trace id 591f420f netdev t b policy drop meta mark 0x00000005"
        );
        assert!(parse_datagram(&[1, 2, 3]).is_empty());
    }

    fn ev(id: u32, table: &str, chain: &str, kind: TraceKind) -> TraceEvent {
        TraceEvent {
            id,
            family: 5,
            table: table.into(),
            chain: chain.into(),
            kind,
            mark: None,
        }
    }

    #[test]
    fn walk_reports_last_base_chain_accept() {
        let mut w = Walk::new("wasp_trace", "tail");
        let rule = |h, v| TraceKind::Rule {
            handle: h,
            verdict: v,
        };
        let evs = [
            ev(1, "wasp_trace", "head", rule(3, TraceVerdict::Continue)),
            ev(
                1,
                "wasp_trace",
                "head",
                TraceKind::Policy(TraceVerdict::Accept),
            ),
            ev(1, "t", "a", rule(7, TraceVerdict::Accept)),
            ev(1, "t", "b", TraceKind::Policy(TraceVerdict::Accept)),
        ];
        for e in &evs {
            assert_eq!(w.feed(e), None, "{e}");
        }
        let d = w.feed(&ev(
            1,
            "wasp_trace",
            "tail",
            TraceKind::Policy(TraceVerdict::Accept),
        ));
        assert_eq!(d.unwrap().to_string(), "accept t b policy");
    }

    #[test]
    fn walk_ends_on_drop() {
        let mut w = Walk::new("wasp_trace", "tail");
        assert_eq!(
            w.feed(&ev(1, "t", "a", TraceKind::Policy(TraceVerdict::Accept))),
            None
        );
        let d = w.feed(&ev(
            1,
            "t",
            "sub",
            TraceKind::Rule {
                handle: 9,
                verdict: TraceVerdict::Drop,
            },
        ));
        assert_eq!(d.unwrap().to_string(), "drop t sub 9");
    }
}
