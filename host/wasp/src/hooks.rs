//! Which base chains `wasp replay` runs: packets enter at the ingress hook only (the hook a
//! NIC's received frames meet first: netdev and inet ingress chains), so base chains at other
//! hooks (inet/ip/ip6 prerouting, input, forward, output, postrouting, netdev egress, ...) never
//! see a packet.
//! This module names them, so the user is told rather than left to wonder.

use wasp_ruleset::Ruleset;
use wasp_ruleset::model::{Family, Hook, Stmt};

/// The base chains of `ruleset` that `wasp replay` does not run, as `FAMILY TABLE CHAIN
/// (hook HOOK)`, in declaration order.
pub fn chains_not_run(ruleset: &Ruleset) -> Vec<String> {
    chains_not_run_when(ruleset, false, false)
}

/// `true` when `ruleset` has `fwd` or `dup` statements (a replay then forwards, and netdev
/// egress chains run on the frames sent).
pub fn forwards(ruleset: &Ruleset) -> bool {
    ruleset
        .tables
        .iter()
        .flat_map(|t| &t.chains)
        .flat_map(|c| &c.rules)
        .flat_map(|r| &r.stmts)
        .any(|s| matches!(s, Stmt::Fwd { .. } | Stmt::Dup { .. }))
}

/// [`chains_not_run`]; with `forwarding` (a gateway file, or `fwd`/`dup` statements), netdev
/// egress chains run on the frames sent and are not listed; with `gateway` (a gateway file),
/// the ip, ip6 and inet chains of the prerouting, input, forward and postrouting hooks run on
/// the packets the gateway routes (the IP path) and are not listed either.
pub fn chains_not_run_when(ruleset: &Ruleset, forwarding: bool, gateway: bool) -> Vec<String> {
    let mut out = Vec::new();
    for t in &ruleset.tables {
        for c in &t.chains {
            let Some(base) = &c.base else { continue };
            // The engine runs ingress base chains of the netdev and inet families.
            if base.hook == Hook::Ingress && matches!(t.family, Family::Netdev | Family::Inet) {
                continue;
            }
            if forwarding && base.hook == Hook::Egress && t.family == Family::Netdev {
                continue;
            }
            if gateway
                && matches!(t.family, Family::Ip | Family::Ip6 | Family::Inet)
                && matches!(
                    base.hook,
                    Hook::Prerouting | Hook::Input | Hook::Forward | Hook::Postrouting
                )
            {
                continue;
            }
            out.push(format!(
                "{} {} {} (hook {})",
                t.family.name(),
                t.name,
                c.name,
                base.hook.name()
            ));
        }
    }
    out
}

/// The note `wasp replay` prints when `ruleset` has base chains it does not run, or `None`.
pub fn replay_note(ruleset: &Ruleset) -> Option<String> {
    replay_note_when(ruleset, false, false)
}

/// [`replay_note`] for a replay that forwards or not, with a gateway or not (see
/// [`chains_not_run_when`]).
pub fn replay_note_when(ruleset: &Ruleset, forwarding: bool, gateway: bool) -> Option<String> {
    let skipped = chains_not_run_when(ruleset, forwarding, gateway);
    if skipped.is_empty() {
        return None;
    }
    Some(format!(
        "wasp replay runs ingress base chains (netdev and inet families) only; {} not run: {}",
        if skipped.len() == 1 {
            "this base chain is"
        } else {
            "these base chains are"
        },
        skipped.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_every_base_chain_off_netdev_ingress() {
        let r = wasp_ruleset::parse_str(
            "table netdev n {\n\tchain in { type filter hook ingress device \"lan0\" priority 0; }\n\tchain out { type filter hook egress device \"lan0\" priority 0; }\n\tchain sub {\n\t}\n}\ntable inet f {\n\tchain input { type filter hook input priority 0; }\n\tchain ing { type filter hook ingress device \"lan0\" priority 0; }\n}\n",
            "h.nft",
        )
        .unwrap();
        assert_eq!(
            chains_not_run(&r),
            ["netdev n out (hook egress)", "inet f input (hook input)"]
        );
        assert_eq!(
            replay_note(&r).unwrap(),
            "wasp replay runs ingress base chains (netdev and inet families) only; these base chains are not run: netdev n out (hook egress), inet f input (hook input)"
        );
        let only_ingress = wasp_ruleset::parse_str(
            "table netdev n {\n\tchain in { type filter hook ingress device \"lan0\" priority 0; }\n}\n",
            "h.nft",
        )
        .unwrap();
        assert_eq!(replay_note(&only_ingress), None);
        // Forwarding: the egress chain runs on the frames sent.
        assert!(!forwards(&r));
        assert_eq!(
            chains_not_run_when(&r, true, false),
            ["inet f input (hook input)"]
        );
        // With a gateway the IP hooks' chains run on the packets it routes.
        assert!(chains_not_run_when(&r, true, true).is_empty());
    }
}
