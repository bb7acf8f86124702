//! The compiled form of a ruleset: flat chains of rules of small operations, chain references
//! resolved to indices, sets built into their back-ends.

use wasp_ruleset::model::{Family, Hook, ObjKind, Policy, Span};

use crate::calc::Calc;
use crate::compare::Test;
use crate::expr::{Cmp, Load};
use crate::ext::{CounterUse, ExtSite};
use crate::stateful::Stateful;

// The compiled types that live beside what builds them, under their compiled names.
pub(crate) use crate::dynset::SetUpdate;
pub(crate) use crate::setstore::{Elem, Set};
pub(crate) use crate::trace::Log;

/// Index of a chain in [`Program::chains`] (which it indexes directly).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub(crate) struct ChainId(pub u32);

impl ChainId {
    /// The index as a `usize`.
    pub fn idx(self) -> usize {
        self.0 as usize
    }
}

impl std::ops::Index<ChainId> for Vec<Chain> {
    type Output = Chain;

    fn index(&self, c: ChainId) -> &Chain {
        &self[c.idx()]
    }
}

impl std::ops::IndexMut<ChainId> for Vec<Chain> {
    fn index_mut(&mut self, c: ChainId) -> &mut Chain {
        &mut self[c.idx()]
    }
}

/// Index of a set in [`Program::sets`] (named and anonymous; it indexes them directly).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub(crate) struct SetId(pub u32);

impl SetId {
    /// The index as a `usize`.
    pub fn idx(self) -> usize {
        self.0 as usize
    }
}

impl std::ops::Index<SetId> for Vec<std::sync::Arc<Set>> {
    type Output = Set;

    fn index(&self, s: SetId) -> &Set {
        &self[s.idx()]
    }
}

impl std::ops::IndexMut<SetId> for Vec<std::sync::Arc<Set>> {
    /// The set, copied first when another program shares it.
    fn index_mut(&mut self, s: SetId) -> &mut Set {
        std::sync::Arc::make_mut(&mut self[s.idx()])
    }
}

/// A verdict with its target chain resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    Accept,
    Drop,
    Continue,
    Return,
    Jump(ChainId),
    Goto(ChainId),
    /// `fwd`: the packet is stolen (NF_STOLEN): the hook ends for it, it leaves on the device
    /// recorded in its state.
    Stolen,
}

/// One operation of a rule. Matches end the rule when they fail (NFT_BREAK); a verdict ends it
/// with that verdict; the others are statements with side effects.
#[derive(Debug, Clone)]
pub(crate) enum Op {
    /// Load a field and compare it (while compiling; a compiled rule holds [`Op::Test`]).
    /// Boxed, as the other wide variants, to keep operations small (the evaluators walk
    /// arrays of them).
    Cmp(Box<(Load, Cmp)>),
    /// A match lowered to its field's width: the runtime form of [`Op::Cmp`].
    Test(Test),
    /// Build a key from the loads and look it up in `sets[set]`; `neg` inverts.
    Lookup {
        keys: Box<[Load]>,
        set: SetId,
        neg: bool,
    },
    /// Look the key up in a verdict map; a miss ends the rule, a hit gives the element's
    /// verdict.
    Vmap { keys: Box<[Load]>, set: SetId },
    /// `log`: index into the log prefixes.
    Log(u32),
    /// A plugin use: index into [`Program::ext_sites`]. A match narrows the packets, a
    /// statement gives each packet a verdict (continue goes on with the rule).
    Ext(u32),
    /// `meta mark set`.
    SetMark(Box<Calc>),
    /// `meta priority set` (skb->priority, which `meta priority` then reads).
    SetPriority(Box<Calc>),
    /// `FIELD set VALUE`: the payload statement ([`crate::payload_set`]).
    PayloadSet(Box<crate::payload_set::PayloadSet>),
    /// `add|update|delete @set { KEY ... }`: the key from `keys`, a map's data from `data`.
    SetUpdate {
        keys: Box<[Load]>,
        data: Option<Box<Load>>,
        stmt: Box<SetUpdate>,
    },
    /// `reset tcp option KIND` ([`crate::payload_set::opt_reset`]).
    OptReset(u8),
    /// `meta mark set KEY map ...`: the mark from the element holding the key; a miss ends
    /// the rule.
    /// With `ct`, `ct mark set KEY map ...` (the connection's mark).
    SetMarkMap {
        keys: Box<[Load]>,
        set: SetId,
        ct: bool,
    },
    /// `meta nftrace set`.
    SetNftrace(Box<Calc>),
    /// `dup to`: index into [`Program::out_targets`].
    Dup(u16),
    /// `ct mark set`.
    CtSetMark(Box<Calc>),
    /// `ct zone|label|event set` (nft_ct_set_eval): the value goes to the connection (the
    /// zone, before conntrack, to the packet).
    CtSet { key: CtSetKey, value: Box<Calc> },
    /// `notrack`: the packet skips conntrack.
    Notrack,
    /// `ct count [over] N`: `site` numbers the statement's connection list.
    CtCount { site: u32, over: bool, count: u32 },
    /// `limit ...` or `limit name NAME`: index into [`Stateful::limits`]; the rule ends unless
    /// the bucket says it goes on.
    Limit(u32),
    /// `quota ...` or `quota name NAME`: index into [`Stateful::quotas`].
    Quota(u32),
    /// `counter|quota|limit name KEY map { ... }`: the element's value is the object (a
    /// counter's use site, a quota's or a limit's index); a miss ends the rule.
    ObjectMap {
        keys: Box<[Load]>,
        set: SetId,
        kind: ObjKind,
    },
    /// A NAT statement: index into [`Program::nats`]; ends the rule with accept.
    Nat(u16),
    /// `flow add @NAME`: index into [`Program::flowtables`].
    FlowAdd(u16),
    /// `fwd to` / `fwd ip to ... device`: index into [`Program::out_targets`]; ends the rule
    /// with [`Verdict::Stolen`].
    Fwd(u16),
    /// `dup to KEY map { ... }` (`fwd` false) or `fwd [ip|ip6] to KEY map { ... }` (`fwd`
    /// true): the element's value is an index into [`Program::out_targets`], used as
    /// [`Op::Dup`] or [`Op::Fwd`] would; a miss ends the rule.
    OutMap {
        keys: Box<[Load]>,
        set: SetId,
        fwd: bool,
    },
    /// `reject ...`: the packet is dropped and the reply recorded in its state (the kernel's
    /// nft_reject_*_eval queue the reply, then set NF_DROP); ends the rule with drop.
    Reject(crate::packet::Reject),
    /// A verdict.
    Verdict(Verdict),
}

