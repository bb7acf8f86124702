//! Hook calls: the base chains registered on each hook, the one entry point that runs a
//! vector through them ([`Engine::run`]) into a caller-owned [`HookResult`], the reference
//! walk of one packet, and the per-chain statistics.

use wasp_ruleset::model::{Family, Hook};

use crate::compare::bits;
use crate::compiled::{ChainId, Program};
use crate::conn::ConnFx;
use crate::engine::Engine;
use crate::eval::{Effects, ExtFx, policy_decision, walk_one};
use crate::expr::{PktState, ifname_value, skb_len_ingress};
use crate::ext::{DupCopies, DupPoint, ExtEdit, Extensions};
use crate::packet::{FinalVerdict, MAX_VECTOR, OutId, Outcome, Packet, TraceSink, nfproto};
use crate::pipeline::{View, run_base};

/// What one base chain did on one hook of one device since the engine was compiled: packets
/// whose walk entered it and how the walks ended. Counted per vector by the engine itself, so
/// a caller needs no trace to report them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChainStats {
    /// Table index.
    pub table: u32,
    /// Chain index in its table.
    pub chain: u32,
    /// Packets whose walk entered the chain (an inet chain sees only the IP packets that
    /// passed the hook's header validation; a frame discarded before the hook reaches none).
    pub packets: u64,
    /// Walks of the chain (and the chains it jumped to) that ended in accept: the packet goes
    /// on to the hook's next base chain, which may still drop it.
    pub accepted: u64,
    /// Walks that ended in drop (a rule's verdict or the policy).
    pub dropped: u64,
}

/// Where a hook call ([`Engine::run`]) runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum At<'d> {
    /// The netdev (and inet) ingress hook of a device.
    Ingress(&'d str),
    /// The netdev egress hook of a device.
    Egress(&'d str),
    /// An IP hook of the ip, ip6 and inet tables (`prerouting`, `input`, `forward`, `output`,
    /// `postrouting`): no device, every packet of the chains' families.
    Ip(Hook),
    /// The prerouting chains that run before conntrack (priority below -200).
    PreConntrack,
}

/// What one hook call gives back: owned by the caller, reused across calls ([`Engine::run`]
/// clears it first). Indices are packet indices in the call's input.
#[derive(Debug, Default)]
pub struct HookResult {
    /// One outcome per packet.
    pub outcomes: Vec<Outcome>,
    /// Edits that plugin statements made, as (packet, edit), in the order they were made.
    ///
    /// During the walk a statement's edits apply to an engine-owned copy of the packet at
    /// once, and everything after it on that packet's walk (matches, set lookups, plugin
    /// calls, `fwd`; the hook's later base chains too) reads the copy, as later expressions
    /// read the skb after the kernel's `payload set`. Applying a packet's edits in this order
    /// to the frame as received ([`HookResult::edited_frames`]) gives the frame its walk ended
    /// with: the one to send. The caller's frames are never written.
    pub edits: Vec<(usize, ExtEdit)>,
    /// Where `dup` statements ran while plugins were installed, in the order they ran: the
    /// packet, the target and how many entries of `edits` had been made then. The copy a `dup`
    /// sends is the packet as it was when the statement ran (nft_dup_netdev_eval clones the
    /// skb there): the frame as received with only those of its edits
    /// ([`HookResult::dup_copies`]).
    pub dups: Vec<DupPoint>,
    /// What the rules asked of the packets' connections, as (packet, effects), in packet
    /// order, only for packets with some.
    pub conn: Vec<(usize, ConnFx)>,
    /// Packets marked by `meta nftrace set 1` when the call ended, or marked on entry
    /// ([`Packet::nftrace`]) and not unmarked: the kernel's `skb->nf_trace`, which the caller
    /// hands to the packet's next hook. A bit set (bit `i % 64` of word `i / 64`: packet `i`;
    /// empty when none is marked); read it with [`HookResult::nftrace`].
    pub marked: Vec<u64>,
}

impl HookResult {
    /// An empty result with room for a vector.
    pub fn new() -> Self {
        HookResult {
            outcomes: Vec::with_capacity(MAX_VECTOR),
            ..HookResult::default()
        }
    }

    /// Empty it (keeping its buffers).
    pub fn clear(&mut self) {
        self.outcomes.clear();
        self.edits.clear();
        self.dups.clear();
        self.conn.clear();
        self.marked.clear();
    }

    /// Whether packet `i` left the call marked by `meta nftrace set 1` ([`HookResult::marked`]).
    pub fn nftrace(&self, i: usize) -> bool {
        self.marked
            .get(i / 64)
            .is_some_and(|w| w >> (i % 64) & 1 != 0)
    }

    /// Mark packet `i` in [`HookResult::marked`].
    fn mark(marked: &mut Vec<u64>, i: usize) {
        if marked.len() <= i / 64 {
            marked.resize(i / 64 + 1, 0);
        }
        marked[i / 64] |= 1 << (i % 64);
    }

    /// The frames of the call as its walks left them: `Some(bytes)` for each packet a plugin
    /// statement edited, `None` for the others (`frames` in the call's order). Empty when no
    /// packet was edited.
    pub fn edited_frames<'f>(
        &self,
        frames: impl Iterator<Item = &'f [u8]>,
    ) -> Vec<Option<Vec<u8>>> {
        if self.edits.is_empty() {
            return Vec::new();
        }
        crate::edited_frames(frames, &self.edits)
    }

    /// The `dup` copies of the call that differ from the frames [`HookResult::edited_frames`]
    /// gives (a `dup` before a later edit).
    pub fn dup_copies<'f>(&self, frames: impl Iterator<Item = &'f [u8]>) -> DupCopies {
        if self.edits.is_empty() {
            return DupCopies::default();
        }
        DupCopies::new(frames, &self.edits, &self.dups)
    }

    /// The connection effects of packet `i` (none when its rules asked nothing).
    pub fn conn_of(&self, i: usize) -> ConnFx {
        self.conn
            .iter()
            .find(|(k, _)| *k == i)
            .map(|(_, fx)| *fx)
            .unwrap_or_default()
    }
}

