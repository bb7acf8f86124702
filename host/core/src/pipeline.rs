//! The vector pipeline: a base chain runs over a vector of packets, rule by rule; every
//! operation of a rule runs over all packets that reached it, and jumps, gotos and returns move
//! packets between chains' pending sets (the vector splits by target chain). Chains are run
//! callers before callees (a topological order of the jump graph, which the load-time check
//! keeps acyclic), so packets from several callers meet in a callee and run it together.
//!
//! The packets at a rule are a bitmask over the vector (bit `i` is packet `i`), so an operation
//! is dispatched once per vector and its inner loop runs over the set bits: a test
//! ([`Test::vector`]) reads each packet's field from the [`View`] (frames and header offsets
//! side by side) and returns the mask of those that pass. Verdicts and counters act on whole
//! masks. The leading pure tests a rule shares with the rule before it ([`compiled::Rule::shared`]) are
//! answered from the previous rule's results instead of being run again, and a payload read
//! that several tests make keeps its values for the whole vector ([`ReadCache`]).
//!
//! A plugin statement's edits go to a copy of the packet that the rest of the walk reads
//! ([`Edited`]): tests read an edited packet from its copy (not from the view or the read
//! cache, which hold the frames as received), and the answers remembered for the next rule are
//! forgotten for the packets edited. A vector without edits only pays a mask test per
//! operation.
//!
//! Buffers live in [`Scratch`], owned by the engine and reused: nothing is allocated per vector
//! once the buffers have grown to their working size.
//!
//! [`Test::vector`]: crate::compare::Test::vector
//! [`compiled::Rule::shared`]: compiled::Rule::shared

use crate::compare::{ReadCache, bits};
use crate::compiled::{self, ChainId, MEMO, Op, Program};
use crate::eval::{
    Effects, JUMP_STACK, NO_PACKET, OpRes, base_policy, end_event, ext_call, ext_packet,
    flush_hits, op_one, policy_decision, rule_decision, rule_event,
};
use crate::expr::PktState;
use crate::ext::Edited;
use crate::packet::{Decision, FinalVerdict, MAX_VECTOR, Packet};

/// The per-packet facts the tests read, side by side for a vector (structure of arrays).
#[derive(Debug)]
pub(crate) struct View<'a> {
    /// The frames.
    pub frames: [&'a [u8]; MAX_VECTOR],
    /// Offset of the network header ([`wasp_wire::PacketMeta::net_offset`]).
    pub net: [u16; MAX_VECTOR],
    /// Offset of the transport header (the kernel's `thoff`), where `l4` has the packet.
    pub th: [u16; MAX_VECTOR],
    /// Packets with transport header info ([`wasp_wire::PacketMeta::l4`]).
    pub l4: u64,
    /// Of those, the ones that are not non-first fragments.
    pub l4_whole: u64,
    /// Packets whose `meta protocol` is IPv4 or IPv6.
    pub ip: u64,
}

