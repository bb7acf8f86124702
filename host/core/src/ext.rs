//! Extension expressions: plugins used in rules (`geneve opt class 0x0102`, `idletimer label
//! "x" timeout 10s`). wasp-core never depends on wasmtime: the engine calls a use site through
//! [`Extensions`], which the plugin host (`wasp-plugin`) implements once per worker, and tests
//! implement with plain Rust.
//!
//! Calls are batched: the engine hands an extension all packets of a vector that reached the
//! expression (at most [`crate::MAX_VECTOR`]) in one call, because a plugin call costs about
//! 165 ns and a batched one about 15 ns per packet (research/plugins.md).
//!
//! Failure is the implementation's business: when a plugin traps, runs out of time or memory,
//! or returns a malformed result, the implementation writes the use site's fallback for every
//! packet of the call (see [`Fallback`]), counts and reports it, and the engine carries on.
//!
//! A statement's edits change the packet for the rest of its walk, as the kernel's `payload
//! set` changes the skb: later matches, set lookups, plugin calls and `fwd`/`dup` see the
//! edited bytes (`Edited`), and each edit is made on the frame the edits before it left.

use wasp_wire::PacketMeta;

use crate::expr::{PktState, skb_len_ingress};
use crate::packet::{MAX_VECTOR, OutId, Packet, nfproto};

/// How a use site uses its plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExtKind {
    /// A boolean per packet; the rule goes on when true.
    Match,
    /// A verdict per packet (and edits of its bytes).
    Statement,
    /// State per use site or per set element (a counter); evaluated as a statement.
    Stateful,
}

/// What a use site's packets get when its plugin fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Fallback {
    /// As if the expression were absent: a match is false, a statement continues.
    #[default]
    Absent,
    /// Fail closed: the packet is dropped (`fallback drop`).
    Drop,
}

/// A use site: one place in the ruleset where a plugin is used, with its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtSite {
    /// The site's id, unique in the ruleset, dense from 0 (the index into the engine's sites).
    pub id: u32,
    /// Index of the table that declares the plugin.
    pub table: u32,
    /// The plugin's name as declared in the table (`plugin geneve { ... }`).
    pub plugin: String,
    /// How it is used.
    pub kind: ExtKind,
    /// Arguments as written in the rule, as tokens.
    pub args: Vec<String>,
    /// The fallback for this site.
    pub fallback: Fallback,
}

/// One packet handed to an extension: the fields of the WIT packet header
/// (`wit/plugin.wit`, "The packet buffer") and the frame.
#[derive(Debug, Clone, Copy)]
pub struct ExtPacket<'a> {
    /// The frame as the walk has it at this point, Ethernet header first: as received, with
    /// the edits of the statements that ran before on this packet applied (captured bytes).
    pub frame: &'a [u8],
    /// Frame length in bytes (`meta length`).
    pub len: u32,
    /// Input interface index (0 in a replay).
    pub iif: u32,
    /// `meta mark` at this point of the walk.
    pub mark: u32,
    /// For a per-element expression the set element's id + 1, else 0.
    pub elem: u32,
    /// Offset of the network header, `0xffff` for none.
    pub l3: u16,
    /// Offset of the transport header, `0xffff` for none (or a non-first fragment).
    pub l4: u16,
    /// `meta l4proto` (0 for none).
    pub l4proto: u8,
    /// `meta nfproto`: 2 IPv4, 10 IPv6, 0 other.
    pub nfproto: u8,
    /// ARPHRD type of the input device (1 for Ethernet).
    pub iftype: u32,
}

/// A statement's verdict for one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ExtVerdict {
    /// Go on with the rule.
    #[default]
    Continue,
    /// `accept`.
    Accept,
    /// `drop`.
    Drop,
    /// `return`.
    Return,
}

/// An edit of one packet's bytes, returned by a statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExtEdit {
    /// Overwrite bytes at `offset` (within the frame).
    Set {
        /// Byte offset in the frame.
        offset: u32,
        /// New bytes.
        data: Vec<u8>,
    },
    /// Insert bytes before `offset` (0..=len): encapsulation.
    Insert {
        /// Byte offset in the frame.
        offset: u32,
        /// Bytes to insert.
        data: Vec<u8>,
    },
    /// Remove `count` bytes at `offset`: decapsulation.
    Remove {
        /// Byte offset in the frame.
        offset: u32,
        /// Bytes to remove.
        count: u32,
    },
}

