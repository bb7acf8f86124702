//! Evaluation of rules for one packet, with the kernel's semantics (nft_do_chain): the operations
//! shared by both evaluators, and the plain per-packet walk used as the reference that the
//! vector pipeline must agree with.

use wasp_ruleset::model::{ObjKind, Policy};

use crate::calc::CalcEnv;
use crate::compiled::{self, ChainId, CtSetKey, Op, Program};
use crate::expr::{KEY_MAX, PktState, StmtOut, build_key};
use crate::ext::{
    CounterUse, DupPoint, Edited, ExtEdit, ExtKind, ExtPacket, ExtSite, ExtVerdict, Extensions,
    Fallback,
};
use crate::packet::{Decision, FinalVerdict, MAX_VECTOR, OutId, Packet, TraceEvent, TraceSink};
use crate::trace::{log_text, verdict_text};

/// Kernel jump stack size (`NFT_JUMP_STACK_SIZE`).
pub(crate) const JUMP_STACK: usize = 16;

/// What one operation did to one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OpRes {
    /// Go on with the next operation.
    Pass,
    /// The rule stops here (NFT_BREAK): go on with the next rule.
    Break,
    /// The rule ends with this verdict.
    Verdict(compiled::Verdict),
}

/// Mutable things an operation may touch besides the packet's own state.
pub(crate) struct Effects<'a, 'b> {
    /// Where trace and log events go.
    pub trace: Option<&'a mut (dyn TraceSink + 'b)>,
    /// `trace` wants the walk's events (rules, chain ends, plugins), not only `log` lines
    /// ([`TraceSink::walk`]); `false` without a sink.
    pub walk: bool,
    /// `trace` wants the walk events of marked packets only ([`TraceSink::marked_only`]).
    pub marked_only: bool,
    /// Packets of this call (bits by index) that `meta nftrace set 1` marked.
    pub marked: u64,
    /// `meta oifname` text, for log lines.
    pub oif: &'a str,
    /// Set elements found by the operation running now whose counter counts them: their
    /// packets go to the set's counter site in one call ([`flush_hits`]).
    pub hits: &'a mut ElemHits,
    /// The packet path's time, ns after the engine's epoch (set element expiry).
    pub now: u64,
    /// Plugins.
    pub ext: ExtFx<'a>,
    /// The lists behind `ct count` (none: every `ct count` ends its rule).
    pub conn: Option<&'a dyn crate::conn::ConnCount>,
    /// The packet path's clock as the caller gave it, ns (conntrack's time).
    pub clock: u64,
    /// The rare statement outputs of the walk's packets (see [`PktState::rare`]); cleared
    /// by the caller before each vector.
    pub rare: &'a mut Vec<StmtOut>,
}

impl Effects<'_, '_> {
    /// The rare outputs of the packet of `st`, made on first use.
    pub fn rare(&mut self, st: &mut PktState) -> &mut StmtOut {
        if st.rare == 0 {
            self.rare.push(StmtOut::default());
            st.rare = self.rare.len().min(usize::from(u8::MAX)) as u8;
        }
        &mut self.rare[usize::from(st.rare - 1)]
    }
}

/// The rare outputs of the packet of `st` in `rare` (a vector's, see [`Effects::rare`]).
pub(crate) fn rare_of(rare: &[StmtOut], st: &PktState) -> StmtOut {
    st.rare
        .checked_sub(1)
        .and_then(|i| rare.get(usize::from(i)))
        .copied()
        .unwrap_or_default()
}

/// What plugin use sites need: the extension (none installed: every site gives its
/// fallback), the sites, and where edits go.
pub(crate) struct ExtFx<'a> {
    /// The plugins of this worker.
    pub ext: Option<&'a mut dyn Extensions>,
    /// The use sites (kind and fallback of each).
    pub sites: &'a [ExtSite],
    /// Edits of the call, by packet index in the caller's input.
    pub edits: &'a mut Vec<(usize, ExtEdit)>,
    /// Where `dup` statements ran among `edits` (recorded only with plugins installed: without
    /// them nothing edits).
    pub dups: &'a mut Vec<DupPoint>,
    /// Edits as the extension returns them (by index in its call).
    pub scratch: &'a mut Vec<(usize, ExtEdit)>,
    /// Index in the caller's input of the vector's packet 0 (edits are reported by it).
    pub first: usize,
    /// What each counter site the compiler made counts (parallel to `sites`; `None` for a
    /// plugin use written in the ruleset).
    pub counter_uses: &'a [Option<CounterUse>],
}

