//! Names for the indices the engine reports: tables and chains by index (as in
//! [`wasp_core::Decision`]), the netdev ingress base chains of a device in hook order, and the
//! text of each rule as `nft list ruleset` prints it (for traces).

use std::collections::HashMap;

use wasp_ruleset::Ruleset;
use wasp_ruleset::model::{Family, Hook};

/// A base chain attached to a device's netdev ingress hook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseChainRef {
    /// Table index in the ruleset.
    pub table: u32,
    /// Chain index in its table.
    pub chain: u32,
    /// Hook priority.
    pub priority: i32,
}

/// What the replay needs to know about a ruleset's names.
#[derive(Debug, Clone, Default)]
pub struct Names {
    tables: Vec<TableNames>,
    rule_text: HashMap<(u32, u32, u64), String>,
    /// Plugin use sites by id: the use as written (`geneve opt class 0x0102`).
    sites: Vec<String>,
}

#[derive(Debug, Clone)]
struct TableNames {
    family: Family,
    name: String,
    chains: Vec<ChainNames>,
}

#[derive(Debug, Clone)]
struct ChainNames {
    name: String,
    /// `Some((hook, devices, priority))` for a base chain.
    base: Option<(Hook, Vec<String>, i32)>,
}

impl Names {
    /// Collect the names of `ruleset`'s tables and chains.
    pub fn new(ruleset: &Ruleset) -> Self {
        let tables = ruleset
            .tables
            .iter()
            .map(|t| TableNames {
                family: t.family,
                name: t.name.clone(),
                chains: t
                    .chains
                    .iter()
                    .map(|c| ChainNames {
                        name: c.name.clone(),
                        base: c
                            .base
                            .as_ref()
                            .map(|b| (b.hook, b.devices.clone(), b.priority)),
                    })
                    .collect(),
            })
            .collect();
        Names {
            tables,
            rule_text: HashMap::new(),
            sites: Vec::new(),
        }
    }

    /// Also learn each rule's text from `printed`, the output of
    /// `wasp_ruleset::print_ruleset(ruleset, true)` (with handles), so that traces can show
    /// rules as `nft monitor trace` does. Lines that do not look like rules are ignored.
    pub fn learn_rule_texts(&mut self, printed: &str) {
        /// What an open `{` belongs to.
        enum Open {
            Table(Option<u32>),
            Chain(Option<u32>, Option<u32>),
            Other,
        }
        let mut stack: Vec<Open> = Vec::new();
        for line in printed.lines() {
            let t = line.trim();
            let (body, handle) = match t.rsplit_once(" # handle ") {
                Some((b, h)) => (b.trim(), h.trim().parse::<u64>().ok()),
                None => (t, None),
            };
            if body == "}" {
                stack.pop();
                continue;
            }
            let table = stack.iter().rev().find_map(|o| match o {
                Open::Table(t) | Open::Chain(t, _) => Some(*t),
                Open::Other => None,
            });
            if let Some(head) = body.strip_suffix('{') {
                let mut words = head.split_whitespace();
                let open = match (words.next(), words.next(), words.next()) {
                    (Some("table"), Some(fam), Some(name)) => Open::Table(
                        self.tables
                            .iter()
                            .position(|tb| {
                                tb.family.name() == fam && tb.name == name.trim_matches('"')
                            })
                            .map(|i| i as u32),
                    ),
                    (Some("chain"), Some(name), _) => {
                        let t = table.flatten();
                        let c = t.and_then(|t| {
                            self.tables[t as usize]
                                .chains
                                .iter()
                                .position(|c| c.name == name.trim_matches('"'))
                                .map(|i| i as u32)
                        });
                        Open::Chain(t, c)
                    }
                    _ => Open::Other,
                };
                stack.push(open);
                continue;
            }
            if let (Some(Open::Chain(Some(ti), Some(ci))), Some(h)) = (stack.last(), handle) {
                self.rule_text.insert((*ti, *ci, h), body.to_string());
            }
        }
    }