/// The connection keys `ct ... set` writes besides the mark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CtSetKey {
    /// `ct [original|reply] zone set` (16 bits).
    Zone,
    /// `ct label set`: the labels' bits are added to the connection's.
    Label,
    /// `ct event set`: the event mask.
    Event,
}

/// A NAT statement's target computed per packet (`dnat to EXPR`).
#[derive(Debug, Clone)]
pub(crate) struct NatCalc {
    /// The value: with `map_data`, an index into [`Program::nat_data`]; otherwise the address
    /// as a number.
    pub calc: Calc,
    /// The value indexes [`Program::nat_data`].
    pub map_data: bool,
    /// IPv6 addresses.
    pub v6: bool,
}

/// A compiled rule.
#[derive(Debug, Clone)]
pub(crate) struct Rule {
    /// Kernel handle.
    pub handle: u64,
    /// Operations, ending at the first verdict.
    pub ops: Box<[Op]>,
    /// How many leading operations are pure tests ([`Test::is_pure`]) identical to the
    /// previous rule's leading operations (0 for a chain's first rule), at most [`MEMO`]. A
    /// packet that ran those operations in the previous rule has the same answers here, so
    /// the evaluators remember them instead of running them again: the dependency checks that
    /// nft puts in front of every rule (`meta protocol ip`, `meta l4proto tcp`) cost once per
    /// packet for a run of rules that share them.
    pub shared: u8,
    /// How many leading operations are pure tests, at most [`MEMO`]: the answers the
    /// evaluators remember for the next rule.
    pub pure: u8,
}

/// Leading operations of a rule whose answers are remembered for the next rule.
pub(crate) const MEMO: usize = 8;

impl Rule {
    /// A rule of `ops`, to be placed after `prev` in its chain.
    pub fn new(handle: u64, ops: Box<[Op]>, prev: Option<&Rule>) -> Self {
        let pure = ops
            .iter()
            .take(MEMO)
            .take_while(|o| matches!(o, Op::Test(t) if t.is_pure()))
            .count();
        let shared = prev.map_or(0, |p| {
            ops.iter()
                .zip(p.ops.iter())
                .take(pure)
                .take_while(|(a, b)| matches!((a, b), (Op::Test(x), Op::Test(y)) if x == y))
                .count()
        });
        Rule {
            handle,
            ops,
            shared: shared as u8,
            pure: pure as u8,
        }
    }
}

