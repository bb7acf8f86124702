//! The units of nftables' rule-level test files (`tests/py/*/*.t`), and the command file that
//! loads one unit.
//!
//! A file declares chains (`:NAME;SPEC`), tables with the chains their rules are tried in
//! (`*FAMILY;TABLE;CHAIN,...`), sets and maps (`!NAME type ...;ok`), elements (`?NAME E, ...;ok`),
//! stateful objects (`%NAME type KIND ...;ok`) and rules (`RULE;ok[;LISTING]` or `RULE;fail`).
//! A **unit** is one rule line in one (table, chain) pair. Its command file is what nftables'
//! own runner (`tests/py/nft-test.py`) sends for it: `add table`, `add chain` with the chain's
//! spec, the sets, objects and elements declared before the rule line (only those marked
//! `;ok`), then `add rule`. Lines starting with `-` (known broken upstream) and `#` are skipped,
//! as the runner skips them.

use std::path::Path;

/// What a test file says a rule line must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expect {
    /// `;ok`: accepted; listed back as the rule itself, or as the given text (`;ok;LISTING`).
    Ok(Option<String>),
    /// `;fail`: refused.
    Fail,
}

/// One rule line tried in one (table, chain) pair.
#[derive(Debug, Clone)]
pub struct Unit {
    /// The test file, relative to the `py/` folder (`ip/ip.t`).
    pub file: String,
    /// Line of the rule in the file, from 1.
    pub line: usize,
    /// Table family (`ip`, `ip6`, `inet`, `netdev`, `bridge`, `arp`).
    pub family: String,
    /// Table name (`test-ip4`).
    pub table: String,
    /// Chain name (`input`).
    pub chain: String,
    /// The rule as written.
    pub rule: String,
    /// What the file expects.
    pub expect: Expect,
    /// The command file: `add table`, `add chain`, the declarations, `add rule`, one a line.
    pub commands: String,
}

impl Unit {
    /// `ip/ip.t:42 ip test-ip4 input`: names the unit in reports and in the known-differences
    /// file.
    pub fn id(&self) -> String {
        format!(
            "{}:{} {} {} {}",
            self.file, self.line, self.family, self.table, self.chain
        )
    }

    /// The listing the file expects for the rule (`;ok;LISTING`, else the rule itself).
    pub fn expected_listing(&self) -> Option<&str> {
        match &self.expect {
            Expect::Ok(Some(l)) => Some(l.as_str()),
            Expect::Ok(None) => Some(self.rule.as_str()),
            Expect::Fail => None,
        }
    }
}

/// A declaration line that later rules of the file see.
#[derive(Debug, Clone)]
enum Decl {
    /// `add set|map ...` (the command, without family and table).
    Set { name: String, body: String },
    /// `add element ...`.
    Elements { set: String, elements: String },
    /// `add KIND ...` of a stateful object.
    Object {
        kind: String,
        name: String,
        spec: String,
    },
}

impl Decl {
    fn command(&self, family: &str, table: &str) -> String {
        match self {
            Decl::Set { name, body } => {
                let kind = if body.contains(" : ") { "map" } else { "set" };
                format!("add {kind} {family} {table} {name} {body}")
            }
            Decl::Elements { set, elements } => {
                format!("add element {family} {table} {set} {{ {elements} }}")
            }
            Decl::Object { kind, name, spec } => {
                let spec = if spec.is_empty() {
                    String::new()
                } else {
                    format!(" {spec}")
                };
                format!("add {kind} {family} {table} {name}{spec}")
            }
        }
    }
}