/// Set elements found by one operation for a vector whose counter counts them: (packet index
/// in the vector, element's counter slot), for the set's counter site.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ElemHits {
    /// The set's counter site.
    pub site: u32,
    /// Hits recorded.
    pub n: usize,
    /// (packet index, element's counter slot).
    pub hits: [(usize, u32); MAX_VECTOR],
}

impl Default for ElemHits {
    fn default() -> Self {
        ElemHits {
            site: 0,
            n: 0,
            hits: [(0, 0); MAX_VECTOR],
        }
    }
}

/// Count the recorded element hits: one call of the set's counter site with the packets
/// (`pkt(i)` gives packet `i` of the vector as the counter sees it, `elem` then set).
pub(crate) fn flush_hits<'p>(fx: &mut Effects<'_, '_>, pkt: impl Fn(usize) -> ExtPacket<'p>) {
    let n = std::mem::take(&mut fx.hits.n);
    if n == 0 {
        return;
    }
    let mut pk = [NO_PACKET; MAX_VECTOR];
    let mut idx = [0usize; MAX_VECTOR];
    for (k, &(i, elem)) in fx.hits.hits[..n].iter().enumerate() {
        pk[k] = ExtPacket { elem, ..pkt(i) };
        idx[k] = i;
    }
    let mut res = [OpRes::Pass; MAX_VECTOR];
    ext_call(fx, fx.hits.site, &pk[..n], &idx[..n], &mut res[..n]);
}

/// The packet as a plugin sees it (`wit/plugin.wit`'s packet header), at this point of the
/// walk (`st.mark`). For a counter (`counter`), `len` is the packet's `skb->len` at the hook,
/// which nft's counter adds (see [`CounterUse`]).
pub(crate) fn ext_packet<'a>(p: &Packet<'a>, st: &PktState, counter: bool) -> ExtPacket<'a> {
    let m = &p.meta;
    let l4 = m.l4.filter(|l| l.fragoff == 0);
    ExtPacket {
        frame: p.frame,
        len: if counter { st.skb_len } else { m.len },
        iif: 0,
        mark: st.mark,
        elem: 0,
        l3: if m.l3 == wasp_wire::L3Kind::None {
            0xffff
        } else {
            m.net_offset
        },
        l4: l4.map_or(0xffff, |l| l.offset),
        l4proto: m.l4.map_or(0, |l| l.proto),
        nfproto: st.nfproto,
        iftype: 1,
    }
}

/// A placeholder packet (for fixed-size buffers).
pub(crate) const NO_PACKET: ExtPacket<'static> = ExtPacket {
    frame: &[],
    len: 0,
    iif: 0,
    mark: 0,
    elem: 0,
    l3: 0xffff,
    l4: 0xffff,
    l4proto: 0,
    nfproto: 0,
    iftype: 1,
};

