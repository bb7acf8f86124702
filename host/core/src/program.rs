//! The compiled form of a ruleset: flat chains of rules of small operations, chain references
//! resolved to indices, sets built into their back-ends.

use wasp_ruleset::model::{Family, Hook, Policy};
use wasp_sets::SetBackend;

use crate::expr::{Cmp, Load};

/// Index of a chain in [`Program::chains`].
pub(crate) type ChainId = u32;

/// A verdict with its target chain resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum VerdictC {
    Accept,
    Drop,
    Continue,
    Return,
    Jump(ChainId),
    Goto(ChainId),
}

/// One operation of a rule. Matches end the rule when they fail (NFT_BREAK); a verdict ends it
/// with that verdict; the others are statements with side effects.
#[derive(Debug, Clone)]
pub(crate) enum Op {
    /// Load a field and compare it.
    Cmp { load: Load, cmp: Cmp },
    /// Build a key from the loads and look it up in `sets[set]`; `neg` inverts.
    Lookup {
        keys: Box<[Load]>,
        set: u32,
        neg: bool,
    },
    /// Look the key up in a verdict map; a miss ends the rule, a hit gives the element's
    /// verdict.
    Vmap { keys: Box<[Load]>, set: u32 },
    /// `counter`: index into the counters.
    Counter(u32),
    /// `log`: index into the log prefixes.
    Log(u32),
    /// `meta mark set`.
    SetMark(Load),
    /// `meta nftrace set`.
    SetNftrace(Load),
    /// A verdict.
    Verdict(VerdictC),
}

/// A compiled rule.
#[derive(Debug, Clone)]
pub(crate) struct RuleC {
    /// Kernel handle.
    pub handle: u64,
    /// Operations, ending at the first verdict.
    pub ops: Box<[Op]>,
}

/// Hook attachment of a base chain.
#[derive(Debug, Clone)]
pub(crate) struct BaseC {
    pub hook: Hook,
    pub devices: Vec<String>,
    pub priority: i32,
    pub policy: Policy,
}

/// A compiled chain.
#[derive(Debug, Clone)]
pub(crate) struct ChainC {
    /// Table index.
    pub table: u32,
    /// Index of the chain in its table.
    pub index: u32,
    /// Name.
    pub name: String,
    /// Rules in order.
    pub rules: Vec<RuleC>,
    /// Present for a base chain.
    pub base: Option<BaseC>,
    /// Family of the table (inet base chains see only IP packets).
    pub family: Family,
    /// Position in a topological order of the jump graph (callers before callees).
    pub rank: u32,
}

/// A set or map in its back-end, with the verdicts of a verdict map.
#[derive(Debug, Clone)]
pub(crate) struct SetC {
    pub backend: SetBackend,
    pub verdicts: Box<[VerdictC]>,
}

/// A whole compiled ruleset.
#[derive(Debug, Clone, Default)]
pub(crate) struct Program {
    /// (name, family) per table.
    pub tables: Vec<(String, Family)>,
    /// All chains of all tables.
    pub chains: Vec<ChainC>,
    /// `chain_ids[t][c]`: global id of chain `c` of table `t`.
    pub chain_ids: Vec<Vec<ChainId>>,
    /// Sets (named and anonymous).
    pub sets: Vec<SetC>,
    /// Log prefixes.
    pub logs: Vec<String>,
    /// Owner (table, chain index, rule handle) and initial counts of every counter.
    pub counters: Vec<CounterC>,
}

/// A counter's owner and its counts at load.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CounterC {
    pub table: u32,
    pub chain: u32,
    pub handle: u64,
    pub packets: u64,
    pub bytes: u64,
}