/// A hook of another kind registered among a device's netdev ingress chains at `priority`,
/// that may take packets away from the chains after it: the flowtable's ingress hook
/// (nf_flow_offload_ip_hook), which forwards a packet of an offloaded flow itself, so the
/// chains of higher priority never see it ([`Engine::run_ingress`]).
pub struct Steal<'a> {
    /// The hook's priority: it runs after the chains below it, before those at or above it
    /// (the kernel orders hooks of equal priority by registration; a flowtable is taken as
    /// registered first).
    pub priority: i32,
    /// Called once per packet that reaches the hook (accepted by the chains before it, not
    /// taken by a `fwd`), with its index in the call and the packet as those chains left it;
    /// `true` takes the packet (its outcome is the chains' so far, and no later chain sees
    /// it).
    pub take: &'a mut dyn FnMut(usize, &Packet<'_>) -> bool,
}

/// The base chains of one hook of one device, in the order they run.
#[derive(Debug, Clone)]
pub(crate) struct HookList {
    pub(crate) hook: Hook,
    pub(crate) device: String,
    pub(crate) chains: Vec<ChainId>,
    /// Per chain of `chains`: (packets, accepted, dropped).
    pub(crate) stats: Vec<(u64, u64, u64)>,
    /// Every chain is `type nat` (they run only for a connection's first packets).
    pub(crate) all_nat: bool,
    /// `device` as [`ifname_value`] packs it: found without a string comparison.
    pub(crate) key: u128,
}

impl HookList {
    /// `true` for the list of `hook` on device `dev` (`key`: `dev` as [`ifname_value`] packs
    /// it; names longer than its 16 bytes are compared whole).
    #[inline]
    pub(crate) fn is(&self, hook: Hook, dev: &str, key: u128) -> bool {
        self.hook == hook
            && self.key == key
            && self.device.len() == dev.len()
            && (dev.len() <= 16 || self.device == dev)
    }
}

/// Conntrack's priority on prerouting (the kernel's NF_IP_PRI_CONNTRACK).
pub(crate) const NF_IP_PRI_CONNTRACK: i32 = -200;

/// The device name of the list of prerouting chains that run before conntrack (no device has
/// a NUL in its name).
pub(crate) const PRE_CONNTRACK: &str = "\0conntrack";