/// Run use site `site` on `pkts` (packet `idx[k]` of the vector is `pkts[k]`, at most
/// [`MAX_VECTOR`]), in one call of the extension, writing what each packet does into `res`:
/// a match passes or breaks the rule; a statement passes (continue) or ends the rule with a
/// verdict. Without an extension every packet gets the site's fallback: a match is false, a
/// statement continues, and `fallback drop` drops. Trace events (one per packet) say what the
/// site answered.
pub(crate) fn ext_call(
    fx: &mut Effects<'_, '_>,
    site: u32,
    pkts: &[ExtPacket<'_>],
    idx: &[usize],
    res: &mut [OpRes],
) {
    let n = pkts.len().min(MAX_VECTOR);
    let Some(s) = fx.ext.sites.get(site as usize) else {
        res[..n].fill(OpRes::Break);
        return;
    };
    let (kind, fallback) = (s.kind, s.fallback);
    match kind {
        ExtKind::Match => {
            let mut out = [false; MAX_VECTOR];
            match fx.ext.ext.as_deref_mut() {
                Some(e) => {
                    e.matches(site, &pkts[..n], &mut out[..n]);
                    if fallback == Fallback::Drop && e.last_call_failed() {
                        // Fail closed: the plugin could not answer.
                        res[..n].fill(OpRes::Verdict(compiled::Verdict::Drop));
                    } else {
                        for k in 0..n {
                            res[k] = if out[k] { OpRes::Pass } else { OpRes::Break };
                        }
                    }
                }
                None => res[..n].fill(match fallback {
                    Fallback::Absent => OpRes::Break,
                    Fallback::Drop => OpRes::Verdict(compiled::Verdict::Drop),
                }),
            }
        }
        ExtKind::Statement | ExtKind::Stateful => {
            let mut v = [ExtVerdict::Continue; MAX_VECTOR];
            match fx.ext.ext.as_deref_mut() {
                Some(e) => {
                    fx.ext.scratch.clear();
                    e.apply(site, &pkts[..n], &mut v[..n], fx.ext.scratch);
                    let first = fx.ext.first;
                    for (k, edit) in fx.ext.scratch.drain(..) {
                        if let Some(&i) = idx.get(k).filter(|_| k < n) {
                            fx.ext.edits.push((first + i, edit));
                        }
                    }
                }
                None => {
                    if fallback == Fallback::Drop {
                        v[..n].fill(ExtVerdict::Drop);
                    }
                }
            }
            for k in 0..n {
                res[k] = match v[k] {
                    ExtVerdict::Continue => OpRes::Pass,
                    ExtVerdict::Accept => OpRes::Verdict(compiled::Verdict::Accept),
                    ExtVerdict::Drop => OpRes::Verdict(compiled::Verdict::Drop),
                    ExtVerdict::Return => OpRes::Verdict(compiled::Verdict::Return),
                };
            }
        }
    }
    let counter = matches!(fx.ext.counter_uses.get(site as usize), Some(Some(_)));
    if fx.walk && !counter {
        for k in 0..n {
            let result = match (kind, res[k]) {
                (ExtKind::Match, OpRes::Pass) => "match",
                (ExtKind::Match, OpRes::Break) => "no match",
                (_, OpRes::Pass | OpRes::Break) => "continue",
                (_, OpRes::Verdict(compiled::Verdict::Accept)) => "accept",
                (_, OpRes::Verdict(compiled::Verdict::Return)) => "return",
                (_, OpRes::Verdict(_)) => "drop",
            };
            fx.emit(idx[k], || TraceEvent::Plugin {
                packet: idx[k],
                site,
                result: result.to_string(),
            });
        }
    }
}

impl Effects<'_, '_> {
    /// A lookup of packet `idx` in a set whose counter site is `site` hit `e`: its counter (if
    /// any) is to count the packet, as the kernel's per-element counter expression
    /// (`nft_counter_eval` on the element's extension: bytes are skb->len). Recorded; the
    /// caller counts the operation's hits in one call ([`flush_hits`]).
    #[inline]
    pub fn count_elem(&mut self, e: compiled::Elem, site: Option<u32>, idx: usize) {
        if e.counter != 0
            && let Some(site) = site
            && self.hits.n < MAX_VECTOR
        {
            self.hits.site = site;
            self.hits.hits[self.hits.n] = (idx, e.counter);
            self.hits.n += 1;
        }
    }

    /// `true` when use site `site` is a counter the compiler made.
    #[inline]
    pub fn is_counter(&self, site: u32) -> bool {
        matches!(self.ext.counter_uses.get(site as usize), Some(Some(_)))
    }

    /// Give the sink a walk event of packet `packet` (index in this call's chunk), made only
    /// when it wants them (and, for a sink of marked packets, only when `packet` is marked);
    /// the event names the packet by its index in the whole hook call.
    #[inline]
    pub fn emit(&mut self, packet: usize, ev: impl FnOnce() -> TraceEvent) {
        if self.walk
            && (!self.marked_only || (packet < 64 && self.marked >> packet & 1 != 0))
            && let Some(t) = self.trace.as_deref_mut()
        {
            let mut e = ev();
            if let TraceEvent::Rule { packet, .. }
            | TraceEvent::ChainEnd { packet, .. }
            | TraceEvent::Plugin { packet, .. } = &mut e
            {
                *packet += self.ext.first;
            }
            t.event(e);
        }
    }

    /// Give the sink a `log` event.
    #[inline]
    pub fn emit_log(&mut self, ev: impl FnOnce() -> TraceEvent) {
        if let Some(t) = self.trace.as_deref_mut() {
            t.event(ev());
        }
    }
}

/// What a statement's computed value ([`crate::calc::Calc`]) reads besides the packet.
#[inline]
fn calc_env<'a>(prog: &'a Program, fx: &Effects<'_, '_>) -> CalcEnv<'a> {
    CalcEnv {
        prog,
        numgens: &prog.stateful.numgens,
        now: fx.now,
    }
}

