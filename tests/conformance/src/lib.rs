//! Kernel conformance harness: the same ruleset and the same frames through the kernel's
//! nftables (netdev ingress on a veth pair in a network namespace of the harness's own) and
//! through `wasp replay --verdicts`, compared packet by packet.
//!
//! Kernel side: [`kernel::Kernel`] loads the ruleset with `nft -f`, adds a tracing table
//! ([`kernel::HARNESS_TABLE`]) whose head chain sets nftrace, sends each frame from the peer
//! end through an AF_PACKET socket and folds the `nft -a monitor` trace lines into the
//! packet's [`verdict::Decision`] before sending the next frame (see DESIGN.md section 8).

pub mod capture;
pub mod cmd;
pub mod concat_range;
pub mod error;
pub mod generate;
pub mod kernel;
pub mod netns;
pub mod nft_suite;
pub mod run;
pub mod socket;
pub mod summary;
pub mod trace;
pub mod verdict;

pub use error::{Error, Result};