    /// Learn the plugin use sites of `engine` (for trace lines).
    pub fn learn_sites(&mut self, engine: &wasp_core::Engine) {
        self.sites = engine
            .ext_sites()
            .iter()
            .map(|s| {
                let mut t = s.plugin.clone();
                for a in &s.args {
                    t.push(' ');
                    t.push_str(a);
                }
                t
            })
            .collect();
    }

    /// Plugin use site `site` as written (`plugin site N` when unknown).
    pub fn site_text(&self, site: u32) -> String {
        self.sites
            .get(site as usize)
            .cloned()
            .unwrap_or_else(|| format!("plugin site {site}"))
    }

    /// The rule's text without its handle, or `handle N` when it is not known.
    pub fn rule_text(&self, table: u32, chain: u32, handle: u64) -> String {
        self.rule_text
            .get(&(table, chain, handle))
            .cloned()
            .unwrap_or_else(|| format!("handle {handle}"))
    }

    /// Table name, or `?` for an index the ruleset does not have.
    pub fn table(&self, table: u32) -> &str {
        self.tables
            .get(table as usize)
            .map_or("?", |t| t.name.as_str())
    }

    /// Table family name (`netdev`, ...), or `?`.
    pub fn family(&self, table: u32) -> &'static str {
        self.tables
            .get(table as usize)
            .map_or("?", |t| t.family.name())
    }

    /// Chain name, or `?`.
    pub fn chain(&self, table: u32, chain: u32) -> &str {
        self.tables
            .get(table as usize)
            .and_then(|t| t.chains.get(chain as usize))
            .map_or("?", |c| c.name.as_str())
    }

    /// Whether the chain is a base chain.
    pub fn is_base(&self, table: u32, chain: u32) -> bool {
        self.tables
            .get(table as usize)
            .and_then(|t| t.chains.get(chain as usize))
            .is_some_and(|c| c.base.is_some())
    }

    /// The device of the first netdev ingress base chain in declaration order (the default
    /// input device of a replay), or `None` when there is none.
    pub fn first_ingress_device(&self) -> Option<&str> {
        self.tables
            .iter()
            .filter(|t| t.family == Family::Netdev)
            .flat_map(|t| t.chains.iter())
            .filter_map(|c| c.base.as_ref())
            .filter(|(hook, _, _)| *hook == Hook::Ingress)
            .find_map(|(_, devs, _)| devs.first().map(String::as_str))
    }

    /// Every device a netdev ingress base chain is attached to, sorted, each once.
    pub fn ingress_devices(&self) -> Vec<&str> {
        let mut out: Vec<&str> = self
            .tables
            .iter()
            .filter(|t| t.family == Family::Netdev)
            .flat_map(|t| t.chains.iter())
            .filter_map(|c| c.base.as_ref())
            .filter(|(hook, _, _)| *hook == Hook::Ingress)
            .flat_map(|(_, devs, _)| devs.iter().map(String::as_str))
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The netdev ingress base chains attached to `dev`, in the order the hook runs them: by
    /// priority, then in declaration order (the kernel's `nf_register_net_hook` puts a new hook
    /// after those of equal priority).
    pub fn ingress_chains(&self, dev: &str) -> Vec<BaseChainRef> {
        let mut out = Vec::new();
        for (ti, t) in self.tables.iter().enumerate() {
            if t.family != Family::Netdev {
                continue;
            }
            for (ci, c) in t.chains.iter().enumerate() {
                if let Some((Hook::Ingress, devs, prio)) = &c.base
                    && devs.iter().any(|d| d == dev)
                {
                    out.push(BaseChainRef {
                        table: ti as u32,
                        chain: ci as u32,
                        priority: *prio,
                    });
                }
            }
        }
        out.sort_by_key(|b| b.priority);
        out
    }

    /// The base chains of ip, ip6 and inet tables on IP hook `hook` (prerouting, input,
    /// forward, postrouting), in the order the hook runs them: by priority, then in declaration
    /// order.
    pub fn ip_hook_chains(&self, hook: Hook) -> Vec<BaseChainRef> {
        let mut out = Vec::new();
        for (ti, t) in self.tables.iter().enumerate() {
            if !matches!(t.family, Family::Ip | Family::Ip6 | Family::Inet) {
                continue;
            }
            for (ci, c) in t.chains.iter().enumerate() {
                if let Some((h, _, prio)) = &c.base
                    && *h == hook
                {
                    out.push(BaseChainRef {
                        table: ti as u32,
                        chain: ci as u32,
                        priority: *prio,
                    });
                }
            }
        }
        out.sort_by_key(|b| b.priority);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasp_ruleset::model::{BaseChain, Chain, ChainType, Policy, Span, Table};

    fn chain(name: &str, base: Option<(&str, i32)>) -> Chain {
        Chain {
            name: name.to_string(),
            handle: 1,
            base: base.map(|(dev, priority)| BaseChain {
                chain_type: ChainType::Filter,
                hook: Hook::Ingress,
                devices: vec![dev.to_string()],
                priority,
                policy: Policy::Accept,
            }),
            rules: Vec::new(),
            comment: None,
            span: Span::default(),
        }
    }

    fn ruleset() -> Ruleset {
        let t = |name: &str, chains| Table {
            next_handle: 0,
            family: Family::Netdev,
            name: name.to_string(),
            handle: 1,
            chains,
            sets: Vec::new(),
            plugins: Vec::new(),
            counters: Vec::new(),
            quotas: Vec::new(),
            limits: Vec::new(),
            ct_objects: Vec::new(),
            flowtables: Vec::new(),
            comment: None,
            span: Span::default(),
        };
        Ruleset {
            table_handle: 0,
            tables: vec![
                t(
                    "a",
                    vec![
                        chain("zone", None),
                        chain("late", Some(("lan0", 10))),
                        chain("other", Some(("wan0", -5))),
                    ],
                ),
                t("b", vec![chain("early", Some(("lan0", -10)))]),
            ],
            sources: Vec::new(),
        }
    }

    #[test]
    fn default_device_and_hook_order() {
        let n = Names::new(&ruleset());
        assert_eq!(n.first_ingress_device(), Some("lan0"));
        let chains = n.ingress_chains("lan0");
        let names: Vec<_> = chains.iter().map(|b| n.chain(b.table, b.chain)).collect();
        assert_eq!(names, ["early", "late"]);
        assert!(n.ingress_chains("eth9").is_empty());
        assert!(!n.is_base(0, 0));
        assert!(n.is_base(0, 1));
    }

    #[test]
    fn rule_texts_from_printed_ruleset() {
        let mut n = Names::new(&ruleset());
        n.learn_rule_texts(
            "table netdev a { # handle 1\n\tset s { # handle 9\n\t\ttype ipv4_addr\n\t\telements = { 10.0.0.1, 10.0.0.2 }\n\t}\n\n\tchain zone { # handle 1\n\t\tip saddr 10.0.0.0/8 drop # handle 4\n\t}\n\n\tchain late { # handle 2\n\t\ttype filter hook ingress device \"lan0\" priority 10; policy accept;\n\t\tcounter packets 0 bytes 0 # handle 5\n\t}\n}\ntable netdev b { # handle 2\n\tchain early {\n\t\tudp dport 53 accept # handle 4\n\t}\n}\n",
        );
        assert_eq!(n.rule_text(0, 0, 4), "ip saddr 10.0.0.0/8 drop");
        assert_eq!(n.rule_text(0, 1, 5), "counter packets 0 bytes 0");
        assert_eq!(n.rule_text(1, 0, 4), "udp dport 53 accept");
        assert_eq!(n.rule_text(1, 0, 9), "handle 9");
    }
}