impl<'a> View<'a> {
    /// The view of `pkts` (at most [`MAX_VECTOR`]; later ones are left out).
    pub fn new(pkts: &[Packet<'a>]) -> Self {
        let mut v = View {
            frames: [&[]; MAX_VECTOR],
            net: [0; MAX_VECTOR],
            th: [0; MAX_VECTOR],
            l4: 0,
            l4_whole: 0,
            ip: 0,
        };
        for (i, p) in pkts.iter().take(MAX_VECTOR).enumerate() {
            let bit = 1u64 << i;
            v.frames[i] = p.frame;
            v.net[i] = p.meta.net_offset;
            if let Some(l4) = p.meta.l4 {
                v.th[i] = l4.offset;
                v.l4 |= bit;
                if l4.fragoff == 0 {
                    v.l4_whole |= bit;
                }
            }
            if matches!(p.meta.protocol, 0x0800 | 0x86dd) {
                v.ip |= bit;
            }
        }
        v
    }
}

/// Reusable buffers of the vector pipeline.
#[derive(Debug)]
pub(crate) struct Scratch {
    /// Per chain: packets waiting to run it from its first rule.
    start: Vec<u64>,
    /// Per chain: packets waiting to resume it after a return, as (rule, packet).
    resume: Vec<Vec<(u32, u8)>>,
    /// Per chain: in `work`.
    queued: Vec<bool>,
    /// Chains with pending packets.
    work: Vec<ChainId>,
    /// Resuming entries of the chain being run, sorted.
    entries: Vec<(u32, u8)>,
    /// Per packet: jump stack and depth.
    stacks: Vec<[(ChainId, u32); JUMP_STACK]>,
    depth: [u8; MAX_VECTOR],
    /// Per packet: verdict of the current rule, when it differs between packets (verdict maps).
    vslot: [Option<compiled::Verdict>; MAX_VECTOR],
    /// Answers to the current rule's leading pure tests, as (answered, passed) masks.
    memo: [(u64, u64); MEMO],
    /// Packets the current base chain dropped.
    dropped: u64,
    /// Packets the current base chain's `fwd` statements stole.
    stolen: u64,
    /// Packets in a called chain (jump stack not empty).
    deep: u64,
    /// Field values of the vector, per repeated read.
    reads: ReadCache,
    /// The packets of the vector that plugin statements edited, as the walk sees them now.
    pub ed: Edited,
}

impl Scratch {
    /// Buffers for a program of `chains` chains.
    pub fn new(chains: usize) -> Self {
        Scratch {
            start: vec![0; chains],
            resume: vec![Vec::new(); chains],
            queued: vec![false; chains],
            work: Vec::with_capacity(chains.min(64)),
            entries: Vec::with_capacity(MAX_VECTOR),
            stacks: vec![[(ChainId(0), 0); JUMP_STACK]; MAX_VECTOR],
            depth: [0; MAX_VECTOR],
            vslot: [None; MAX_VECTOR],
            memo: [(0, 0); MEMO],
            dropped: 0,
            stolen: 0,
            deep: 0,
            reads: ReadCache::default(),
            ed: Edited::default(),
        }
    }

    /// Start a new vector on the ingress (`egress` false) or egress hook: forget the field
    /// values and the edited copies of the last one.
    pub fn new_vector(&mut self, egress: bool) {
        self.reads.clear();
        self.ed.reset(egress);
    }

    fn enqueue(&mut self, c: ChainId) {
        if !self.queued[c.idx()] {
            self.queued[c.idx()] = true;
            self.work.push(c);
        }
    }

    fn pop_min(&mut self, prog: &Program) -> Option<ChainId> {
        let (at, _) = self
            .work
            .iter()
            .enumerate()
            .min_by_key(|&(_, &c)| prog.chains[c].rank)?;
        let c = self.work.swap_remove(at);
        self.queued[c.idx()] = false;
        Some(c)
    }
}

/// What a chain run needs besides the scratch buffers.
struct Ctx<'p, 'v, 'a> {
    prog: &'p Program,
    base: ChainId,
    /// The base chain's policy as a verdict and decision.
    policy: (FinalVerdict, Option<Decision>),
    view: &'v View<'a>,
    pkts: &'v [Packet<'a>],
}

