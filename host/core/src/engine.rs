//! The public face of the data path. (Contract; filled in by the evaluator.)

use wasp_ruleset::{Error, Ruleset};
use wasp_wire::PacketMeta;

/// Largest number of packets in one vector.
pub const MAX_VECTOR: usize = 64;

/// One packet of a vector, as the engine sees it.
#[derive(Debug, Clone, Copy)]
pub struct Packet<'a> {
    /// The frame as received (Ethernet header first), captured length.
    pub frame: &'a [u8],
    /// Metadata from [`wasp_wire::parse`] of `frame`.
    pub meta: PacketMeta,
    /// Input device name (`meta iifname`).
    pub iifname: &'a str,
    /// `meta mark` on entry (0 for a fresh packet).
    pub mark: u32,
}

/// Final verdict of a packet on a hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FinalVerdict {
    /// Delivered.
    Accept,
    /// Dropped.
    Drop,
}

/// Which chain and rule gave a packet its final verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Decision {
    /// Index of the table in the ruleset.
    pub table: u32,
    /// Index of the chain in its table.
    pub chain: u32,
    /// Handle of the rule, or `None` when the chain's policy decided.
    pub rule: Option<u64>,
}

/// The result for one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// Accept or drop.
    pub verdict: FinalVerdict,
    /// The deciding chain and rule; `None` when no base chain saw the packet.
    pub decision: Option<Decision>,
    /// `meta mark` after the walk.
    pub mark: u32,
}

/// One step of a packet's walk, as `nft monitor trace` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TraceEvent {
    /// A rule matched and gave a verdict or ran a statement that the trace reports.
    Rule {
        /// Index of the packet in its vector.
        packet: usize,
        /// Table index.
        table: u32,
        /// Chain index.
        chain: u32,
        /// Rule handle.
        handle: u64,
        /// Verdict text (`accept`, `drop`, `jump x`, `continue`, ...).
        verdict: String,
    },
    /// The end of a chain was reached: `return` to the caller, or the base chain's policy.
    ChainEnd {
        /// Index of the packet in its vector.
        packet: usize,
        /// Table index.
        table: u32,
        /// Chain index.
        chain: u32,
        /// `Some(policy)` for a base chain, `None` for an implicit return.
        policy: Option<FinalVerdict>,
    },
    /// `log` statement output.
    Log {
        /// Index of the packet in its vector.
        packet: usize,
        /// The prefix and the packet summary, as the kernel log line would show them.
        text: String,
    },
}

/// Where trace events go.
pub trait TraceSink {
    /// Record one event.
    fn event(&mut self, ev: TraceEvent);
}

/// A compiled ruleset, ready to classify packets.
#[derive(Debug)]
pub struct Engine {}

impl Engine {
    /// Compile `ruleset`: resolve chain references, type-check, build set structures.
    ///
    /// # Errors
    /// A ruleset that parses but cannot run (unknown jump target, chain loop, ...) gives an
    /// [`Error`] at the offending place.
    pub fn compile(ruleset: &Ruleset) -> Result<Self, Error> {
        let _ = ruleset;
        todo!("implemented by the evaluator")
    }

    /// Run the netdev ingress hook of device `dev` over a vector of up to [`MAX_VECTOR`] packets
    /// at time `now_ns`, writing one outcome per packet into `out` (`out.len() == packets.len()`).
    /// Trace events go to `trace` when given (for every packet, as if `meta nftrace set 1`).
    pub fn ingress(
        &mut self,
        dev: &str,
        packets: &[Packet<'_>],
        now_ns: u64,
        out: &mut [Outcome],
        trace: Option<&mut dyn TraceSink>,
    ) {
        let _ = (dev, packets, now_ns, out, trace);
        todo!("implemented by the evaluator")
    }
}