/// Plugins as the engine calls them, per worker (the engine is per worker too).
pub trait Extensions: Send {
    /// Evaluate match site `site` on `pkts`, writing one answer per packet into `out`
    /// (`out.len() == pkts.len()`). On a plugin failure, write the site's fallback.
    fn matches(&mut self, site: u32, pkts: &[ExtPacket<'_>], out: &mut [bool]);

    /// Evaluate statement or stateful site `site` on `pkts`, writing one verdict per packet
    /// into `verdicts` (`verdicts.len() == pkts.len()`) and pushing edits as `(packet index,
    /// edit)` onto `edits`, each made on the frame the edits before it for that packet left
    /// (the first on `pkts[i].frame`). The engine applies them before anything else reads the
    /// packet. On a plugin failure, write the site's fallback verdict for every
    /// packet ([`ExtVerdict::Continue`], or [`ExtVerdict::Drop`] for [`Fallback::Drop`]) and
    /// push no edit.
    fn apply(
        &mut self,
        site: u32,
        pkts: &[ExtPacket<'_>],
        verdicts: &mut [ExtVerdict],
        edits: &mut Vec<(usize, ExtEdit)>,
    );

    /// The packet clock moved to `now_ns` (before each vector): fire the timers that fell due
    /// up to it, in deadline order.
    fn advance(&mut self, now_ns: u64);

    /// `true` when the last [`Extensions::matches`] call failed (its answers are the
    /// fallback's "no match"). The engine asks after each call of a match site with
    /// [`Fallback::Drop`] and then drops the packets of that call, since a `bool` answer
    /// cannot say "fail closed". The default says no call ever fails.
    fn last_call_failed(&mut self) -> bool {
        false
    }
}

/// The plugin that serves every `counter` of a ruleset (rules, named counter objects, set
/// elements): the engine counts nothing itself, it makes a use site of this plugin for each.
pub const COUNTER_PLUGIN: &str = "counter";

/// What a counter use site the engine made counts (see [`crate::Engine::counter_uses`]).
///
/// Its [`ExtSite`] has plugin [`COUNTER_PLUGIN`], kind [`ExtKind::Stateful`] and the counter
/// plugin's arguments (`plugins/README.md`): `packets N bytes M` for the initial counts as
/// written, `name NAME` for an object, `elem E packets N bytes M` for a set element's. The
/// packets it gets have `len` = the packet's `skb->len` at the hook (nft's `meta length`, what
/// `nft_counter_do_eval` adds), and, for a set, `elem` = the element's counter slot
/// ([`CountedElems`]; a compile gives index in the model's elements + 1). Its calls leave no
/// trace event (the kernel traces no counter).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CounterUse {
    /// An anonymous `counter` statement: the `nth` counter (from 0) of rule `handle` in chain
    /// `chain` of table `table`.
    Rule {
        /// Table index.
        table: u32,
        /// Chain index in its table.
        chain: u32,
        /// Rule handle.
        handle: u64,
        /// Which of the rule's `counter` statements (usually 0).
        nth: u32,
    },
    /// The named counter object `name` of table `table` (`counter NAME { ... }`), counted by
    /// every `counter name NAME` of the table.
    Object {
        /// Table index.
        table: u32,
        /// Object name.
        name: String,
    },
    /// The per-element counters of set `set` of table `table`.
    Set {
        /// Table index.
        table: u32,
        /// Set name.
        set: String,
        /// The elements that count and their counter slots (shared: element commands make
        /// the new list once for every engine).
        elements: std::sync::Arc<CountedElems>,
    },
    /// The per-element counters of the `nth` anonymous set (from 0, in the order of
    /// `Rule::anonymous_sets_mut`) of rule `handle` in chain `chain` of table `table`:
    /// `ip saddr { 10.0.0.1 counter, 10.0.0.2 counter } accept`.
    AnonSet {
        /// Table index.
        table: u32,
        /// Chain index in its table.
        chain: u32,
        /// Rule handle.
        handle: u64,
        /// Which of the rule's anonymous sets.
        nth: u32,
        /// Model indices (in the anonymous set's elements) of the elements that count.
        elements: Vec<usize>,
    },
}

/// The elements of a named set that count, each with its counter slot: the `elem` that its
/// packets carry to the counter plugin, under which the plugin keeps its counts. A compile
/// gives an element the slot index + 1; element commands keep every slot where it is
/// ([`crate::Engine::set_update`]): an element deleted from the middle takes its slot, and its
/// counts, with it, the elements after it move down in the model and keep theirs, and an added
/// element gets a slot never given before in this program, so that no element ever shows
/// another's counts. (The kernel keeps a counter in each element's own extension area.)
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CountedElems {
    /// (index in the model's `SetDecl::elements`, slot) of each element that counts, in model
    /// order.
    pub elements: Vec<(usize, u32)>,
    /// The slot the next added element gets: above every slot given so far.
    pub next_slot: u32,
}

impl CountedElems {
    /// As a compile numbers them: the counted elements `indices` (ascending) of a set of `len`
    /// elements, slot = index + 1.
    pub fn numbered(indices: &[usize], len: usize) -> CountedElems {
        CountedElems {
            elements: indices.iter().map(|&i| (i, i as u32 + 1)).collect(),
            next_slot: len as u32 + 1,
        }
    }

    /// An element that counts was added at model index `at` with `slot` (an add appends:
    /// `at` is past every other).
    pub fn add(&mut self, at: usize, slot: u32) {
        if let Err(i) = self.elements.binary_search_by_key(&at, |e| e.0) {
            self.elements.insert(i, (at, slot));
        }
        self.next_slot = self.next_slot.max(slot.saturating_add(1));
    }

    /// The element at model index `at` was deleted: its slot goes with it, the elements after
    /// it move down one place and keep theirs.
    pub fn remove(&mut self, at: usize) {
        let from = match self.elements.binary_search_by_key(&at, |e| e.0) {
            Ok(i) => {
                self.elements.remove(i);
                i
            }
            Err(i) => i,
        };
        for e in &mut self.elements[from..] {
            e.0 -= 1;
        }
    }

    /// The slot of the element at model index `at`, if it counts.
    pub fn slot(&self, at: usize) -> Option<u32> {
        self.elements
            .binary_search_by_key(&at, |e| e.0)
            .ok()
            .map(|i| self.elements[i].1)
    }
}

/// Where the counts of counter use sites are read and reset: the counter plugin's `list-state`
/// and `reset-state`, through the embedder's plugin runtime (or a test's fake).
pub trait CounterSource {
    /// The counts of use site `site`: `(elem, packets, bytes)` per entry, `elem` 0 for the
    /// site itself and the element's counter slot ([`CountedElems`]) for a set element's; entries the plugin does not list
    /// count as zero.
    fn counts(&mut self, site: u32) -> Vec<(u32, u64, u64)>;

    /// Zero the counts of use site `site`, its elements' too (`reset counters`: a set
    /// element's expiry is the engine's and does not change).
    fn reset(&mut self, site: u32);
}

/// `data` with `edits` applied in order, each to the frame the edits before it made (an edit
/// that does not fit what the frame has become is skipped: the plugin host refuses
/// out-of-range edits before they get here).
///
/// This is how the engine edits a packet during its walk (a statement's edits are applied
/// before the next operation runs, and every later operation sees the result), so the edits
/// [`crate::HookResult::edits`] lists for one packet, applied in order to the frame as received,
/// give the frame as the walk left it.
pub fn apply_edits<'e>(data: &[u8], edits: impl IntoIterator<Item = &'e ExtEdit>) -> Vec<u8> {
    let mut f = data.to_vec();
    for e in edits {
        apply_edit(&mut f, e);
    }
    f
}

/// Apply one edit to `f` in place (skipped when it does not fit, as in [`apply_edits`]).
pub(crate) fn apply_edit(f: &mut Vec<u8>, e: &ExtEdit) {
    match e {
        ExtEdit::Set { offset, data } => {
            let o = *offset as usize;
            if let Some(dst) = f.get_mut(o..o.saturating_add(data.len())) {
                dst.copy_from_slice(data);
            }
        }
        ExtEdit::Insert { offset, data } => {
            let o = *offset as usize;
            if o <= f.len() {
                f.splice(o..o, data.iter().copied());
            }
        }
        ExtEdit::Remove { offset, count } => {
            let (o, n) = (*offset as usize, *count as usize);
            if o.checked_add(n).is_some_and(|end| end <= f.len()) {
                f.drain(o..o + n);
            }
        }
    }
}

/// The frames of a call as plugin statements edited them: for each of `frames` (in call
/// order), `Some(edited copy)` when [`crate::HookResult::edits`] holds edits for it, else `None`.
/// `edits` is `(packet index, edit)` in the order they were made; each packet's edits are
/// applied in that order ([`apply_edits`]), which gives the frame the engine's walk ended
/// with.
pub fn edited_frames<'f>(
    frames: impl IntoIterator<Item = &'f [u8]>,
    edits: &[(usize, ExtEdit)],
) -> Vec<Option<Vec<u8>>> {
    frames
        .into_iter()
        .enumerate()
        .map(|(i, f)| {
            let mut mine = edits
                .iter()
                .filter(|(p, _)| *p == i)
                .map(|(_, e)| e)
                .peekable();
            mine.peek().is_some().then(|| apply_edits(f, mine))
        })
        .collect()
}

