//! The vector pipeline: a base chain runs over a vector of packets, rule by rule; every
//! operation of a rule runs over all packets that reached it, and jumps, gotos and returns move
//! packets between chains' pending lists (the vector splits by target chain). Chains are run
//! callers before callees (a topological order of the jump graph, which the load-time check
//! keeps acyclic), so packets from several callers meet in a callee and run it together.
//!
//! Buffers live in [`Scratch`], owned by the engine and reused: nothing is allocated per packet
//! once the buffers have grown to their working size.

use crate::engine::{Decision, FinalVerdict, MAX_VECTOR, Packet};
use crate::eval::{
    Effects, JUMP_STACK, OpRes, base_policy, end_event, op_one, rule_decision, rule_event,
};
use crate::expr::PktState;
use crate::program::{ChainId, Op, Program, VerdictC};

/// Reusable buffers of the vector pipeline.
#[derive(Debug)]
pub(crate) struct Scratch {
    /// Per chain: packets waiting to run it, with the rule they start at.
    pending: Vec<Vec<(u8, u32)>>,
    /// Per chain: in `work`.
    queued: Vec<bool>,
    /// Chains with pending packets.
    work: Vec<ChainId>,
    /// Entries of the chain being run.
    entries: Vec<(u8, u32)>,
    /// Packets at the current rule.
    active: Vec<u8>,
    /// Packets still matching inside the current rule.
    live: Vec<u8>,
    /// Per packet: jump stack and depth.
    stacks: Vec<[(ChainId, u32); JUMP_STACK]>,
    depth: [u8; MAX_VECTOR],
    /// Per packet: verdict of the current rule.
    vslot: [Option<VerdictC>; MAX_VECTOR],
    /// Per packet: left the current chain.
    gone: [bool; MAX_VECTOR],
}

impl Scratch {
    /// Buffers for a program of `chains` chains.
    pub fn new(chains: usize) -> Self {
        Scratch {
            pending: vec![Vec::new(); chains],
            queued: vec![false; chains],
            work: Vec::with_capacity(chains.min(64)),
            entries: Vec::with_capacity(MAX_VECTOR),
            active: Vec::with_capacity(MAX_VECTOR),
            live: Vec::with_capacity(MAX_VECTOR),
            stacks: vec![[(0, 0); JUMP_STACK]; MAX_VECTOR],
            depth: [0; MAX_VECTOR],
            vslot: [None; MAX_VECTOR],
            gone: [false; MAX_VECTOR],
        }
    }

    fn enqueue(&mut self, c: ChainId, i: u8, rule: u32) {
        self.pending[c as usize].push((i, rule));
        if !self.queued[c as usize] {
            self.queued[c as usize] = true;
            self.work.push(c);
        }
    }

    fn pop_min(&mut self, prog: &Program) -> Option<ChainId> {
        let (at, _) = self
            .work
            .iter()
            .enumerate()
            .min_by_key(|&(_, &c)| prog.chains[c as usize].rank)?;
        let c = self.work.swap_remove(at);
        self.queued[c as usize] = false;
        Some(c)
    }
}

/// Run base chain `base` over the packets listed in `entry` (indices into `pkts`), writing each
/// one's verdict and deciding rule or policy into `res`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_base(
    prog: &Program,
    fx: &mut Effects<'_, '_>,
    sc: &mut Scratch,
    base: ChainId,
    entry: &[u8],
    pkts: &[Packet<'_>],
    st: &mut [PktState],
    res: &mut [(FinalVerdict, Option<Decision>)],
) {
    for &i in entry {
        sc.depth[usize::from(i)] = 0;
        sc.enqueue(base, i, 0);
    }
    while let Some(c) = sc.pop_min(prog) {
        std::mem::swap(&mut sc.entries, &mut sc.pending[c as usize]);
        sc.entries.sort_unstable_by_key(|&(i, r)| (r, i));
        run_chain(prog, fx, sc, base, c, pkts, st, res);
        sc.entries.clear();
    }
}

/// Leave the current chain by returning (explicit `return` or the end of the chain).
#[allow(clippy::too_many_arguments)]
fn do_return(
    prog: &Program,
    fx: &mut Effects<'_, '_>,
    sc: &mut Scratch,
    base: ChainId,
    i: u8,
    res: &mut [(FinalVerdict, Option<Decision>)],
) {
    let u = usize::from(i);
    if sc.depth[u] == 0 {
        let (v, d) = base_policy(prog, fx, base, u);
        res[u] = (v, Some(d));
    } else {
        sc.depth[u] -= 1;
        let (c2, r2) = sc.stacks[u][usize::from(sc.depth[u])];
        sc.enqueue(c2, i, r2);
    }
}