/// Hook attachment of a base chain.
#[derive(Debug, Clone)]
pub(crate) struct Base {
    pub chain_type: wasp_ruleset::model::ChainType,
    pub hook: Hook,
    pub devices: Vec<String>,
    pub priority: i32,
    pub policy: Policy,
}

/// A compiled chain.
#[derive(Debug, Clone)]
pub(crate) struct Chain {
    /// Table index.
    pub table: u32,
    /// Index of the chain in its table.
    pub index: u32,
    /// Name.
    pub name: String,
    /// Rules in order.
    pub rules: Vec<Rule>,
    /// Present for a base chain.
    pub base: Option<Base>,
    /// Family of the table (inet base chains see only IP packets).
    pub family: Family,
    /// Position in a topological order of the jump graph (callers before callees).
    pub rank: u32,
}

impl Chain {
    /// A `type nat` base chain: it runs for a connection's first packets only, until the
    /// connection has its binding (nf_nat_inet_fn).
    pub fn is_nat(&self) -> bool {
        self.base
            .as_ref()
            .is_some_and(|b| b.chain_type == wasp_ruleset::model::ChainType::Nat)
    }
}

impl Program {
    /// The live element of set `set` holding `key` at `now` (ns after the epoch), for every
    /// back-end including the sets that set statements change.
    #[inline]
    pub fn lookup(&self, set: SetId, key: &[u8], now: u64) -> Option<Elem> {
        let s = self.sets.get(set.idx())?;
        match s.store {
            crate::setstore::SetStore::Dynamic(d) => {
                self.stateful.dynsets.get(d as usize)?.lookup(key, now)
            }
            _ => s.lookup(key, now).copied(),
        }
    }
}

/// A whole compiled ruleset.
#[derive(Debug, Clone, Default)]
pub(crate) struct Program {
    /// (name, family) per table.
    pub tables: Vec<(String, Family)>,
    /// All chains of all tables.
    pub chains: Vec<Chain>,
    /// `chain_ids[t][c]`: global id of chain `c` of table `t`.
    pub chain_ids: Vec<Vec<ChainId>>,
    /// Sets (named and anonymous), each shared with the programs an element change made from
    /// this one ([`crate::SetUpdate`]).
    pub sets: Vec<std::sync::Arc<Set>>,
    /// `named_sets[t][s]`: the set of the `s`th named set of table `t` (model order).
    pub named_sets: Vec<Vec<SetId>>,
    /// Log prefixes.
    pub logs: Vec<Log>,
    /// Plugin use sites, dense ids in rule order (tables, chains, rules, statements).
    pub ext_sites: Vec<ExtSite>,
    /// Where each use site is written (parallel to `ext_sites`).
    pub ext_spans: Vec<Span>,
    /// For the counter sites the compiler made (parallel to `ext_sites`), what they count.
    pub counter_uses: Vec<Option<CounterUse>>,
    /// Where `fwd` and `dup` statements send packets, each (device, next hop) once.
    pub out_targets: Vec<crate::packet::OutTarget>,
    /// NAT statements in rule order.
    pub nats: Vec<crate::conn::NatSpec>,
    /// The computed target of each NAT statement (parallel to `nats`; `None` for a constant
    /// target).
    pub nat_calcs: Vec<Option<NatCalc>>,
    /// The data of NAT map elements ([`NatCalc::map_data`] values index it).
    pub nat_data: Vec<crate::conn::NatTarget>,
    /// Flowtables of all tables, in declaration order.
    pub flowtables: Vec<crate::conn::FlowtableSpec>,
    /// `ct count` statements.
    pub ct_counts: u32,
    /// The buckets and quotas of `limit` and `quota` (shared by the workers' engines).
    pub stateful: std::sync::Arc<Stateful>,
    /// A rule reads `meta cpu`, `meta random` or the wall clock (`meta time|day|hour`): the
    /// engine fills those per packet only then.
    pub needs_env: bool,
    /// A rule reads a `ct` key of the connection's detail (tuples, `expiration`, `packets`,
    /// `bytes`, `zone`, `label`, ...: [`crate::Packet::ct_detail`]).
    pub reads_ct_detail: bool,
    /// A rule changes a set from the packet path (`add @s { ... }`) and a rule looks such a
    /// set up: the hooks walk their packets one at a time, so that a packet's lookup sees what
    /// the packets before it added, as in the kernel (a vector would run each rule over all
    /// its packets first). A set statement alone keeps the vector (within one statement the
    /// packets run in their order).
    pub one_by_one: bool,
}
