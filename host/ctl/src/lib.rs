//! The control socket of `wasp run`: a Unix socket speaking a documented request/response
//! protocol (`PROTOCOL.md`, [`proto`]), the server loop that answers it through the daemon's
//! [`Handler`] ([`server`]), the client that `wasp ctl` uses ([`client`]), the listings the
//! daemon renders from its ruleset model ([`listing`]), the rule dump encodings ([`dump`]),
//! `get element` ([`element`]) and the answers a daemon can give from its model alone
//! ([`readonly`]).
#![forbid(unsafe_code)]

pub mod changes;
pub mod client;
pub mod dump;
pub mod element;
pub mod listing;
pub mod proto;
pub mod readonly;
pub mod server;

pub use client::{Client, ClientError};
pub use proto::{Reply, Request};
pub use server::{Handler, ReplySink, ReplySinkExt, Server, ServerConfig, ServerError};