impl Engine {
    /// Run one hook call: the chains of `at` over `packets` (a vector of up to [`MAX_VECTOR`];
    /// longer inputs run in vectors of that size) at time `now_ns` (ns on the packet path's
    /// clock). `res` is cleared first and then holds one outcome per packet and what the walks
    /// made besides (edits, `dup` points, connection effects); nothing of the call stays in the
    /// engine. Trace events go to `trace` when given (for every packet, as if `meta nftrace
    /// set 1`; one whose [`TraceSink::walk`] is `false` gets only `log` lines). `ext` serves
    /// the plugin use sites for this call instead of the installed plugins
    /// ([`Engine::set_ext`]), for an embedder that keeps its plugin host.
    ///
    /// Events of one packet come in the order of its walk; events of different packets of a
    /// vector interleave (group them by [`crate::TraceEvent`]'s `packet`, which counts within the
    /// call).
    ///
    /// What each hook sees, as the kernel's:
    /// - [`At::Ingress`]: the netdev (and inet) ingress chains of the device; `meta len` is
    ///   the frame without its Ethernet header.
    /// - [`At::Egress`]: the netdev egress chains of the device (frames leaving through it):
    ///   `meta oifname` is the device, `meta len` the whole frame (the kernel's skb at egress
    ///   still holds its Ethernet header); the caller gives an empty `iifname` (nf_hook_egress
    ///   has no input device) and the mark the packet carries. Checked on Linux 6.18 for
    ///   frames `fwd`/`dup` sent there: `meta len` 52 for a frame of 38 bytes at ingress.
    /// - [`At::Ip`]: an IP hook of the ip, ip6 and inet tables: each chain sees the packets of
    ///   its family (an inet chain both), in priority order; `type nat` chains see only
    ///   packets whose [`crate::CtMeta::nat_pending`] is set; `meta oifname` is each packet's
    ///   [`Packet::oifname`], `meta len` the IP packet's length.
    /// - [`At::PreConntrack`]: the prerouting chains whose priority is below conntrack's
    ///   (-200, NF_IP_PRI_CONNTRACK; `priority raw` is -300), before conntrack tracks the
    ///   packets: what they ask (`ct zone set`, `notrack`) decides how conntrack sees each
    ///   packet ([`HookResult::conn`]).
    pub fn run(
        &mut self,
        at: At<'_>,
        packets: &[Packet<'_>],
        now_ns: u64,
        res: &mut HookResult,
        trace: Option<&mut dyn TraceSink>,
        ext: Option<&mut dyn Extensions>,
    ) {
        let (hook, dev) = match at {
            At::Ingress(d) => (Hook::Ingress, d),
            At::Egress(d) => (Hook::Egress, d),
            At::Ip(h) => {
                debug_assert!(!matches!(h, Hook::Ingress | Hook::Egress));
                (h, "")
            }
            At::PreConntrack => (Hook::Prerouting, PRE_CONNTRACK),
        };
        res.clear();
        self.run_hook(hook, dev, packets, now_ns, res, trace, ext, None);
    }

    /// [`Engine::run`] at the netdev ingress hook of `dev`, with `steal` (when given) run at
    /// its priority among the chains: the packets it takes leave the hook there. Which packets
    /// it took is the caller's to remember (their outcomes are accepts).
    #[allow(clippy::too_many_arguments)]
    pub fn run_ingress(
        &mut self,
        dev: &str,
        packets: &[Packet<'_>],
        now_ns: u64,
        res: &mut HookResult,
        trace: Option<&mut dyn TraceSink>,
        ext: Option<&mut dyn Extensions>,
        steal: Option<Steal<'_>>,
    ) {
        res.clear();
        self.run_hook(Hook::Ingress, dev, packets, now_ns, res, trace, ext, steal);
    }

    /// Per-packet reference evaluation of the ingress hook: the same result as
    /// [`Engine::run`] at [`At::Ingress`] for a vector of one, computed by a plain walk
    /// without the vector pipeline (used to check the pipeline). `packet_index` is the
    /// `packet` of trace events and of the edits and `dup` points in `res` (cleared first;
    /// its outcomes stay empty: the outcome is returned).
    pub fn ingress_one(
        &mut self,
        dev: &str,
        packet: &Packet<'_>,
        packet_index: usize,
        now_ns: u64,
        res: &mut HookResult,
        trace: Option<&mut dyn TraceSink>,
    ) -> Outcome {
        self.walk_hook(dev, packet, packet_index, now_ns, res, trace, true)
    }

    /// [`Engine::ingress_one`], with `memo` false running every operation of every rule as
    /// the kernel does (no answers remembered between rules; for tests of the memo).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn walk_hook(
        &mut self,
        dev: &str,
        packet: &Packet<'_>,
        packet_index: usize,
        now_ns: u64,
        res: &mut HookResult,
        trace: Option<&mut dyn TraceSink>,
        memo: bool,
    ) -> Outcome {
        res.clear();
        self.walk(
            Hook::Ingress,
            dev,
            packet,
            packet_index,
            now_ns,
            res,
            trace,
            None,
            memo,
            None,
        )
    }

    /// One packet through the base chains of `hook` on `dev` by the plain walk (no vector
    /// pipeline): the reference the pipeline is checked against, and the faster way for a
    /// vector of one (the IP path of a single packet). Writes the packet's edits, `dup`
    /// points and connection effects into `res` (not cleared here) and returns its outcome;
    /// what each hook sees is as [`Engine::run`] says.
    #[allow(clippy::too_many_arguments)]
    fn walk(
        &mut self,
        hook: Hook,
        dev: &str,
        packet: &Packet<'_>,
        packet_index: usize,
        now_ns: u64,
        res: &mut HookResult,
        trace: Option<&mut dyn TraceSink>,
        given: Option<&mut dyn Extensions>,
        memo: bool,
        mut steal: Option<Steal<'_>>,
    ) -> Outcome {
        let now = self.since_epoch(now_ns);
        let Engine {
            prog,
            hooks,
            scratch,
            ext: installed,
            ext_scratch,
            conn_count,
            env,
            rare,
            hits,
            ..
        } = self;
        let mut ext: Option<&mut dyn Extensions> = match given {
            Some(e) => Some(e),
            None => installed.0.as_deref_mut().map(|e| e as &mut dyn Extensions),
        };
        if let Some(e) = ext.as_deref_mut() {
            e.advance(now_ns);
        }
        if let Some(o) = discarded_before_hook(hook, packet) {
            return o;
        }
        let key = ifname_value(dev);
        let Some(h) = hooks.iter_mut().find(|h| h.is(hook, dev, key)) else {
            if let Some(s) = steal.as_mut() {
                (s.take)(packet_index, packet);
            }
            return Outcome::unseen(packet.mark);
        };
        let egress = hook == Hook::Egress;
        let l3 = !matches!(hook, Hook::Ingress | Hook::Egress);
        let oif = if egress {
            ifname_value(dev)
        } else if l3 && !packet.oifname.is_empty() {
            ifname_value(packet.oifname)
        } else {
            0
        };
        let mut st = packet_state(hook, ifname_value(packet.iifname), oif, packet);
        if prog.needs_env {
            env.fill(&mut st, now_ns);
        }
        let walk = trace.as_deref().is_some_and(|t| t.walk());
        let marked_only = trace.as_deref().is_some_and(|t| t.marked_only());
        rare.clear();
        let mut fx = Effects {
            trace,
            walk,
            marked_only,
            marked: u64::from(packet.nftrace && packet_index < 64) << (packet_index % 64),
            oif: if egress { dev } else { "" },
            hits: {
                hits.n = 0;
                hits
            },
            now,
            ext: ExtFx {
                ext,
                sites: &prog.ext_sites,
                edits: &mut res.edits,
                dups: &mut res.dups,
                scratch: ext_scratch,
                first: 0,
                counter_uses: &prog.counter_uses,
            },
            conn: conn_count.as_deref(),
            clock: now_ns,
            rare,
        };
        // The packet's copy once a plugin statement edits it (slot 0).
        let ed = &mut scratch.ed;
        ed.reset(egress);
        let mut decision = None;
        let mut verdict = FinalVerdict::Accept;
        // The stealing hook ran (or the packet left before it).
        let mut stole = false;
        let mut taken = false;
        for (&base, stats) in h.chains.iter().zip(&mut h.stats) {
            let chain = &prog.chains[base];
            if let Some(s) = steal.as_mut()
                && !stole
                && chain
                    .base
                    .as_ref()
                    .is_some_and(|b| b.priority >= s.priority)
            {
                stole = true;
                taken = if ed.has(0) {
                    (s.take)(packet_index, &ed.packet(0, packet))
                } else {
                    (s.take)(packet_index, packet)
                };
                if taken {
                    break;
                }
            }
            if l3 {
                // nf_hook runs a family's chains on its packets only; `type nat` chains run
                // for a connection's first packet until it has a binding (nf_nat_inet_fn).
                let family = match chain.family {
                    Family::Ip => st.nfproto == 2,
                    Family::Ip6 => st.nfproto == 10,
                    _ => matches!(st.nfproto, 2 | 10),
                };
                let nat_only = chain.is_nat();
                if !family || (nat_only && !st.nat_pending) {
                    continue;
                }
            } else {
                let gate = if ed.has(0) {
                    inet_gate(prog, base, &ed.packet(0, packet))
                } else {
                    inet_gate(prog, base, packet)
                };
                match gate {
                    Gate::Skip => continue,
                    Gate::Drop => {
                        verdict = FinalVerdict::Drop;
                        decision = None;
                        break;
                    }
                    Gate::Run => {}
                }
            }
            let (v, d) = walk_one(prog, &mut fx, base, packet_index, packet, ed, &mut st, memo);
            decision = Some(d);
            stats.0 += 1;
            if v == FinalVerdict::Drop {
                stats.2 += 1;
                verdict = v;
                break;
            }
            stats.1 += 1;
            if st.fwd != 0 {
                break;
            }
        }
        if let Some(s) = steal.as_mut()
            && !stole
            && !taken
            && verdict == FinalVerdict::Accept
            && st.fwd == 0
        {
            if ed.has(0) {
                (s.take)(packet_index, &ed.packet(0, packet));
            } else {
                (s.take)(packet_index, packet);
            }
        }
        if st.ct_mark_set || st.nat != 0 || st.flow != 0 || st.rare != 0 {
            let c = conn_fx_of(prog, &st, fx.rare);
            if !c.is_empty() {
                res.conn.push((packet_index, c));
            }
        }
        if st.nftrace {
            HookResult::mark(&mut res.marked, packet_index);
        }
        Outcome {
            verdict,
            decision,
            mark: st.mark,
            fwd: st.fwd.checked_sub(1).map(OutId),
            dup: st.dup,
            reject: match (verdict, st.rare) {
                (FinalVerdict::Drop, r) if r != 0 => crate::eval::rare_of(fx.rare, &st).reject,
                _ => None,
            },
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn run_hook(
        &mut self,
        hook: Hook,
        dev: &str,
        packets: &[Packet<'_>],
        now_ns: u64,
        result: &mut HookResult,
        mut trace: Option<&mut dyn TraceSink>,
        given: Option<&mut dyn Extensions>,
        mut steal: Option<Steal<'_>>,
    ) {
        if let [p] = packets {
            // One packet (the IP path of a single packet, a port's lone frame): the plain
            // walk costs a few ns per rule, the pipeline's bookkeeping more (`flow-path`).
            let o = self.walk(hook, dev, p, 0, now_ns, result, trace, given, true, steal);
            result.outcomes.push(o);
            return;
        }
        let now = self.since_epoch(now_ns);
        let n = packets.len();
        let Engine {
            prog,
            hooks,
            epoch: _,
            scratch,
            state,
            res,
            ext: installed,
            ext_scratch,
            conn_count,
            env,
            rare,
            hits,
            ..
        } = self;
        let HookResult {
            outcomes: out,
            edits,
            dups,
            conn: conn_fx,
            marked,
        } = result;
        let mut ext: Option<&mut dyn Extensions> = match given {
            Some(e) => Some(e),
            None => installed.0.as_deref_mut().map(|e| e as &mut dyn Extensions),
        };
        let key = ifname_value(dev);
        let Some(h) = hooks.iter_mut().find(|h| h.is(hook, dev, key)) else {
            // No chain here, but the plugins' clock still moves (their timers fire).
            if n > 0
                && let Some(e) = ext.as_deref_mut().map(|e| e as &mut dyn Extensions)
            {
                e.advance(now_ns);
            }
            for (i, p) in packets.iter().enumerate() {
                out.push(match discarded_before_hook(hook, p) {
                    Some(d) => d,
                    None => {
                        if let Some(s) = steal.as_mut() {
                            (s.take)(i, p);
                        }
                        Outcome::unseen(p.mark)
                    }
                });
            }
            return;
        };
        let egress = hook == Hook::Egress;
        let l3 = !matches!(hook, Hook::Ingress | Hook::Egress);
        let oif = if egress { ifname_value(dev) } else { 0 };
        // The output device of the IP hooks is the packet's own.
        let mut oif_of: (&str, u128) = ("", 0);
        // `meta iifname` of the previous packet: a vector usually comes from one device (the
        // same `&str`, so a pointer comparison finds it).
        let mut iif: (&str, u128) = ("", 0);
        let mut start = 0;
        while start < n {
            let step = if prog.one_by_one { 1 } else { MAX_VECTOR };
            let end = (start + step).min(n);
            let vec = &packets[start..end];
            if let Some(e) = ext.as_deref_mut().map(|e| e as &mut dyn Extensions) {
                e.advance(now_ns);
            }
            // The vector's header offsets, made when a chain with rules runs.
            let mut view: Option<View<'_>> = None;
            scratch.new_vector(egress);
            let mut alive = u64::MAX >> (MAX_VECTOR - vec.len());
            // The packets' walk states, made when a chain with rules runs: a hook whose chains
            // hold only policies reads none.
            let mut stated = false;
            for (i, p) in vec.iter().enumerate() {
                res[i] = (FinalVerdict::Accept, None);
                if hook == Hook::Ingress && p.meta.untag_drop {
                    // Freed before the hook (see `discarded_before_hook`).
                    res[i] = (FinalVerdict::Drop, None);
                    alive &= !(1 << i);
                }
            }
            let walk = trace.as_deref().is_some_and(|t| t.walk());
            let mut fx = Effects {
                walk,
                marked_only: trace.as_deref().is_some_and(|t| t.marked_only()),
                // Only a traced walk reads who is marked.
                marked: if walk {
                    vec.iter()
                        .enumerate()
                        .fold(0, |m, (i, p)| m | u64::from(p.nftrace) << i)
                } else {
                    0
                },
                trace: trace.as_deref_mut(),
                oif: if egress { dev } else { "" },
                hits: {
                    hits.n = 0;
                    hits
                },
                now,
                ext: ExtFx {
                    ext: ext.as_deref_mut().map(|e| e as &mut dyn Extensions),
                    sites: &prog.ext_sites,
                    edits,
                    dups,
                    scratch: ext_scratch,
                    first: start,
                    counter_uses: &prog.counter_uses,
                },
                conn: conn_count.as_deref(),
                clock: now_ns,
                rare,
            };
            // Packets of each IP family, and those whose nat chains run (IP hooks).
            let (mut v4, mut v6, mut nat) = (0u64, 0u64, 0u64);
            if l3 {
                for (i, p) in vec.iter().enumerate() {
                    match nfproto(p.meta.protocol) {
                        2 => v4 |= 1 << i,
                        10 => v6 |= 1 << i,
                        _ => {}
                    }
                    if p.ct.nat_pending {
                        nat |= 1 << i;
                    }
                }
            }
            let mut stole = false;
            for (&base, stats) in h.chains.iter().zip(&mut h.stats) {
                let chain = &prog.chains[base];
                if let Some(s) = steal.as_mut()
                    && !stole
                    && chain
                        .base
                        .as_ref()
                        .is_some_and(|b| b.priority >= s.priority)
                {
                    stole = true;
                    alive &= !steal_vector(s, alive, vec, start, &scratch.ed);
                }
                let entry = if l3 {
                    // nf_hook runs a family's chains on its packets only; `type nat` chains
                    // run for a connection's first packet until it has a binding
                    // (nf_nat_inet_fn).
                    let fam = match chain.family {
                        Family::Ip => v4,
                        Family::Ip6 => v6,
                        _ => v4 | v6,
                    };
                    let nat_only = chain.is_nat();
                    alive & fam & if nat_only { nat } else { u64::MAX }
                } else if chain.family == Family::Inet {
                    // nft_do_chain_inet_ingress: non-IP frames skip the chain, IP packets
                    // that fail header validation are dropped before it (see `inet_gate`);
                    // packets an earlier chain's statements edited are judged as edited.
                    let v = view.get_or_insert_with(|| View::new(vec));
                    let (ip, l4) = scratch.ed.gate(v.ip, v.l4);
                    let bad = alive & ip & !l4;
                    for i in bits(bad) {
                        res[i] = (FinalVerdict::Drop, None);
                    }
                    alive &= !bad;
                    alive & ip
                } else {
                    alive
                };
                if entry == 0 {
                    continue;
                }
                let (dropped, stolen) = if chain.rules.is_empty() && !fx.walk {
                    // No rule to walk: the policy decides every packet that entered.
                    let (v, d) = policy_decision(prog, base);
                    for i in bits(entry) {
                        res[i] = (v, Some(d));
                    }
                    (if v == FinalVerdict::Drop { entry } else { 0 }, 0)
                } else {
                    if !stated {
                        let ifs = (&mut iif, &mut oif_of);
                        let st = &mut state[..vec.len()];
                        fill_states(hook, vec, oif, ifs, st, env, prog, now_ns);
                        stated = true;
                    }
                    run_base(
                        prog,
                        &mut fx,
                        scratch,
                        base,
                        entry,
                        view.get_or_insert_with(|| View::new(vec)),
                        vec,
                        &mut state[..vec.len()],
                        &mut res[..vec.len()],
                    )
                };
                stats.0 += u64::from(entry.count_ones());
                stats.1 += u64::from((entry & !dropped).count_ones());
                stats.2 += u64::from(dropped.count_ones());
                // A stolen packet (`fwd`) leaves the hook: later base chains do not see it.
                alive &= !(dropped | stolen);
            }
            if let Some(s) = steal.as_mut()
                && !stole
            {
                steal_vector(s, alive, vec, start, &scratch.ed);
            }
            // One pass over the vector's states: marks, connection effects, outcomes (an
            // `extend` over slices: one reservation, no capacity test per packet).
            let rare_out = &*fx.rare;
            if !stated {
                // No walk ran: each packet keeps what it came with.
                out.extend(
                    vec.iter()
                        .zip(&res[..vec.len()])
                        .enumerate()
                        .map(|(i, (p, r))| {
                            if p.nftrace {
                                HookResult::mark(marked, start + i);
                            }
                            Outcome {
                                verdict: r.0,
                                decision: r.1,
                                ..Outcome::unseen(p.mark)
                            }
                        }),
                );
                start = end;
                continue;
            }
            let states = state[..vec.len()].iter().zip(&res[..vec.len()]);
            out.extend(states.enumerate().map(|(i, (st, r))| {
                if st.nftrace {
                    HookResult::mark(marked, start + i);
                }
                // Most packets ask nothing of their connection: a cheap test first.
                if st.ct_mark_set || st.nat != 0 || st.flow != 0 || st.rare != 0 {
                    let c = conn_fx_of(prog, st, rare_out);
                    if !c.is_empty() {
                        conn_fx.push((start + i, c));
                    }
                }
                Outcome {
                    verdict: r.0,
                    decision: r.1,
                    mark: st.mark,
                    fwd: st.fwd.checked_sub(1).map(OutId),
                    dup: st.dup,
                    reject: match st.rare {
                        0 => None,
                        _ => crate::eval::rare_of(rare_out, st).reject,
                    },
                }
            }));
            start = end;
        }
    }

    /// Every base chain's [`ChainStats`] with its hook and device (`""` for the IP hooks), hook
    /// by hook in the order the engine registered them: what metrics publish.
    pub fn all_chain_stats(&self) -> Vec<(Hook, &str, ChainStats)> {
        self.hooks
            .iter()
            .flat_map(|h| {
                self.stats_of(h)
                    .map(move |s| (h.hook, h.device.as_str(), s))
            })
            .collect()
    }

    /// Per base chain of `hook` on `dev`, in running order (as [`Engine::base_chains`]): the
    /// packets its walks saw and how they ended, counted since the engine was compiled by
    /// [`Engine::run`] / [`Engine::ingress_one`]. Empty when no chain
    /// is on that hook of that device.
    pub fn chain_stats(&self, hook: Hook, dev: &str) -> Vec<ChainStats> {
        self.hooks
            .iter()
            .find(|h| h.is(hook, dev, ifname_value(dev)))
            .map(|h| self.stats_of(h).collect())
            .unwrap_or_default()
    }

    /// The statistics of the base chains of hook list `h`, in running order.
    fn stats_of<'a>(&'a self, h: &'a HookList) -> impl Iterator<Item = ChainStats> + 'a {
        h.chains
            .iter()
            .zip(&h.stats)
            .map(|(&c, &(packets, accepted, dropped))| {
                let c = &self.prog.chains[c];
                ChainStats {
                    table: c.table,
                    chain: c.index,
                    packets,
                    accepted,
                    dropped,
                }
            })
    }
}

/// What the rules asked of a packet's connection (state `st` after its walk): the NAT
/// statement's computed target resolved from the program (a map element's data, or the
/// address a `numgen`/`jhash` gave).
fn conn_fx_of(prog: &Program, st: &PktState, rare: &[crate::expr::StmtOut]) -> ConnFx {
    let r = crate::eval::rare_of(rare, st);
    let nat = st.nat.checked_sub(1);
    let nat_target = nat
        .and_then(|i| prog.nat_calcs.get(usize::from(i))?.as_ref())
        .and_then(|c| {
            if c.map_data {
                let mut t = *prog.nat_data.get(usize::try_from(r.nat_arg).ok()?)?;
                t.netmap = prog.nats[usize::from(nat?)].prefix;
                Some(t)
            } else {
                let a = if c.v6 {
                    std::net::IpAddr::from(r.nat_arg.to_be_bytes())
                } else {
                    std::net::IpAddr::from((r.nat_arg as u32).to_be_bytes())
                };
                Some(crate::conn::NatTarget {
                    addr: Some((a, a)),
                    ports: None,
                    netmap: false,
                })
            }
        });
    ConnFx {
        mark: st.ct_mark_set.then_some(st.ct_mark),
        nat,
        flow_add: st.flow.checked_sub(1),
        nat_target,
        zone: r.ct_zone,
        label: r.ct_label,
        event: r.ct_event,
        notrack: r.notrack,
    }
}

/// The walk states of the packets of `vec` at the start of hook `hook` into `state` (one per
/// packet): `oif` is the hook's output device ([`ifname_value`]; the IP hooks use each packet's
/// own), `ifs` the last input and output device names met and their values (a vector usually
/// comes from one device: the same `&str`, so a pointer comparison finds it).
#[allow(clippy::too_many_arguments)]
fn fill_states<'p>(
    hook: Hook,
    vec: &[Packet<'p>],
    oif: u128,
    ifs: (&mut (&'p str, u128), &mut (&'p str, u128)),
    state: &mut [PktState],
    env: &mut crate::engine::MetaEnv,
    prog: &Program,
    now_ns: u64,
) {
    let l3 = !matches!(hook, Hook::Ingress | Hook::Egress);
    let (iif, oif_of) = ifs;
    for (p, st) in vec.iter().zip(state) {
        if !std::ptr::eq(p.iifname, iif.0) {
            *iif = (p.iifname, ifname_value(p.iifname));
        }
        let oif = if l3 && !p.oifname.is_empty() {
            if !std::ptr::eq(p.oifname, oif_of.0) {
                *oif_of = (p.oifname, ifname_value(p.oifname));
            }
            oif_of.1
        } else {
            oif
        };
        *st = packet_state(hook, iif.1, oif, p);
        if prog.needs_env {
            env.fill(st, now_ns);
        }
    }
}

/// Per-packet state at the start of a hook; `iif` and `oif` are the device names as
/// [`ifname_value`] gives them.
fn packet_state(hook: Hook, iif: u128, oif: u128, p: &Packet<'_>) -> PktState {
    let egress = hook == Hook::Egress;
    PktState {
        iif,
        oif,
        skb_len: if egress {
            p.meta.len
        } else {
            skb_len_ingress(&p.meta)
        },
        mark: p.mark,
        nftrace: p.nftrace,
        nfproto: nfproto(p.meta.protocol),
        fwd: 0,
        dup: 0,
        ct_state: p.ct.state,
        ct_dir: p.ct.dir,
        ct_status: p.ct.status,
        ct_mark: p.ct.mark,
        ct_id: p.ct.id,
        nat_pending: p.ct.nat_pending,
        ct_mark_set: false,
        nat: 0,
        flow: 0,
        // Filled by `MetaEnv::fill`.
        priority: 0,
        cpu: 0,
        random: 0,
        wall_ns: 0,
        iif_mac: None,
        rare: 0,
    }
}

/// The outcome of a frame the kernel frees before the hook runs, so that no chain sees it:
/// drop, no decision, mark unchanged.
///
/// At ingress that is a frame whose EtherType at offset 12 is 802.1Q (0x8100) or 802.1ad
/// (0x88a8) and that is shorter than 20 bytes: `__netif_receive_skb_core` calls
/// `skb_vlan_untag`, whose `pskb_may_pull(skb, VLAN_HLEN + sizeof(unsigned short))` after the
/// Ethernet header fails, so the skb is freed before `nf_hook_ingress`
/// ([`PacketMeta::untag_drop`]). Such a frame gets no trace event and touches no counter.
/// `wasp replay` counts it as dropped and as seen by no base chain (its verdict line is
/// `drop - - -`, as the conformance harness reports the kernel's result).
fn discarded_before_hook(hook: Hook, p: &Packet<'_>) -> Option<Outcome> {
    (hook == Hook::Ingress && p.meta.untag_drop).then_some(Outcome {
        verdict: FinalVerdict::Drop,
        decision: None,
        mark: p.mark,
        fwd: None,
        dup: 0,
        reject: None,
    })
}

/// What the inet family's ingress hook does before its chain (nft_do_chain_inet_ingress).
enum Gate {
    /// Not an inet chain, or an IP packet that passed validation: run the chain.
    Run,
    /// Not IPv4/IPv6: the hook accepts without running the chain.
    Skip,
    /// IP header validation failed (nft_set_pktinfo_ipv4_ingress / _ipv6_ingress): dropped.
    Drop,
}

fn inet_gate(prog: &Program, base: ChainId, p: &Packet<'_>) -> Gate {
    if prog.chains[base].family != Family::Inet {
        return Gate::Run;
    }
    match p.meta.protocol {
        0x0800 | 0x86dd if p.meta.l4.is_some() => Gate::Run,
        0x0800 | 0x86dd => Gate::Drop,
        _ => Gate::Skip,
    }
}

/// Offer the packets of `alive` (bits over `vec`, whose first packet is the call's `start`)
/// to `s`, each as the chains so far left it; the bits of those it took.
fn steal_vector(
    s: &mut Steal<'_>,
    alive: u64,
    vec: &[Packet<'_>],
    start: usize,
    ed: &crate::ext::Edited,
) -> u64 {
    let mut took = 0;
    for i in bits(alive) {
        let got = if ed.has(i) {
            (s.take)(start + i, &ed.packet(i, &vec[i]))
        } else {
            (s.take)(start + i, &vec[i])
        };
        if got {
            took |= 1 << i;
        }
    }
    took
}