/// Run base chain `base` over the packets of the mask `entry` (bits index `pkts`), writing each
/// one's verdict and deciding rule or policy into `res`. Returns the masks of the packets it
/// dropped and of those a `fwd` stole (their `res` is accept by the `fwd` rule).
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_base(
    prog: &Program,
    fx: &mut Effects<'_, '_>,
    sc: &mut Scratch,
    base: ChainId,
    entry: u64,
    view: &View<'_>,
    pkts: &[Packet<'_>],
    st: &mut [PktState],
    res: &mut [(FinalVerdict, Option<Decision>)],
) -> (u64, u64) {
    for i in bits(entry) {
        sc.depth[i] = 0;
    }
    sc.dropped = 0;
    sc.stolen = 0;
    sc.deep = 0;
    sc.start[base.idx()] |= entry;
    sc.enqueue(base);
    let (v, d) = policy_decision(prog, base);
    let cx = Ctx {
        prog,
        base,
        policy: (v, Some(d)),
        view,
        pkts,
    };
    while let Some(c) = sc.pop_min(prog) {
        std::mem::swap(&mut sc.entries, &mut sc.resume[c.idx()]);
        sc.entries.sort_unstable();
        run_chain(&cx, fx, sc, c, st, res);
        sc.entries.clear();
    }
    (sc.dropped, sc.stolen)
}

/// Leave the current chain by returning (explicit `return` or the end of the chain).
fn do_return(
    cx: &Ctx<'_, '_, '_>,
    fx: &mut Effects<'_, '_>,
    sc: &mut Scratch,
    i: usize,
    res: &mut [(FinalVerdict, Option<Decision>)],
) {
    if sc.depth[i] == 0 {
        end_at_policy(cx, fx, sc, 1 << i, res);
    } else {
        sc.depth[i] -= 1;
        if sc.depth[i] == 0 {
            sc.deep &= !(1 << i);
        }
        let (c2, r2) = sc.stacks[i][usize::from(sc.depth[i])];
        sc.resume[c2.idx()].push((r2, i as u8));
        sc.enqueue(c2);
    }
}

/// The walks of the packets of `mask` (all in the base chain) end at its policy.
fn end_at_policy(
    cx: &Ctx<'_, '_, '_>,
    fx: &mut Effects<'_, '_>,
    sc: &mut Scratch,
    mask: u64,
    res: &mut [(FinalVerdict, Option<Decision>)],
) {
    for i in bits(mask) {
        res[i] = cx.policy;
    }
    if cx.policy.0 == FinalVerdict::Drop {
        sc.dropped |= mask;
    }
    if fx.walk {
        for i in bits(mask) {
            base_policy(cx.prog, fx, cx.base, i);
        }
    }
}

/// Apply verdict `v` of rule `r` of chain `c` to the packets of `mask` (which all matched the
/// rule). Returns the packets that left the chain.
#[allow(clippy::too_many_arguments)]
fn follow(
    cx: &Ctx<'_, '_, '_>,
    fx: &mut Effects<'_, '_>,
    sc: &mut Scratch,
    c: ChainId,
    r: usize,
    handle: u64,
    v: Option<compiled::Verdict>,
    mask: u64,
    res: &mut [(FinalVerdict, Option<Decision>)],
) -> u64 {
    let decided = |verdict| (verdict, Some(rule_decision(cx.prog, c, handle)));
    match v {
        None | Some(compiled::Verdict::Continue) => return 0,
        Some(compiled::Verdict::Accept) => {
            let d = decided(FinalVerdict::Accept);
            for i in bits(mask) {
                res[i] = d;
            }
        }
        Some(compiled::Verdict::Drop) => {
            let d = decided(FinalVerdict::Drop);
            for i in bits(mask) {
                res[i] = d;
            }
            sc.dropped |= mask;
        }
        Some(compiled::Verdict::Stolen) => {
            let d = decided(FinalVerdict::Accept);
            for i in bits(mask) {
                res[i] = d;
            }
            sc.stolen |= mask;
        }
        Some(compiled::Verdict::Return) => {
            for i in bits(mask) {
                do_return(cx, fx, sc, i, res);
            }
        }
        Some(compiled::Verdict::Jump(t)) => {
            for i in bits(mask) {
                let d = usize::from(sc.depth[i]);
                if d == JUMP_STACK {
                    // Unreachable after the load-time depth check; the kernel drops here.
                    res[i] = decided(FinalVerdict::Drop);
                    sc.dropped |= 1 << i;
                } else {
                    sc.stacks[i][d] = (c, r as u32 + 1);
                    sc.depth[i] += 1;
                    sc.deep |= 1 << i;
                    sc.start[t.idx()] |= 1 << i;
                    sc.enqueue(t);
                }
            }
        }
        Some(compiled::Verdict::Goto(t)) => {
            sc.start[t.idx()] |= mask;
            sc.enqueue(t);
        }
    }
    mask
}

/// Apply the edits that the plugin call just made (`fx.ext.edits[before..]`) to the packets'
/// copies, for the rest of the vector's walk, and forget what was remembered about the bytes
/// of the packets edited: the answers to the current rule's leading tests (the next rule would
/// take them over). The read cache holds received frames only, which do not change.
fn take_edits(
    cx: &Ctx<'_, '_, '_>,
    fx: &mut Effects<'_, '_>,
    sc: &mut Scratch,
    st: &mut [PktState],
    before: usize,
) {
    let edited = sc.ed.apply(
        fx.ext.first,
        &fx.ext.edits[before..],
        cx.pkts,
        &mut st[..cx.pkts.len()],
    );
    for m in &mut sc.memo {
        m.0 &= !edited;
    }
}

fn run_chain(
    cx: &Ctx<'_, '_, '_>,
    fx: &mut Effects<'_, '_>,
    sc: &mut Scratch,
    c: ChainId,
    st: &mut [PktState],
    res: &mut [(FinalVerdict, Option<Decision>)],
) {
    let prog = cx.prog;
    let rules = &prog.chains[c].rules;
    let mut active = std::mem::take(&mut sc.start[c.idx()]);
    sc.memo = [(0, 0); MEMO];
    let mut ei = 0;
    let mut r = 0usize;
    while r < rules.len() {
        while let Some(&(at, i)) = sc.entries.get(ei)
            && at as usize == r
        {
            active |= 1 << i;
            ei += 1;
        }
        if active == 0 {
            match sc.entries.get(ei) {
                Some(&(next, _)) => {
                    // Rules were skipped: the answers remembered are not the next rule's.
                    r = next as usize;
                    sc.memo = [(0, 0); MEMO];
                    continue;
                }
                None => break,
            }
        }
        let rule = &rules[r];
        for m in &mut sc.memo[usize::from(rule.shared)..] {
            m.0 = 0;
        }
        // Matches narrow `live`; statements act on it; the last operation may give a verdict
        // to all of it (`verdict`) or per packet (`vslot`, a verdict map).
        let mut live = active;
        let mut verdict = None;
        let mut per_packet = false;
        // Packets a plugin statement gave a verdict: they left `live`, their verdict is in
        // `vslot`.
        let mut done = 0u64;
        for (k, op) in rule.ops.iter().enumerate() {
            if live == 0 {
                break;
            }
            match op {
                Op::Test(t) if k < usize::from(rule.pure) => {
                    let (known, pass) = sc.memo[k];
                    let fresh = live & !known;
                    let got = if fresh == 0 {
                        0
                    } else {
                        t.vector(fresh, cx.view, cx.pkts, st, &sc.ed, &mut sc.reads)
                    };
                    sc.memo[k] = (known | fresh, (pass & !fresh) | got);
                    live = (live & known & pass) | got;
                }
                Op::Test(t) => {
                    live = t.vector(live, cx.view, cx.pkts, st, &sc.ed, &mut sc.reads);
                }
                Op::Verdict(v) => {
                    if per_packet {
                        for i in bits(live) {
                            sc.vslot[i] = Some(*v);
                        }
                    } else {
                        verdict = Some(*v);
                    }
                }
                Op::Ext(site) => {
                    // One call for the vector: the packets still in the rule, in order.
                    let mut pk = [NO_PACKET; MAX_VECTOR];
                    let mut idx = [0usize; MAX_VECTOR];
                    let mut n = 0;
                    let counter = fx.is_counter(*site);
                    for i in bits(live) {
                        pk[n] = if sc.ed.has(i) {
                            ext_packet(&sc.ed.packet(i, &cx.pkts[i]), &st[i], counter)
                        } else {
                            ext_packet(&cx.pkts[i], &st[i], counter)
                        };
                        idx[n] = i;
                        n += 1;
                    }
                    let mut got = [OpRes::Pass; MAX_VECTOR];
                    let before = fx.ext.edits.len();
                    ext_call(fx, *site, &pk[..n], &idx[..n], &mut got[..n]);
                    if fx.ext.edits.len() != before {
                        take_edits(cx, fx, sc, st, before);
                    }
                    for (&i, r) in idx[..n].iter().zip(&got[..n]) {
                        match *r {
                            OpRes::Pass => {}
                            OpRes::Break => live &= !(1 << i),
                            OpRes::Verdict(v) => {
                                live &= !(1 << i);
                                done |= 1 << i;
                                sc.vslot[i] = Some(v);
                            }
                        }
                    }
                }
                _ => {
                    let before_ops = fx.ext.edits.len();
                    for i in bits(live) {
                        let tmp;
                        let p = if sc.ed.has(i) {
                            tmp = sc.ed.packet(i, &cx.pkts[i]);
                            &tmp
                        } else {
                            &cx.pkts[i]
                        };
                        match op_one(prog, fx, op, i, p, &mut st[i]) {
                            OpRes::Pass => {}
                            OpRes::Break => live &= !(1 << i),
                            OpRes::Verdict(v) => {
                                if !per_packet {
                                    per_packet = true;
                                    for j in bits(live) {
                                        sc.vslot[j] = verdict;
                                    }
                                }
                                sc.vslot[i] = Some(v);
                            }
                        }
                    }
                    if fx.ext.edits.len() != before_ops {
                        // A payload statement edited packets: later tests read the copies.
                        take_edits(cx, fx, sc, st, before_ops);
                    }
                    if fx.hits.n != 0 {
                        // The elements found count their packets, in one call.
                        let before = fx.ext.edits.len();
                        let ed = &sc.ed;
                        flush_hits(fx, |i| {
                            if ed.has(i) {
                                ext_packet(&ed.packet(i, &cx.pkts[i]), &st[i], true)
                            } else {
                                ext_packet(&cx.pkts[i], &st[i], true)
                            }
                        });
                        if fx.ext.edits.len() != before {
                            take_edits(cx, fx, sc, st, before);
                        }
                    }
                }
            }
        }
        if done != 0 {
            // Some packets ended the rule at a plugin statement: verdicts per packet.
            if !per_packet {
                per_packet = true;
                for i in bits(live) {
                    sc.vslot[i] = verdict;
                }
            }
            live |= done;
        }
        if live != 0 {
            // Packets that ran the whole rule: trace it and follow the verdict.
            if fx.walk {
                for i in bits(live) {
                    let v = if per_packet { sc.vslot[i] } else { verdict };
                    fx.emit(i, || rule_event(prog, c, rule.handle, i, v));
                }
            }
            if per_packet {
                for i in bits(live) {
                    let v = sc.vslot[i];
                    active &= !follow(cx, fx, sc, c, r, rule.handle, v, 1 << i, res);
                }
            } else {
                active &= !follow(cx, fx, sc, c, r, rule.handle, verdict, live, res);
            }
        }
        r += 1;
    }
    // Packets returning past the last rule join those that ran off the end.
    while let Some(&(_, i)) = sc.entries.get(ei) {
        active |= 1 << i;
        ei += 1;
    }
    // End of the chain: return to the caller or the base chain's policy.
    end_at_policy(cx, fx, sc, active & !sc.deep, res);
    for i in bits(active & sc.deep) {
        fx.emit(i, || end_event(prog, c, i, None));
        do_return(cx, fx, sc, i, res);
    }
}
