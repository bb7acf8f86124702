//! The control socket of `wasp run`: a Unix socket speaking a documented request/response
//! protocol, the server loop that answers it, and the client that `wasp ctl` uses.
#![forbid(unsafe_code)]
