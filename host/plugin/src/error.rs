//! Errors of loading, configuring and swapping plugins, and the reasons a call fails.

use std::fmt;
use std::path::PathBuf;

/// Why loading, instantiating, configuring or swapping a plugin failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PluginError {
    /// The engine could not be set up (bad [`crate::HostConfig`]).
    #[error("plugin host: {0}")]
    Engine(String),
    /// The file could not be read.
    #[error("{}: cannot read: {msg}", path.display())]
    Read {
        /// The plugin file.
        path: PathBuf,
        /// The operating system's message.
        msg: String,
    },
    /// The file is not a WebAssembly component that compiles.
    #[error("{}: not a valid WebAssembly component: {msg}", path.display())]
    Compile {
        /// The plugin file.
        path: PathBuf,
        /// wasmtime's message.
        msg: String,
    },
    /// The component does not implement the world `wasp:plugin/wasp-plugin` of a contract
    /// version this host loads ([`crate::contract`]), or imports
    /// something the host does not offer.
    #[error("{}: does not fit wasp:plugin/wasp-plugin@{}: {msg}", path.display(), crate::CONTRACT_VERSION)]
    World {
        /// The plugin file.
        path: PathBuf,
        /// wasmtime's message.
        msg: String,
    },
    /// `describe` trapped or gave nonsense (no kind, a window over 1514 bytes, no name).
    #[error("{}: bad description: {msg}", path.display())]
    Describe {
        /// The plugin file.
        path: PathBuf,
        /// What is wrong.
        msg: String,
    },
    /// An instance could not be created (pool exhausted, start-up trap).
    #[error("plugin {plugin}: cannot instantiate: {msg}")]
    Instantiate {
        /// The plugin's name.
        plugin: String,
        /// wasmtime's message.
        msg: String,
    },
    /// No plugin of this name was added to the runtime.
    #[error("no plugin named {0:?}")]
    UnknownPlugin(String),
    /// No use site with this id is configured.
    #[error("no configured use site {0}")]
    UnknownSite(u32),
    /// The new version refused a use site's arguments during a swap.
    #[error("plugin {plugin}: use site {site} refused by the new version: {msg}")]
    Configure {
        /// The plugin's name.
        plugin: String,
        /// The use site.
        site: u32,
        /// The plugin's message.
        msg: String,
    },
    /// The component is not a usable flowtable offload block ([`crate::PluginBlock::load`]): it
    /// does not export `wasp:plugin/offload-block`, imports what the host does not offer,
    /// or its `configure` refused the arguments or failed.
    #[error("{}: not a usable offload block: {msg}", path.display())]
    Offload {
        /// The plugin file.
        path: PathBuf,
        /// What is wrong.
        msg: String,
    },
    /// A call into the plugin failed (a control call: list, reset, swap's state export).
    #[error("plugin {plugin}: {reason}: {msg}")]
    Call {
        /// The plugin's name.
        plugin: String,
        /// Why.
        reason: FailureReason,
        /// Detail.
        msg: String,
    },
}

/// Why a call into a plugin failed; each is counted per plugin ([`crate::FailureCounts`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FailureReason {
    /// The call ran past its epoch deadline.
    Deadline,
    /// The instance asked for more memory than its limit (and then trapped).
    MemoryLimit,
    /// Any other trap (`unreachable`, out-of-bounds access, a call to an unprovided import).
    Trap,
    /// The call returned, but the result breaks the contract (count, values, edit bounds).
    Malformed,
}

impl fmt::Display for FailureReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FailureReason::Deadline => "deadline",
            FailureReason::MemoryLimit => "memory limit",
            FailureReason::Trap => "trap",
            FailureReason::Malformed => "malformed result",
        })
    }
}