/// Where a `dup` statement ran on a packet, among the edits of the call ([`crate::HookResult::dups`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DupPoint {
    /// Index of the packet in the call's input (as in [`crate::HookResult::edits`]).
    pub packet: usize,
    /// The statement's output target.
    pub target: OutId,
    /// How many entries of [`crate::HookResult::edits`] (all packets') had been made when the
    /// statement ran: the packet's edits among them are the ones its copy carries.
    pub edits: usize,
}

/// A `dup` statement's copy of a packet that the walk edited after the statement ran: the
/// frame as received with only the edits made before it (see [`DupCopies`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DupCopy {
    /// Index of the packet in the call's input.
    pub packet: usize,
    /// The `dup`'s output target.
    pub target: OutId,
    /// The frame the copy is, Ethernet header first.
    pub frame: Vec<u8>,
}

/// The copies that `dup` statements took of packets a later plugin statement edited, made
/// from one ingress call's frames, [`crate::HookResult::edits`] and [`crate::HookResult::dups`]
/// (taken before anything else runs the engine again). The kernel's nft_dup_netdev_eval
/// clones the skb when the statement runs, so its copy has the packet's edits made before
/// it and none after; a `dup` that no later edit followed sends the frame the walk ended
/// with, which needs no copy here. One copy per packet and target, from the first `dup` to
/// that target ([`crate::Outcome::dup`] has one bit per target).
///
/// Empty, with nothing allocated, when the call made no edit or ran no `dup`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DupCopies {
    /// Ordered by packet, then as the statements ran.
    copies: Vec<DupCopy>,
}