/// `dup` to output target `t` (nft_dup_netdev_eval, nft_dup_ipv4/ipv6_eval): the copy is
/// recorded for the way out, the walk goes on.
fn dup_to(t: u16, st: &mut PktState, fx: &mut Effects<'_, '_>, idx: usize) -> OpRes {
    st.dup |= 1 << t;
    if fx.ext.ext.is_some() {
        // The copy is the packet as it is now: its edits so far.
        fx.ext.dups.push(DupPoint {
            packet: fx.ext.first + idx,
            target: OutId(t),
            edits: fx.ext.edits.len(),
        });
    }
    OpRes::Pass
}

/// `fwd` to output target `t` (nft_fwd_netdev_eval, nft_fwd_neigh_eval): the packet is
/// stolen. A next hop of the other family than the packet's is not the statement's
/// (nft_fwd_neigh_eval: NFT_BREAK, the rule ends, the walk goes on).
/// The live element of map `set` for the key `keys` make of packet `p`, counted on the
/// element's counter (packet `idx` of the vector); `None` for a miss or a key the packet does
/// not have: the rule ends (`nft_lookup_eval`'s NFT_BREAK).
fn map_elem(
    prog: &Program,
    set: crate::compiled::SetId,
    keys: &[crate::expr::Load],
    p: &Packet<'_>,
    st: &PktState,
    fx: &mut Effects<'_, '_>,
    idx: usize,
) -> Option<compiled::Elem> {
    let mut buf = [0u8; KEY_MAX];
    let n = build_key(keys, p, st, &mut buf)?;
    let e = prog.lookup(set, &buf[..n], fx.now)?;
    fx.count_elem(e, prog.sets[set].counter_site, idx);
    Some(e)
}

fn fwd_to(t: u16, prog: &Program, p: &Packet<'_>, st: &mut PktState) -> OpRes {
    let want = match prog.out_targets.get(usize::from(t)).and_then(|o| o.via) {
        Some(std::net::IpAddr::V4(_)) => Some(0x0800),
        Some(std::net::IpAddr::V6(_)) => Some(0x86dd),
        None => None,
    };
    if want.is_some_and(|w| w != p.meta.protocol) {
        return OpRes::Break;
    }
    st.fwd = t + 1;
    OpRes::Verdict(compiled::Verdict::Stolen)
}

