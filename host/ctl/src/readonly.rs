//! Answers to the requests that only read the ruleset model (`list`, `get element`, `dump
//! rules`), for a daemon's [`Handler`](crate::Handler) to call with its current snapshot
//! (counters holding the live counts).

use serde_json::Value as Json;
use wasp_ruleset::Ruleset;

use crate::proto::{ElementOp, Request};
use crate::server::{ReplySink, ReplySinkExt};

/// Answer `req` from `ruleset` when it only reads: `Some(result)` for `list`, `element get`
/// and `dump`; `None` for the requests that change or need the daemon (`apply`, `element
/// add|delete`, `reset`, `plugin`, `monitor`, `stats`).
pub fn answer(
    ruleset: &Ruleset,
    req: &Request,
    out: &mut dyn ReplySink,
) -> Option<Result<Json, String>> {
    let gone = |e: std::io::Error| format!("client gone: {e}");
    Some(match req {
        Request::List(l) => crate::listing::list(ruleset, l, out),
        Request::Element(e) if e.op == ElementOp::Get => crate::element::get_text(ruleset, e)
            .and_then(|t| out.text(&t).map_err(gone))
            .map(|()| Json::Null),
        Request::Dump { mode, encoding } => {
            crate::dump::dump_ruleset(ruleset, *mode, *encoding, out)
                .map(|n| serde_json::json!({ "rules": n }))
                .map_err(gone)
        }
        _ => return None,
    })
}