impl DupCopies {
    /// The copies of the call whose input frames are `frames` (in call order), with the
    /// engine's `edits` and `dups` of that call.
    pub fn new<'f>(
        frames: impl IntoIterator<Item = &'f [u8]>,
        edits: &[(usize, ExtEdit)],
        dups: &[DupPoint],
    ) -> Self {
        let mut copies = Vec::new();
        if edits.is_empty() || dups.is_empty() {
            return DupCopies { copies };
        }
        let frames: Vec<&[u8]> = frames.into_iter().collect();
        // Per packet: 1 + the position of its last edit (0: none), and the targets copied.
        let mut last = vec![0usize; frames.len()];
        for (n, (p, _)) in edits.iter().enumerate() {
            if let Some(l) = last.get_mut(*p) {
                *l = n + 1;
            }
        }
        let mut seen = vec![0u64; frames.len()];
        for d in dups {
            let (Some(f), Some(s)) = (frames.get(d.packet), seen.get_mut(d.packet)) else {
                continue;
            };
            let bit = 1u64 << (d.target.0 % 64);
            if *s & bit != 0 {
                continue;
            }
            *s |= bit;
            if last[d.packet] <= d.edits {
                // No edit after it: the copy is the frame the walk ended with.
                continue;
            }
            let mine = edits[..d.edits.min(edits.len())]
                .iter()
                .filter(|(p, _)| *p == d.packet)
                .map(|(_, e)| e);
            copies.push(DupCopy {
                packet: d.packet,
                target: d.target,
                frame: apply_edits(f, mine),
            });
        }
        copies.sort_by_key(|c| c.packet);
        DupCopies { copies }
    }

    /// `true` when there is no copy.
    pub fn is_empty(&self) -> bool {
        self.copies.is_empty()
    }

    /// The copies of packet `packet` (index in the call's input); empty for a packet whose
    /// `dup`s send the frame its walk ended with.
    pub fn of(&self, packet: usize) -> &[DupCopy] {
        if self.copies.is_empty() {
            return &[];
        }
        let lo = self.copies.partition_point(|c| c.packet < packet);
        let hi = self.copies.partition_point(|c| c.packet <= packet);
        &self.copies[lo..hi]
    }
}

/// The packets of one vector that plugin statements edited, as the rest of the walk sees them:
/// per edited packet an engine-owned copy of its frame with the edits applied and the
/// metadata [`wasp_wire::parse`] gives for it.
///
/// The kernel's statements that rewrite a packet (`payload set`, nft_payload_set_eval) write
/// into the skb, so every later expression and statement of the packet's walk, in this and
/// the hook's later base chains, reads the new bytes; plugin edits do the same here. A packet
/// that no statement edited has no copy and is read from the caller's frame (bit `i` of
/// [`Edited::mask`] says which). Unlike the kernel, which computes its packet info (network
/// and transport offsets, `meta l4proto`) once at the hook, the copy is parsed again after
/// every statement that edits it, so that an encapsulation or decapsulation shows the new
/// headers to what follows.
///
/// Buffers are reused from vector to vector: nothing is allocated once they have grown to
/// their working size.
#[derive(Debug, Default)]
pub(crate) struct Edited {
    /// Packets of the vector that have a copy (bit `i` is packet `i`).
    pub mask: u64,
    /// The hook is egress (`meta len` is the whole frame there).
    egress: bool,
    /// Per packet: the edited frame (valid where `mask` has the bit).
    bufs: Vec<Vec<u8>>,
    /// Per packet: the edited frame's metadata.
    metas: Vec<PacketMeta>,
}