/// Apply `op` to packet `idx`.
#[inline]
pub(crate) fn op_one(
    prog: &Program,
    fx: &mut Effects<'_, '_>,
    op: &Op,
    idx: usize,
    p: &Packet<'_>,
    st: &mut PktState,
) -> OpRes {
    match op {
        Op::Test(t) => {
            if t.one(p, st) {
                OpRes::Pass
            } else {
                OpRes::Break
            }
        }
        Op::Cmp(lc) => match lc.0.eval(p, st) {
            Some(x) if lc.1.test(x) => OpRes::Pass,
            _ => OpRes::Break,
        },
        Op::Lookup { keys, set, neg } => {
            let mut buf = [0u8; KEY_MAX];
            let Some(n) = build_key(keys, p, st, &mut buf) else {
                return OpRes::Break;
            };
            let s = &prog.sets[*set];
            let hit = prog.lookup(*set, &buf[..n], fx.now);
            if let Some(e) = hit {
                fx.count_elem(e, s.counter_site, idx);
            }
            if hit.is_some() != *neg {
                OpRes::Pass
            } else {
                OpRes::Break
            }
        }
        Op::Vmap { keys, set } => match map_elem(prog, *set, keys, p, st, fx, idx) {
            Some(e) => prog.sets[*set]
                .verdicts
                .get(e.verdict as usize)
                .map_or(OpRes::Break, |v| OpRes::Verdict(*v)),
            None => OpRes::Break,
        },
        Op::SetMarkMap { keys, set, ct } => {
            match map_elem(prog, *set, keys, p, st, fx, idx) {
                Some(e) => {
                    if !*ct {
                        st.mark = e.value;
                    } else if st.ct_id != 0 {
                        // nft_ct_set_eval: a packet without a connection is left alone.
                        st.ct_mark = e.value;
                        st.ct_mark_set = true;
                    }
                    OpRes::Pass
                }
                None => OpRes::Break,
            }
        }
        Op::Log(l) => {
            // The egress hook's device, else the packet's own (the IP hooks after the route).
            let oif = if fx.oif.is_empty() { p.oifname } else { fx.oif };
            fx.emit_log(|| TraceEvent::Log {
                packet: idx,
                text: log_text(&prog.logs[*l as usize], p, st.mark, oif),
            });
            OpRes::Pass
        }
        Op::SetMark(calc) => match calc.eval(p, st, &calc_env(prog, fx)) {
            Some(v) => {
                st.mark = v as u32;
                OpRes::Pass
            }
            None => OpRes::Break,
        },
        Op::PayloadSet(ps) => match ps.edits(p, st) {
            Some(edits) => {
                let at = fx.ext.first + idx;
                fx.ext.edits.extend(edits.into_iter().map(|e| (at, e)));
                OpRes::Pass
            }
            None => OpRes::Break,
        },
        Op::SetUpdate { keys, data, stmt } => {
            let mut buf = [0u8; KEY_MAX];
            let Some(n) = build_key(keys, p, st, &mut buf) else {
                return OpRes::Break;
            };
            let value = match data {
                Some(l) => match l.eval(p, st) {
                    Some(v) => v as u32,
                    None => return OpRes::Break,
                },
                None => 0,
            };
            match prog.stateful.dynsets.get(stmt.set as usize) {
                Some(d) if d.apply(stmt, &buf[..n], value, fx.now, fx.clock, st.skb_len) => {
                    OpRes::Pass
                }
                _ => OpRes::Break,
            }
        }
        Op::OptReset(kind) => match crate::payload_set::opt_reset(p, *kind) {
            Some(Some(edits)) => {
                let at = fx.ext.first + idx;
                fx.ext.edits.extend(edits.into_iter().map(|e| (at, e)));
                OpRes::Pass
            }
            Some(None) => OpRes::Verdict(compiled::Verdict::Drop),
            None => OpRes::Break,
        },
        Op::SetPriority(calc) => match calc.eval(p, st, &calc_env(prog, fx)) {
            Some(v) => {
                st.priority = v as u32;
                OpRes::Pass
            }
            None => OpRes::Break,
        },
        Op::SetNftrace(calc) => match calc.eval(p, st, &calc_env(prog, fx)) {
            Some(v) => {
                st.nftrace = v & 1 != 0;
                if idx < 64 {
                    if st.nftrace {
                        fx.marked |= 1 << idx;
                    } else {
                        fx.marked &= !(1 << idx);
                    }
                }
                OpRes::Pass
            }
            None => OpRes::Break,
        },
        Op::Ext(site) => {
            let mut res = [OpRes::Pass];
            let counter = fx.is_counter(*site);
            ext_call(fx, *site, &[ext_packet(p, st, counter)], &[idx], &mut res);
            res[0]
        }
        Op::Dup(t) => dup_to(*t, st, fx, idx),
        Op::CtSetMark(calc) => {
            // nft_ct_set_eval: a packet without a connection is left alone.
            if st.ct_id != 0
                && let Some(v) = calc.eval(p, st, &calc_env(prog, fx))
            {
                st.ct_mark = v as u32;
                st.ct_mark_set = true;
            }
            OpRes::Pass
        }
        Op::CtCount { site, over, count } => {
            // nft_connlimit_do_eval: the rule ends unless (count > limit) differs from `over`
            // being unset.
            let Some(conn) = fx.conn.filter(|_| st.ct_id != 0) else {
                return OpRes::Break;
            };
            let n = conn.add_and_count(*site, st.ct_id, fx.clock);
            if (n > *count) == *over {
                OpRes::Pass
            } else {
                OpRes::Break
            }
        }
        Op::Limit(i) => {
            // nft_limit_pkts_eval / nft_limit_bytes_eval: NFT_BREAK beyond the rate (within
            // it with `over`).
            match prog.stateful.limits.get(*i as usize) {
                Some(b) if b.eval(fx.clock, st.skb_len) => OpRes::Pass,
                _ => OpRes::Break,
            }
        }
        Op::ObjectMap { keys, set, kind } => {
            // nft_objref_map_eval: the element's object, or NFT_BREAK for a miss.
            let Some(e) = map_elem(prog, *set, keys, p, st, fx, idx) else {
                return OpRes::Break;
            };
            match kind {
                ObjKind::Counter => {
                    let mut res = [OpRes::Pass];
                    ext_call(fx, e.value, &[ext_packet(p, st, true)], &[idx], &mut res);
                    res[0]
                }
                ObjKind::Quota => match prog.stateful.quotas.get(e.value as usize) {
                    Some(q) if q.eval(st.skb_len) => OpRes::Pass,
                    _ => OpRes::Break,
                },
                ObjKind::Limit => match prog.stateful.limits.get(e.value as usize) {
                    Some(b) if b.eval(fx.clock, st.skb_len) => OpRes::Pass,
                    _ => OpRes::Break,
                },
                // The conntrack objects do nothing in wasp (`wasp_ruleset::model::CtObj`): only
                // the map's miss above ends the rule, as nft_objref_map_eval's NFT_BREAK.
                ObjKind::CtHelper | ObjKind::CtTimeout | ObjKind::CtExpectation => OpRes::Pass,
            }
        }
        Op::Quota(i) => {
            // nft_quota_eval: the packet's bytes are consumed, then NFT_BREAK beyond the quota
            // (within it with `over`).
            match prog.stateful.quotas.get(*i as usize) {
                Some(q) if q.eval(st.skb_len) => OpRes::Pass,
                _ => OpRes::Break,
            }
        }
        Op::CtSet { key, value } => {
            // nft_ct_set_eval: a value that fails to load ends the rule.
            let Some(v) = value.eval(p, st, &calc_env(prog, fx)) else {
                return OpRes::Break;
            };
            match key {
                // Before conntrack the zone is the packet's (the kernel's template); after it
                // the connection has its zone already (nft_ct_set_zone_eval leaves a
                // confirmed one alone).
                CtSetKey::Zone => fx.rare(st).ct_zone = Some(v as u16),
                CtSetKey::Label if st.ct_id != 0 => {
                    let r = fx.rare(st);
                    r.ct_label = Some(r.ct_label.unwrap_or(0) | v);
                }
                CtSetKey::Event if st.ct_id != 0 => fx.rare(st).ct_event = Some(v as u32),
                CtSetKey::Label | CtSetKey::Event => {}
            }
            OpRes::Pass
        }
        Op::Notrack => {
            fx.rare(st).notrack = true;
            OpRes::Pass
        }
        Op::Nat(i) => {
            // nft_nat_eval: the connection gets the binding and the chain accepts.
            if st.ct_id == 0 {
                return OpRes::Break;
            }
            if let Some(Some(c)) = prog.nat_calcs.get(usize::from(*i)) {
                // nft_nat_eval reads the target's registers: a key that fails, or a map
                // miss, ends the rule before (NFT_BREAK).
                match c.calc.eval(p, st, &calc_env(prog, fx)) {
                    Some(v) => fx.rare(st).nat_arg = v,
                    None => return OpRes::Break,
                }
            }
            st.nat = *i + 1;
            OpRes::Verdict(compiled::Verdict::Accept)
        }
        Op::FlowAdd(i) => {
            st.flow = *i + 1;
            OpRes::Pass
        }
        Op::Fwd(t) => fwd_to(*t, prog, p, st),
        Op::OutMap { keys, set, fwd } => {
            // nft_lookup_eval into the register nft_dup/nft_fwd read: a miss is NFT_BREAK.
            let Some(e) = map_elem(prog, *set, keys, p, st, fx, idx) else {
                return OpRes::Break;
            };
            let Ok(t) = u16::try_from(e.value) else {
                return OpRes::Break;
            };
            if *fwd {
                fwd_to(t, prog, p, st)
            } else {
                dup_to(t, st, fx, idx)
            }
        }
        Op::Reject(r) => {
            fx.rare(st).reject = Some(*r);
            OpRes::Verdict(compiled::Verdict::Drop)
        }
        Op::Verdict(v) => OpRes::Verdict(*v),
    }
}