/// `!NAME type T [. T...] [: D [. D...]] [timeout X] [flags F]` as nft-test.py's
/// `set_process` reads it: `{ type ...; timeout X; flags F; }` (a `typeof` key keeps its
/// words).
fn set_decl(text: &str) -> Option<Decl> {
    let tokens: Vec<&str> = text.split(' ').filter(|t| !t.is_empty()).collect();
    let name = (*tokens.first()?).to_string();
    let typeof_ = *tokens.get(1)? == "typeof";
    let mut key = format!("{} {}", tokens.get(1)?, tokens.get(2)?);
    let mut i = 3;
    if typeof_ && tokens.get(i) == Some(&"id") {
        key.push_str(" id");
        i += 1;
    }
    while tokens.get(i) == Some(&".") {
        key.push_str(&format!(" . {}", tokens.get(i + 1)?));
        i += 2;
    }
    let mut data = String::new();
    while tokens.get(i) == Some(&":") {
        data = (*tokens.get(i + 1)?).to_string();
        i += 2;
    }
    while tokens.get(i) == Some(&".") {
        data.push_str(&format!(" . {}", tokens.get(i + 1)?));
        i += 2;
    }
    if typeof_ && tokens.get(i) == Some(&"mark") {
        data.push_str(" mark");
        i += 1;
    }
    let mut timeout = String::new();
    if tokens.len() == i + 2 && tokens[i] == "timeout" {
        timeout = format!(" timeout {};", tokens[i + 1]);
        i += 2;
    }
    let mut flags = String::new();
    if tokens.len() == i + 2 && tokens[i] == "flags" {
        flags = format!(" flags {};", tokens[i + 1]);
    } else if tokens.len() != i {
        return None;
    }
    let body = if data.is_empty() {
        format!("{{ {key};{timeout}{flags} }}")
    } else {
        format!("{{ {key} : {data};{timeout}{flags} }}")
    };
    Some(Decl::Set { name, body })
}

/// `%NAME type KIND [SPEC]` as nft-test.py's `obj_process` reads it (`ct helper`, `ct timeout`
/// and `ct expectation` are two-word kinds).
fn object_decl(text: &str) -> Option<Decl> {
    let tokens: Vec<&str> = text.split(' ').filter(|t| !t.is_empty()).collect();
    let name = (*tokens.first()?).to_string();
    let mut kind = (*tokens.get(2)?).to_string();
    let mut rest = 3;
    if kind == "ct" {
        kind = format!("ct {}", tokens.get(3)?);
        rest = 4;
    }
    Some(Decl::Object {
        kind,
        name,
        spec: tokens.get(rest..).unwrap_or_default().join(" "),
    })
}

/// The units of one test file. `rel` is the file's path relative to `py/` (used in ids).
pub fn parse(rel: &str, text: &str) -> Vec<Unit> {
    let mut chains: Vec<(String, String)> = Vec::new();
    let mut tables: Vec<(String, String, Vec<String>)> = Vec::new();
    let mut decls: Vec<Decl> = Vec::new();
    let mut units = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim_end();
        if line.trim().is_empty() || line.starts_with('#') || line.starts_with('-') {
            continue;
        }
        let (head, rest) = line.split_at(1);
        match head {
            ":" => {
                let mut p = rest.splitn(2, ';');
                let name = p.next().unwrap_or_default().to_string();
                let spec = p.next().unwrap_or_default().to_string();
                chains.push((name, spec));
            }
            "*" => {
                let p: Vec<&str> = rest.split(';').collect();
                if p.len() >= 3 {
                    let names = p[2].split(',').map(str::to_string).collect();
                    tables.push((p[0].to_string(), p[1].to_string(), names));
                }
            }
            "!" => {
                let p: Vec<&str> = rest.split(';').collect();
                if p.get(1).map(|s| s.trim()) == Some("ok") {
                    decls.extend(set_decl(p[0]));
                }
            }
            "?" => {
                let p: Vec<&str> = rest.split(';').collect();
                if p.get(1).map(|s| s.trim()) == Some("ok") {
                    let (set, elements) = p[0].split_once(' ').unwrap_or((p[0], ""));
                    decls.push(Decl::Elements {
                        set: set.to_string(),
                        elements: elements.trim().to_string(),
                    });
                }
            }
            "%" => {
                // `%NAME type ct timeout { ...; ...; };ok`: the spec runs to the last brace.
                let (obj, state) = match rest.rfind('}') {
                    Some(b) => (&rest[..=b], rest[b + 1..].trim_start_matches(';')),
                    None => rest.split_once(';').unwrap_or((rest, "")),
                };
                if state.trim() == "ok" {
                    decls.extend(object_decl(obj));
                }
            }
            _ => {
                let p: Vec<&str> = line.split(';').collect();
                let expect = match (p.len(), p.get(1).map(|s| s.trim())) {
                    (2, Some("ok")) => Expect::Ok(None),
                    (3, Some("ok")) => Expect::Ok(Some(p[2].trim().to_string())),
                    (2, Some("fail")) => Expect::Fail,
                    _ => continue,
                };
                let rule = p[0].trim().to_string();
                for (family, table, names) in &tables {
                    for chain in names {
                        let spec = chains
                            .iter()
                            .rev()
                            .find(|(n, _)| n == chain)
                            .map(|(_, s)| s.as_str())
                            .unwrap_or_default();
                        let mut commands = format!("add table {family} {table}\n");
                        if spec.is_empty() {
                            commands.push_str(&format!("add chain {family} {table} {chain}\n"));
                        } else {
                            commands.push_str(&format!(
                                "add chain {family} {table} {chain} {{ {spec}; }}\n"
                            ));
                        }
                        for d in &decls {
                            commands.push_str(&d.command(family, table));
                            commands.push('\n');
                        }
                        commands.push_str(&format!("add rule {family} {table} {chain} {rule}\n"));
                        units.push(Unit {
                            file: rel.to_string(),
                            line: i + 1,
                            family: family.clone(),
                            table: table.clone(),
                            chain: chain.clone(),
                            rule: rule.clone(),
                            expect: expect.clone(),
                            commands,
                        });
                    }
                }
            }
        }
    }
    units
}