impl Edited {
    /// Start a vector on the ingress (`egress` false) or egress hook: no packet edited.
    #[inline]
    pub fn reset(&mut self, egress: bool) {
        self.mask = 0;
        self.egress = egress;
    }

    /// `true` when packet `i` has a copy.
    #[inline(always)]
    pub fn has(&self, i: usize) -> bool {
        self.mask >> i & 1 != 0
    }

    /// Packet `i` (with a copy) as the walk sees it: the copy and its metadata, the device and
    /// entry mark of `orig`.
    #[inline]
    pub fn packet<'s>(&'s self, i: usize, orig: &Packet<'s>) -> Packet<'s> {
        Packet {
            frame: &self.bufs[i],
            meta: self.metas[i],
            iifname: orig.iifname,
            mark: orig.mark,
            oifname: "",
            ct: crate::CtMeta::NONE,
            ct_detail: None,
            nftrace: false,
            route: None,
        }
    }

    /// Apply `edits` (`(first + i, edit)` for packet `i` of `pkts`, in the order made) to
    /// the packets' copies, making a copy of the frame as received for a packet edited the
    /// first time; parse each edited copy again and update what the packet's state derives
    /// from its headers (`meta len`, `meta nfproto`). Returns the mask of the packets edited.
    pub fn apply(
        &mut self,
        first: usize,
        edits: &[(usize, ExtEdit)],
        pkts: &[Packet<'_>],
        st: &mut [PktState],
    ) -> u64 {
        let mut touched = 0u64;
        for (at, e) in edits {
            let Some(i) = at
                .checked_sub(first)
                .filter(|&i| i < pkts.len().min(MAX_VECTOR))
            else {
                continue;
            };
            if self.bufs.len() <= i {
                self.bufs.resize_with(i + 1, Vec::new);
                self.metas.resize(i + 1, PacketMeta::default());
            }
            if !self.has(i) {
                let b = &mut self.bufs[i];
                b.clear();
                b.extend_from_slice(pkts[i].frame);
                self.mask |= 1 << i;
            }
            apply_edit(&mut self.bufs[i], e);
            touched |= 1 << i;
        }
        let mut m = touched;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            let meta = wasp_wire::parse(&self.bufs[i]);
            st[i].skb_len = if self.egress {
                meta.len
            } else {
                skb_len_ingress(&meta)
            };
            st[i].nfproto = nfproto(meta.protocol);
            self.metas[i] = meta;
        }
        touched
    }

    /// `(ip, l4)`: the masks of the packets whose `meta protocol` is IPv4 or IPv6 and of those
    /// with transport header info, given those masks for the frames as received, with the
    /// edited packets' bits taken from their copies.
    pub fn gate(&self, ip: u64, l4: u64) -> (u64, u64) {
        if self.mask == 0 {
            return (ip, l4);
        }
        let (mut ip, mut l4) = (ip & !self.mask, l4 & !self.mask);
        let mut m = self.mask;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            let meta = &self.metas[i];
            if matches!(meta.protocol, 0x0800 | 0x86dd) {
                ip |= 1 << i;
            }
            if meta.l4.is_some() {
                l4 |= 1 << i;
            }
        }
        (ip, l4)
    }
}

#[cfg(test)]
mod edit_tests {
    use super::*;

    #[test]
    fn edits_apply_in_order_per_packet() {
        let edits = vec![
            (
                1,
                ExtEdit::Set {
                    offset: 0,
                    data: vec![9],
                },
            ),
            (
                1,
                ExtEdit::Insert {
                    offset: 1,
                    data: vec![7, 7],
                },
            ),
            (
                1,
                ExtEdit::Remove {
                    offset: 4,
                    count: 1,
                },
            ),
            // Out of range: skipped.
            (
                1,
                ExtEdit::Set {
                    offset: 10,
                    data: vec![1],
                },
            ),
        ];
        let frames: [&[u8]; 2] = [&[1, 2, 3], &[1, 2, 3]];
        assert_eq!(
            edited_frames(frames, &edits),
            vec![None, Some(vec![9, 7, 7, 2])]
        );
    }
}