/// What one packet's walk knows about the leading pure tests of the rule it ran last (see
/// [`compiled::Rule::shared`]): tests `0..passed` passed, and test `passed` failed when `failed`.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Memo {
    passed: u8,
    failed: bool,
}

impl Memo {
    /// Forget everything (the walk moved to another chain or rule position).
    pub fn clear(&mut self) {
        *self = Memo::default();
    }
}

impl Memo {
    /// Answer the leading pure tests of `rule` (the next rule after the one the memo is
    /// about) for packet `p`: from the memo where the rules share them, by running the others.
    /// Returns the index of the first operation still to run, or `None` when a test failed.
    #[inline(always)]
    pub fn tests(&mut self, rule: &compiled::Rule, p: &Packet<'_>, st: &PktState) -> Option<usize> {
        // What the previous rule's shared tests answered decides without touching them: the
        // rule fails at a remembered failure, or runs on after the remembered passes.
        if self.passed >= rule.shared {
            self.passed = rule.shared;
        } else if self.failed {
            return None;
        }
        let mut k = usize::from(self.passed);
        self.failed = false;
        let pure = usize::from(rule.pure);
        while k < pure
            && let Some(Op::Test(t)) = rule.ops.get(k)
        {
            if !t.one(p, st) {
                self.failed = true;
                break;
            }
            k += 1;
        }
        self.passed = k as u8;
        (!self.failed).then_some(k)
    }
}