/// Every unit of every `*.t` file under `py_dir` (one folder deep, as `py/ip/ip.t`), in file
/// name order.
///
/// # Errors
/// When the folder or a file cannot be read.
pub fn load(py_dir: &Path) -> std::io::Result<Vec<Unit>> {
    let mut files = Vec::new();
    for sub in std::fs::read_dir(py_dir)? {
        let sub = sub?.path();
        if !sub.is_dir() {
            continue;
        }
        for f in std::fs::read_dir(&sub)? {
            let f = f?.path();
            if f.extension().is_some_and(|x| x == "t") {
                files.push(f);
            }
        }
    }
    files.sort();
    let mut units = Vec::new();
    for f in files {
        let rel = f
            .strip_prefix(py_dir)
            .unwrap_or(&f)
            .to_string_lossy()
            .into_owned();
        units.extend(parse(&rel, &std::fs::read_to_string(&f)?));
    }
    Ok(units)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "\
:input;type filter hook input priority 0
:ingress;type filter hook ingress device lo priority 0

*ip;test-ip4;input
*netdev;test-netdev;ingress

!set1 type ipv4_addr timeout 60s;ok
?set1 192.168.3.4, 10.0.0.1;ok
?set1 1.2.3.4;fail
%qt1 type quota 25 mbytes;ok
%ct1 type ct timeout { protocol tcp; policy = { established:122 } ;};ok
- ip version 2;ok
ip saddr @set1;ok
ip dscp 0x38;ok;ip dscp cs7
ip dscp 99;fail
";

    #[test]
    fn units_are_rule_lines_times_table_chain_pairs() {
        let units = parse("ip/x.t", FILE);
        assert_eq!(units.len(), 6);
        assert_eq!(units[0].id(), "ip/x.t:13 ip test-ip4 input");
        assert_eq!(units[1].id(), "ip/x.t:13 netdev test-netdev ingress");
        assert_eq!(units[2].expected_listing(), Some("ip dscp cs7"));
        assert_eq!(units[4].expect, Expect::Fail);
        assert_eq!(units[4].expected_listing(), None);
    }

    #[test]
    fn commands_are_nft_test_py_s() {
        let units = parse("ip/x.t", FILE);
        assert_eq!(
            units[1].commands,
            "add table netdev test-netdev\n\
             add chain netdev test-netdev ingress { type filter hook ingress device lo priority 0; }\n\
             add set netdev test-netdev set1 { type ipv4_addr; timeout 60s; }\n\
             add element netdev test-netdev set1 { 192.168.3.4, 10.0.0.1 }\n\
             add quota netdev test-netdev qt1 25 mbytes\n\
             add ct timeout netdev test-netdev ct1 { protocol tcp; policy = { established:122 } ;}\n\
             add rule netdev test-netdev ingress ip saddr @set1\n"
        );
    }

    #[test]
    fn maps_and_typeof_keep_their_words() {
        let Some(Decl::Set { body, .. }) = set_decl("map1 typeof vlan id : meta mark") else {
            panic!("not a set");
        };
        assert_eq!(body, "{ typeof vlan id : meta mark; }");
        let Some(Decl::Set { body, .. }) =
            set_decl("set3 type ipv4_addr . ipv4_addr . inet_service flags interval")
        else {
            panic!("not a set");
        };
        assert_eq!(
            body,
            "{ type ipv4_addr . ipv4_addr . inet_service; flags interval; }"
        );
        assert!(set_decl("s type ipv4_addr bogus").is_none());
    }
}
