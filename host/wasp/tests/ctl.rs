//! `wasp ctl` against a fake daemon: a wasp-ctl server in this process whose handler holds a
//! ruleset model and answers as PROTOCOL.md says.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use clap::Parser;
use wasp::cli::{Cli, run};
use wasp_ctl::proto::{ElementOp, Request, ResetRequest, Stats};
use wasp_ctl::{Handler, ReplySink, ReplySinkExt, Server, ServerConfig};
use wasp_ruleset::Ruleset;

const RULESET: &str = "table netdev filt {
	set blk {
		type ipv4_addr
		elements = { 10.0.0.1, 10.0.0.2 }
	}
	chain in {
		type filter hook ingress device \"lo\" priority 0; policy accept;
		ip saddr @blk counter packets 3 bytes 180 drop
		tcp dport 22 accept
	}
}
";

struct Fake {
    ruleset: Mutex<Ruleset>,
}

impl Handler for Fake {
    fn handle(&self, req: Request, out: &mut dyn ReplySink) -> Result<serde_json::Value, String> {
        let gone = |e: std::io::Error| e.to_string();
        match req {
            Request::List(l) => {
                let rs = self.ruleset.lock().unwrap().clone();
                wasp_ctl::listing::list(&rs, &l, out)
            }
            Request::Apply { text, name, .. } => {
                let mut rs = self.ruleset.lock().unwrap();
                *rs = wasp_ruleset::apply_batch(&rs, &text, &name).map_err(|e| e.to_string())?;
                Ok(serde_json::Value::Null)
            }
            Request::Element(e) if e.op == ElementOp::Get => {
                let rs = self.ruleset.lock().unwrap().clone();
                out.text(&wasp_ctl::element::get_text(&rs, &e)?)
                    .map_err(gone)?;
                Ok(serde_json::Value::Null)
            }
            Request::Element(e) => {
                let mut rs = self.ruleset.lock().unwrap();
                *rs = wasp_ruleset::apply_batch(&rs, &e.command_text(), "<command>")
                    .map_err(|e| e.to_string())?;
                Ok(serde_json::Value::Null)
            }
            Request::Reset(ResetRequest::Counters { .. }) => {
                out.text("table netdev filt {\n}\n").map_err(gone)?;
                Ok(serde_json::Value::Null)
            }
            Request::ConntrackDelete(f) => {
                // Two connections match the filter the test gives, none another.
                let want = wasp_ctl::proto::CtFilter {
                    proto: Some("tcp".into()),
                    dport: Some(22),
                    mark: Some(0x2a),
                    mark_mask: Some(0xff),
                    ..Default::default()
                };
                let n = if f == want { 2 } else { 0 };
                Ok(serde_json::json!({ "deleted": n }))
            }
            Request::Reset(_)
            | Request::Check { .. }
            | Request::Conntrack
            | Request::PluginState
            | Request::Flows { .. } => Err("Error: not in the fake".into()),
            Request::Plugin { name, path, .. } => Err(format!(
                "Error: plugin {name}: cannot read {}",
                path.unwrap_or_default()
            )),
            Request::MonitorTrace => {
                out.event("trace id 01000001 netdev filt in rule accept (verdict accept)")
                    .map_err(gone)?;
                Ok(serde_json::Value::Null)
            }
            Request::MonitorJson => {
                out.event(r#"{"add": {"table": {"family": "ip", "name": "t", "handle": 1}}}"#)
                    .map_err(gone)?;
                Ok(serde_json::Value::Null)
            }
            Request::Monitor => {
                for i in 0..3 {
                    out.event(&format!("add element netdev filt blk {{ 10.9.0.{i} }}"))
                        .map_err(gone)?;
                }
                Ok(serde_json::Value::Null)
            }
            Request::Stats => {
                let mut s = Stats::default();
                s.drops.insert("policy".into(), 7);
                s.ports.push(wasp_ctl::proto::PortStats {
                    name: "veth0".into(),
                    rx_packets: 12,
                    ..Default::default()
                });
                Ok(serde_json::to_value(s).unwrap())
            }
            Request::Dump { mode, encoding } => {
                let rs = self.ruleset.lock().unwrap().clone();
                let n = wasp_ctl::dump::dump_ruleset(&rs, mode, encoding, out).map_err(gone)?;
                Ok(serde_json::json!({ "rules": n }))
            }
        }
    }
}

fn start(dir: &Path) -> (Server, PathBuf) {
    let path = dir.join("wasp.sock");
    let fake = Fake {
        ruleset: Mutex::new(wasp_ruleset::parse_str(RULESET, "ruleset.nft").unwrap()),
    };
    let server = Server::start(ServerConfig::new(&path), Arc::new(fake)).unwrap();
    (server, path)
}

/// `wasp ctl --socket PATH ARGS...`: stdout, or the error.
fn ctl(sock: &Path, args: &[&str]) -> Result<String, wasp::Error> {
    let mut argv = vec!["wasp", "ctl", "--socket", sock.to_str().unwrap()];
    argv.extend_from_slice(args);
    let cli = Cli::try_parse_from(argv).unwrap();
    let mut out = Vec::new();
    let mut err = Vec::new();
    run(&cli, &mut out, &mut err)?;
    Ok(String::from_utf8(out).unwrap())
}

#[test]
fn list_with_nft_flags() {
    let dir = tempfile::tempdir().unwrap();
    let (_s, sock) = start(dir.path());
    let out = ctl(&sock, &["-a", "list", "ruleset"]).unwrap();
    assert_eq!(
        out,
        "table netdev filt { # handle 1
	set blk { # handle 2
		type ipv4_addr
		elements = { 10.0.0.1, 10.0.0.2 }
	}

	chain in { # handle 1
		type filter hook ingress device \"lo\" priority filter; policy accept;
		ip saddr @blk counter packets 3 bytes 180 drop # handle 3
		tcp dport 22 accept # handle 4
	}
}
"
    );
    let out = ctl(&sock, &["-s", "-t", "list", "ruleset"]).unwrap();
    assert!(out.contains("\t\ttype ipv4_addr\n\t}\n"), "{out}");
    assert!(out.contains("ip saddr @blk counter drop\n"), "{out}");
    assert_eq!(
        ctl(&sock, &["list", "tables"]).unwrap(),
        "table netdev filt\n"
    );
    let json = ctl(&sock, &["-j", "list", "set", "netdev", "filt", "blk"]).unwrap();
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        v["nftables"][1]["set"]["elem"],
        serde_json::json!(["10.0.0.1", "10.0.0.2"])
    );
    // An unknown set: nft's error, exit 1 (Error::Ctl).
    match ctl(&sock, &["list", "set", "netdev", "filt", "nope"]) {
        Err(wasp::Error::Ctl(m)) => assert_eq!(
            m,
            "Error: No such file or directory\nlist set netdev filt nope\n                     ^^^^"
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn apply_file_all_or_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (_s, sock) = start(dir.path());
    let bad = dir.path().join("bad.nft");
    std::fs::write(
        &bad,
        "add element netdev filt blk { 10.0.0.9 }\nadd rule netdev filt nochain drop\n",
    )
    .unwrap();
    let before = ctl(&sock, &["-a", "list", "ruleset"]).unwrap();
    match ctl(&sock, &["-f", bad.to_str().unwrap()]) {
        Err(wasp::Error::Ctl(m)) => {
            assert!(m.starts_with(&format!("{}:2:", bad.display())), "{m}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(ctl(&sock, &["-a", "list", "ruleset"]).unwrap(), before);
    let good = dir.path().join("good.nft");
    std::fs::write(&good, "add rule netdev filt in udp dport 53 drop\n").unwrap();
    assert_eq!(ctl(&sock, &["-f", good.to_str().unwrap()]).unwrap(), "");
    let chain = ctl(&sock, &["-a", "list", "chain", "netdev", "filt", "in"]).unwrap();
    assert!(chain.contains("udp dport 53 drop # handle 5\n"), "{chain}");
    // A file that does not exist.
    assert!(ctl(&sock, &["-f", "/nonexistent/x.nft"]).is_err());
}

#[test]
fn elements() {
    let dir = tempfile::tempdir().unwrap();
    let (_s, sock) = start(dir.path());
    ctl(
        &sock,
        &[
            "add", "element", "netdev", "filt", "blk", "{", "10.0.0.7", "}",
        ],
    )
    .unwrap();
    let out = ctl(
        &sock,
        &["get", "element", "netdev", "filt", "blk", "{ 10.0.0.7 }"],
    )
    .unwrap();
    assert_eq!(
        out,
        "table netdev filt {\n\tset blk {\n\t\ttype ipv4_addr\n\t\telements = { 10.0.0.7 }\n\t}\n}\n"
    );
    ctl(
        &sock,
        &["delete", "element", "netdev", "filt", "blk", "{ 10.0.0.7 }"],
    )
    .unwrap();
    match ctl(
        &sock,
        &["get", "element", "netdev", "filt", "blk", "{ 10.0.0.7 }"],
    ) {
        Err(wasp::Error::Ctl(m)) => {
            assert!(m.starts_with("Error: Could not process rule: No such file or directory"));
        }
        other => panic!("{other:?}"),
    }
    // A key that is not one of the set's type: the error quotes the `get` command.
    match ctl(
        &sock,
        &["get", "element", "netdev", "filt", "blk", "{ 10.0.0.999 }"],
    ) {
        Err(wasp::Error::Ctl(m)) => {
            assert!(
                m.contains("expected an IPv4 address")
                    && m.contains("get element netdev filt blk { 10.0.0.999 }")
                    && !m.contains("add element"),
                "{m}"
            );
        }
        other => panic!("{other:?}"),
    }
    // Deleting what is not there is the kernel's error.
    assert!(matches!(
        ctl(
            &sock,
            &["delete", "element", "netdev", "filt", "blk", "{ 10.0.0.7 }"]
        ),
        Err(wasp::Error::Ctl(_))
    ));
    // `create` of an element the set holds is the kernel's error; `destroy` of one it does
    // not hold is none.
    ctl(
        &sock,
        &["create", "element", "netdev", "filt", "blk", "{ 10.0.0.8 }"],
    )
    .unwrap();
    assert!(matches!(
        ctl(
            &sock,
            &["create", "element", "netdev", "filt", "blk", "{ 10.0.0.8 }"]
        ),
        Err(wasp::Error::Ctl(m)) if m.contains("File exists")
    ));
    ctl(
        &sock,
        &[
            "destroy",
            "element",
            "netdev",
            "filt",
            "blk",
            "{ 10.0.0.8, 10.0.0.9 }",
        ],
    )
    .unwrap();
    assert!(
        ctl(
            &sock,
            &["get", "element", "netdev", "filt", "blk", "{ 10.0.0.8 }"]
        )
        .is_err()
    );
    // No braces: a usage error, nothing sent.
    assert!(matches!(
        ctl(
            &sock,
            &["add", "element", "netdev", "filt", "blk", "10.0.0.7"]
        ),
        Err(wasp::Error::Usage(_))
    ));
}

#[test]
fn dumps() {
    let dir = tempfile::tempdir().unwrap();
    let (_s, sock) = start(dir.path());
    assert_eq!(
        ctl(&sock, &["dump", "rules"]).unwrap(),
        "add rule netdev filt in ip saddr @blk counter packets 3 bytes 180 drop # handle 3\n\
         add rule netdev filt in tcp dport 22 accept # handle 4\n"
    );
    assert_eq!(
        ctl(&sock, &["dump", "rules", "--brief"]).unwrap(),
        "netdev filt in 3 3 180\nnetdev filt in 4 - -\n"
    );
    assert_eq!(
        ctl(&sock, &["-j", "dump", "rules", "--brief"]).unwrap(),
        "{\"chain\":{\"id\":0,\"family\":\"netdev\",\"table\":\"filt\",\"name\":\"in\"}}\n\
         [0,3,3,180,1]\n[0,4,0,0,0]\n{\"ok\":{\"rules\":2}}\n"
    );
}

#[test]
fn monitor_stats_plugin_reset() {
    let dir = tempfile::tempdir().unwrap();
    let (_s, sock) = start(dir.path());
    assert_eq!(
        ctl(&sock, &["monitor"]).unwrap(),
        "add element netdev filt blk { 10.9.0.0 }\nadd element netdev filt blk { 10.9.0.1 }\nadd element netdev filt blk { 10.9.0.2 }\n"
    );
    // `-j monitor` asks for the JSON events and prints them as they come.
    assert_eq!(
        ctl(&sock, &["-j", "monitor"]).unwrap(),
        "{\"add\": {\"table\": {\"family\": \"ip\", \"name\": \"t\", \"handle\": 1}}}\n"
    );
    let stats = ctl(&sock, &["stats"]).unwrap();
    assert!(
        stats
            .lines()
            .any(|l| l.starts_with("veth0") && l.contains(" 12 ")),
        "{stats}"
    );
    assert!(
        stats
            .lines()
            .any(|l| l.starts_with("policy") && l.ends_with(" 7")),
        "{stats}"
    );
    let json = ctl(&sock, &["-j", "stats"]).unwrap();
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["drops"]["policy"], 7);
    // A relative plugin path reaches the daemon absolute.
    match ctl(&sock, &["plugin", "load", "geneve", "geneve.wasm"]) {
        Err(wasp::Error::Ctl(m)) => {
            let want = std::env::current_dir().unwrap().join("geneve.wasm");
            assert_eq!(
                m,
                format!("Error: plugin geneve: cannot read {}", want.display())
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        ctl(&sock, &["plugin", "load", "geneve"]),
        Err(wasp::Error::Usage(_))
    ));
    assert_eq!(
        ctl(&sock, &["reset", "counters"]).unwrap(),
        "table netdev filt {\n}\n"
    );
}

#[test]
fn no_daemon_and_bad_commands() {
    let dir = tempfile::tempdir().unwrap();
    match ctl(&dir.path().join("none.sock"), &["list", "ruleset"]) {
        Err(wasp::Error::Ctl(m)) => {
            assert!(
                m.starts_with("cannot connect to the wasp daemon at "),
                "{m}"
            );
            assert!(m.contains("is `wasp run` running?"), "{m}");
        }
        other => panic!("{other:?}"),
    }
    for bad in [
        &["frobnicate"][..],
        &["list", "rules"],
        &["dump", "rules", "--fast"],
        &[],
    ] {
        assert!(
            matches!(
                ctl(&dir.path().join("none.sock"), bad),
                Err(wasp::Error::Usage(_))
            ),
            "{bad:?}"
        );
    }
}

#[test]
fn conntrack_delete_and_flush_words() {
    let dir = tempfile::tempdir().unwrap();
    let (_s, sock) = start(dir.path());
    let out = ctl(
        &sock,
        &[
            "delete",
            "conntrack",
            "proto",
            "tcp",
            "dport",
            "22",
            "mark",
            "0x2a/0xff",
        ],
    )
    .unwrap();
    assert_eq!(out, "2 connections deleted\n");
    assert_eq!(
        ctl(&sock, &["flush", "conntrack"]).unwrap(),
        "0 connections deleted\n"
    );
    for (words, why) in [
        (
            &["delete", "conntrack", "dport"][..],
            "`dport` needs a value",
        ),
        (
            &["delete", "conntrack", "port", "22"][..],
            "unknown filter `port`",
        ),
        (
            &["delete", "conntrack", "dport", "70000"][..],
            "out of range",
        ),
        (
            &["delete", "conntrack", "zone", "1", "zone", "2"][..],
            "`zone` given twice",
        ),
    ] {
        let e = ctl(&sock, words).unwrap_err().to_string();
        assert!(e.contains(why), "{words:?}: {e}");
    }
}