/// Run operations of a rule for one packet (`orig` as received, or its copy in slot 0 of `ed`
/// once a statement edited it): `None` when a match failed, `Some(None)` when every operation
/// ran without a verdict, `Some(Some(v))` for a verdict. A plugin statement's edits are applied
/// to the copy before the next operation runs (and `memo` forgets the rule's tests, which were
/// answered on the bytes before them).
#[inline]
#[allow(clippy::too_many_arguments)]
pub(crate) fn rule_ops(
    prog: &Program,
    fx: &mut Effects<'_, '_>,
    ops: &[Op],
    idx: usize,
    orig: &Packet<'_>,
    ed: &mut Edited,
    st: &mut PktState,
    memo: &mut Memo,
) -> Option<Option<compiled::Verdict>> {
    let before = fx.ext.edits.len();
    let tmp;
    let p = if ed.has(0) {
        tmp = ed.packet(0, orig);
        &tmp
    } else {
        orig
    };
    for (k, op) in ops.iter().enumerate() {
        let r = op_one(prog, fx, op, idx, p, st);
        // A plugin statement, a payload statement or `reset tcp option` edited the packet.
        let mut edited = fx.ext.edits.len() != before;
        if fx.hits.n != 0 {
            let st = *st;
            flush_hits(fx, |_| ext_packet(p, &st, true));
            edited |= fx.ext.edits.len() != before;
        }
        if edited {
            return edited_rest(prog, fx, &ops[k + 1..], r, idx, orig, ed, st, memo, before);
        }
        match r {
            OpRes::Pass => {}
            OpRes::Break => return None,
            OpRes::Verdict(v) => return Some(Some(v)),
        }
    }
    Some(None)
}

/// [`rule_ops`] after an operation (whose result is `r`) edited the packet: apply the edits
/// made since `before` to its copy, then run the rest of the rule's operations, each on the
/// packet as the edits before it left it.
#[cold]
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn edited_rest(
    prog: &Program,
    fx: &mut Effects<'_, '_>,
    ops: &[Op],
    mut r: OpRes,
    idx: usize,
    orig: &Packet<'_>,
    ed: &mut Edited,
    st: &mut PktState,
    memo: &mut Memo,
    mut before: usize,
) -> Option<Option<compiled::Verdict>> {
    let mut ops = ops.iter();
    loop {
        if fx.ext.edits.len() != before {
            // Edits are reported by `first + idx`: slot 0 of `ed` is this packet.
            ed.apply(
                fx.ext.first + idx,
                &fx.ext.edits[before..],
                std::slice::from_ref(orig),
                std::slice::from_mut(st),
            );
            before = fx.ext.edits.len();
            memo.clear();
        }
        match r {
            OpRes::Pass => {}
            OpRes::Break => return None,
            OpRes::Verdict(v) => return Some(Some(v)),
        }
        let Some(op) = ops.next() else {
            return Some(None);
        };
        let p = if ed.has(0) { ed.packet(0, orig) } else { *orig };
        r = op_one(prog, fx, op, idx, &p, st);
        if fx.hits.n != 0 {
            let st = *st;
            flush_hits(fx, |_| ext_packet(&p, &st, true));
        }
    }
}

/// The trace event of a rule that matched.
pub(crate) fn rule_event(
    prog: &Program,
    chain: ChainId,
    handle: u64,
    idx: usize,
    v: Option<compiled::Verdict>,
) -> TraceEvent {
    let c = &prog.chains[chain];
    TraceEvent::Rule {
        packet: idx,
        table: c.table,
        chain: c.index,
        handle,
        verdict: verdict_text(prog, v),
    }
}

/// The trace event of a chain's end (`policy` for a base chain, `None` for a return).
pub(crate) fn end_event(
    prog: &Program,
    chain: ChainId,
    idx: usize,
    policy: Option<Policy>,
) -> TraceEvent {
    let c = &prog.chains[chain];
    TraceEvent::ChainEnd {
        packet: idx,
        table: c.table,
        chain: c.index,
        policy: policy.map(final_of),
    }
}

/// Policy as a final verdict.
pub(crate) fn final_of(p: Policy) -> FinalVerdict {
    match p {
        Policy::Accept => FinalVerdict::Accept,
        Policy::Drop => FinalVerdict::Drop,
    }
}

/// The policy of base chain `base` as the decision of a walk.
pub(crate) fn policy_decision(prog: &Program, base: ChainId) -> (FinalVerdict, Decision) {
    let c = &prog.chains[base];
    let pol = c.base.as_ref().map_or(Policy::Accept, |b| b.policy);
    (
        final_of(pol),
        Decision {
            table: c.table,
            chain: c.index,
            rule: None,
        },
    )
}