#[allow(clippy::too_many_arguments)]
fn run_chain(
    prog: &Program,
    fx: &mut Effects<'_, '_>,
    sc: &mut Scratch,
    base: ChainId,
    c: ChainId,
    pkts: &[Packet<'_>],
    st: &mut [PktState],
    res: &mut [(FinalVerdict, Option<Decision>)],
) {
    let rules = &prog.chains[c as usize].rules;
    sc.active.clear();
    let mut ei = 0;
    let mut r = 0usize;
    while r < rules.len() {
        while ei < sc.entries.len() && sc.entries[ei].1 as usize == r {
            sc.active.push(sc.entries[ei].0);
            ei += 1;
        }
        if sc.active.is_empty() {
            match sc.entries.get(ei) {
                Some(&(_, next)) => {
                    r = next as usize;
                    continue;
                }
                None => break,
            }
        }
        let rule = &rules[r];
        // Matches filter `live`; statements act on it; a verdict lands in `vslot`.
        sc.live.clear();
        sc.live.extend_from_slice(&sc.active);
        for &i in &sc.live {
            sc.vslot[usize::from(i)] = None;
        }
        for op in rule.ops.iter() {
            if sc.live.is_empty() {
                break;
            }
            match op {
                Op::Cmp { load, cmp } => sc.live.retain(|&i| {
                    let u = usize::from(i);
                    load.eval(&pkts[u], &st[u]).is_some_and(|x| cmp.test(x))
                }),
                Op::Verdict(v) => {
                    for &i in &sc.live {
                        sc.vslot[usize::from(i)] = Some(*v);
                    }
                }
                _ => {
                    let vslot = &mut sc.vslot;
                    sc.live.retain(|&i| {
                        let u = usize::from(i);
                        match op_one(prog, fx, op, u, &pkts[u], &mut st[u]) {
                            OpRes::Pass => true,
                            OpRes::Break => false,
                            OpRes::Verdict(v) => {
                                vslot[u] = Some(v);
                                true
                            }
                        }
                    });
                }
            }
        }
        // Packets that ran the whole rule: trace it and follow the verdict.
        let mut any_gone = false;
        for k in 0..sc.live.len() {
            let i = sc.live[k];
            let u = usize::from(i);
            let v = sc.vslot[u];
            fx.emit(|| rule_event(prog, c, rule.handle, u, v));
            let gone = match v {
                None | Some(VerdictC::Continue) => false,
                Some(VerdictC::Accept) => {
                    res[u] = (
                        FinalVerdict::Accept,
                        Some(rule_decision(prog, c, rule.handle)),
                    );
                    true
                }
                Some(VerdictC::Drop) => {
                    res[u] = (
                        FinalVerdict::Drop,
                        Some(rule_decision(prog, c, rule.handle)),
                    );
                    true
                }
                Some(VerdictC::Return) => {
                    do_return(prog, fx, sc, base, i, res);
                    true
                }
                Some(VerdictC::Jump(t)) => {
                    let d = usize::from(sc.depth[u]);
                    if d == JUMP_STACK {
                        // Unreachable after the load-time depth check; the kernel drops here.
                        res[u] = (
                            FinalVerdict::Drop,
                            Some(rule_decision(prog, c, rule.handle)),
                        );
                    } else {
                        sc.stacks[u][d] = (c, r as u32 + 1);
                        sc.depth[u] += 1;
                        sc.enqueue(t, i, 0);
                    }
                    true
                }
                Some(VerdictC::Goto(t)) => {
                    sc.enqueue(t, i, 0);
                    true
                }
            };
            sc.gone[u] = gone;
            any_gone |= gone;
        }
        if any_gone {
            let gone = &mut sc.gone;
            sc.active.retain(|&i| {
                let u = usize::from(i);
                let g = gone[u];
                gone[u] = false;
                !g
            });
            // Reset the flags of packets that left (they are not in `active` any more).
            for &i in &sc.live {
                sc.gone[usize::from(i)] = false;
            }
        }
        r += 1;
    }
    // Packets returning past the last rule join those that ran off the end.
    while ei < sc.entries.len() {
        sc.active.push(sc.entries[ei].0);
        ei += 1;
    }
    // End of the chain: return to the caller or the base chain's policy.
    for k in 0..sc.active.len() {
        let i = sc.active[k];
        let u = usize::from(i);
        if sc.depth[u] != 0 {
            fx.emit(|| end_event(prog, c, u, None));
        }
        do_return(prog, fx, sc, base, i, res);
    }
}