/// The base chain's policy ends the walk (end of the rules with an empty jump stack, or
/// `return` there): its trace event and decision.
pub(crate) fn base_policy(
    prog: &Program,
    fx: &mut Effects<'_, '_>,
    base: ChainId,
    idx: usize,
) -> (FinalVerdict, Decision) {
    let pol = prog.chains[base]
        .base
        .as_ref()
        .map_or(Policy::Accept, |b| b.policy);
    fx.emit(idx, || end_event(prog, base, idx, Some(pol)));
    policy_decision(prog, base)
}

/// A rule's verdict as the decision of a walk.
pub(crate) fn rule_decision(prog: &Program, chain: ChainId, handle: u64) -> Decision {
    let c = &prog.chains[chain];
    Decision {
        table: c.table,
        chain: c.index,
        rule: Some(handle),
    }
}

/// Walk one packet through base chain `base` (nft_do_chain): returns accept or drop and the
/// rule or policy that decided. `memo` skips tests answered in the previous rule
/// ([`compiled::Rule::shared`]); without it every operation runs, as in the kernel. `p` is the packet as
/// received; once a plugin statement edits it (in this walk or an earlier base chain's of the
/// hook), the walk reads its copy in slot 0 of `ed`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn walk_one(
    prog: &Program,
    fx: &mut Effects<'_, '_>,
    base: ChainId,
    idx: usize,
    p: &Packet<'_>,
    ed: &mut Edited,
    st: &mut PktState,
    memo: bool,
) -> (FinalVerdict, Decision) {
    let mut stack = [(ChainId(0), 0u32); JUMP_STACK];
    let mut depth = 0usize;
    let (mut c, mut r) = (base, 0u32);
    let mut rules = &prog.chains[c].rules[..];
    let mut m = Memo::default();
    loop {
        let Some(rule) = rules.get(r as usize) else {
            // End of the chain: return to the caller, or the base chain's policy.
            if depth == 0 {
                return base_policy(prog, fx, base, idx);
            }
            fx.emit(idx, || end_event(prog, c, idx, None));
            depth -= 1;
            (c, r) = stack[depth];
            rules = &prog.chains[c].rules;
            m.clear();
            continue;
        };
        let first = if memo {
            let tmp;
            let cur = if ed.has(0) {
                tmp = ed.packet(0, p);
                &tmp
            } else {
                p
            };
            match m.tests(rule, cur, st) {
                Some(k) => k,
                None => {
                    r += 1;
                    continue;
                }
            }
        } else {
            0
        };
        let ops = rule.ops.get(first..).unwrap_or_default();
        let Some(v) = rule_ops(prog, fx, ops, idx, p, ed, st, &mut m) else {
            r += 1;
            continue;
        };
        if !matches!(v, None | Some(compiled::Verdict::Continue)) {
            // The walk leaves this rule position: what the memo knows is for this chain.
            m.clear();
        }
        fx.emit(idx, || rule_event(prog, c, rule.handle, idx, v));
        match v {
            None | Some(compiled::Verdict::Continue) => r += 1,
            Some(compiled::Verdict::Accept) => {
                return (FinalVerdict::Accept, rule_decision(prog, c, rule.handle));
            }
            Some(compiled::Verdict::Drop) => {
                return (FinalVerdict::Drop, rule_decision(prog, c, rule.handle));
            }
            Some(compiled::Verdict::Stolen) => {
                // The caller sees `st.fwd` and ends the hook.
                return (FinalVerdict::Accept, rule_decision(prog, c, rule.handle));
            }
            Some(compiled::Verdict::Return) => {
                if depth == 0 {
                    return base_policy(prog, fx, base, idx);
                }
                depth -= 1;
                (c, r) = stack[depth];
                rules = &prog.chains[c].rules;
            }
            Some(compiled::Verdict::Jump(t)) => {
                if depth == JUMP_STACK {
                    // Unreachable after the load-time depth check; the kernel drops here.
                    return (FinalVerdict::Drop, rule_decision(prog, c, rule.handle));
                }
                stack[depth] = (c, r + 1);
                depth += 1;
                (c, r) = (t, 0);
                rules = &prog.chains[c].rules;
            }
            Some(compiled::Verdict::Goto(t)) => {
                (c, r) = (t, 0);
                rules = &prog.chains[c].rules;
            }
        }
    }
}
