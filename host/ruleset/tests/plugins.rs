//! Plugin declarations and uses: what they parse to, how they print, where their files are,
//! and the errors for an undeclared, duplicate or incomplete plugin.

use std::path::{Path, PathBuf};

use wasp_ruleset::model::{PluginSource, PluginUse, Span, Stmt, Verdict};
use wasp_ruleset::{parse_str, print_ruleset};

const GATEWAY: &str = r#"define lan = "wlan0"
table netdev gw {
	plugin geneve {
		path "plugins/geneve.wasm"
	}
	plugin idletimer
	chain in {
		type filter hook ingress device "eth0" priority 0; policy accept;
		udp dport 6081 geneve opt class 0x0102 type 0x80 fallback drop counter accept
		idletimer label $lan timeout 10s geneve set { class 1, type 2 } drop
		geneve vni 7 comment "tagged"
		counter
	}
}
"#;

fn uses(text: &str) -> Vec<PluginUse> {
    let rs = parse_str(text, "/etc/wasp/gw.nft").unwrap_or_else(|e| panic!("{e}"));
    rs.tables
        .iter()
        .flat_map(|t| &t.chains)
        .flat_map(|c| &c.rules)
        .flat_map(|r| &r.stmts)
        .filter_map(|s| match s {
            Stmt::Plugin(u) => Some(u.clone()),
            _ => None,
        })
        .collect()
}

fn args(u: &PluginUse) -> Vec<&str> {
    u.args.iter().map(String::as_str).collect()
}

#[test]
fn uses_take_the_tokens_up_to_a_verdict_statement_or_other_use() {
    let u = uses(GATEWAY);
    assert_eq!(u.len(), 4);
    assert_eq!(u[0].name, "geneve");
    assert_eq!(args(&u[0]), ["opt", "class", "0x0102", "type", "0x80"]);
    assert!(u[0].fallback_drop);
    // Line 9, after `udp dport 6081 ` (two tabs count as two columns).
    assert_eq!((u[0].span.line, u[0].span.col), (9, 18));
    // A variable expands to its token; a quoted string keeps its quotes.
    assert_eq!(u[1].name, "idletimer");
    assert_eq!(args(&u[1]), ["label", "\"wlan0\"", "timeout", "10s"]);
    assert!(!u[1].fallback_drop);
    // `{ ... }` is one run of tokens.
    assert_eq!(
        args(&u[2]),
        ["set", "{", "class", "1", ",", "type", "2", "}"]
    );
    assert_eq!(args(&u[3]), ["vni", "7"]);

    let rs = parse_str(GATEWAY, "/etc/wasp/gw.nft").unwrap();
    let rules = &rs.tables[0].chains[0].rules;
    // `counter accept` after the use are the native statements.
    assert!(matches!(rules[0].stmts[1], Stmt::Plugin(_)));
    assert!(matches!(rules[0].stmts[2], Stmt::Counter { .. }));
    assert_eq!(rules[0].stmts[3], Stmt::Verdict(Verdict::Accept));
    assert_eq!(rules[1].stmts[2], Stmt::Verdict(Verdict::Drop));
    assert_eq!(rules[2].comment.as_deref(), Some("tagged"));
    // Without `plugin counter` in the table, `counter` is nft's.
    assert!(matches!(rules[3].stmts[0], Stmt::Counter { .. }));
}

#[test]
fn prints_declarations_and_uses_and_reads_back() {
    let rs = parse_str(GATEWAY, "gw.nft").unwrap();
    let text = print_ruleset(&rs, false);
    let want = "table netdev gw {\n\
\tplugin geneve {\n\t\tpath \"plugins/geneve.wasm\"\n\t}\n\
\n\tplugin idletimer\n\
\n\tchain in {\n\
\t\ttype filter hook ingress device \"eth0\" priority filter; policy accept;\n\
\t\tudp dport 6081 geneve opt class 0x0102 type 0x80 fallback drop counter packets 0 bytes 0 accept\n\
\t\tidletimer label \"wlan0\" timeout 10s geneve set { class 1 , type 2 } drop\n\
\t\tgeneve vni 7 comment \"tagged\"\n\
\t\tcounter packets 0 bytes 0\n\
\t}\n}\n";
    assert_eq!(text, want);
    let again = parse_str(&text, "gw.nft").unwrap();
    assert_eq!(print_ruleset(&again, false), text);
    let strip = |mut u: PluginUse| {
        u.span = Span::default();
        u
    };
    let a: Vec<PluginUse> = uses(GATEWAY).into_iter().map(strip).collect();
    let b: Vec<PluginUse> = uses(&text).into_iter().map(strip).collect();
    assert_eq!(a, b);
}

#[test]
fn a_use_may_come_before_its_declaration_in_the_block_and_add_rule_sees_it() {
    let text = "table ip t {\n\tchain c {\n\t\tmatcher x 1 accept\n\t}\n\tplugin matcher { path \"m.wasm\"; }\n}\nadd rule ip t c matcher y\n";
    let u = uses(text);
    assert_eq!(u.len(), 2);
    assert_eq!(args(&u[0]), ["x", "1"]);
    assert_eq!(args(&u[1]), ["y"]);
}

#[test]
fn declared_counter_serves_counter_statements() {
    let text = "table netdev t {\n\tplugin counter\n\tchain c {\n\t\ttype filter hook ingress device \"eth0\" priority 0;\n\t\tcounter accept\n\t}\n}\n";
    let u = uses(text);
    assert_eq!(u.len(), 1);
    assert_eq!(u[0].name, "counter");
    assert!(u[0].args.is_empty());
}

#[test]
fn plugin_files_resolve_against_the_declaring_file() {
    let text = "table ip t {\n\tplugin a { path \"a.wasm\"; }\n\tplugin b { path \"sub/b.bin\"; }\n\tplugin c { path \"/opt/c.wasm\"; }\n\tplugin d { path \"counter\"; }\n\tplugin idletimer\n}\n";
    let rs = parse_str(text, "/etc/wasp/rules.nft").unwrap();
    let src: Vec<PluginSource> = rs.tables[0].plugins.iter().map(|p| p.source(&rs)).collect();
    assert_eq!(
        src,
        [
            PluginSource::File(PathBuf::from("/etc/wasp/a.wasm")),
            PluginSource::File(PathBuf::from("/etc/wasp/sub/b.bin")),
            PluginSource::File(PathBuf::from("/opt/c.wasm")),
            PluginSource::Bundled("counter".into()),
            PluginSource::Bundled("idletimer".into()),
        ]
    );
    // A plugin declared in an included file resolves against that file's folder.
    let dir = std::env::temp_dir().join(format!("wasp-plugins-inc-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("inc")).unwrap();
    std::fs::write(dir.join("main.nft"), "include \"inc/t.nft\"\n").unwrap();
    std::fs::write(
        dir.join("inc/t.nft"),
        "table ip t {\n\tplugin a { path \"a.wasm\"; }\n}\n",
    )
    .unwrap();
    let rs = wasp_ruleset::parse_file(&dir.join("main.nft")).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        rs.tables[0].plugins[0].source(&rs),
        PluginSource::File(Path::new(&dir).join("inc/a.wasm"))
    );
}

/// The error text of `text` (a ruleset named `p.nft`).
fn error(text: &str) -> String {
    match parse_str(text, "p.nft") {
        Ok(_) => panic!("parsed: {text}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn errors() {
    let chain = |rule: &str| {
        format!(
            "table ip t {{\n\tplugin geneve {{ path \"g.wasm\"; }}\n\tchain c {{\n\t\t{rule}\n\t}}\n}}\n"
        )
    };
    // Close to a declared name.
    let e = error(&chain("genev opt class 1 accept"));
    assert!(
        e.starts_with("p.nft:4:3: error: unknown plugin `genev` (did you mean `geneve`?)"),
        "{e}"
    );
    // Declared in another table.
    let e = error(
        "table ip a {\n\tplugin tagger { path \"t.wasm\"; }\n}\ntable ip b {\n\tchain c {\n\t\ttagger x\n\t}\n}\n",
    );
    assert!(
        e.starts_with("p.nft:6:3: error: unknown plugin `tagger`: plugins are declared per table, and table `ip a` declares it"),
        "{e}"
    );
    assert!(e.contains("note: declared here: p.nft:2:2"), "{e}");
    // Declared nowhere, with arguments.
    let e = error(&chain("tagger x accept"));
    assert!(
        e.starts_with("p.nft:4:3: error: unknown plugin `tagger` (declare it in the table: `plugin tagger { path \"tagger.wasm\"; }`; this table declares `geneve`)"),
        "{e}"
    );
    // A lone misspelt verdict keeps nft's message.
    let e = error(&chain("acept"));
    assert!(
        e.starts_with(
            "p.nft:4:3: error: expected a verdict, `counter`, `log` or a match, found `acept`"
        ),
        "{e}"
    );
    // Duplicate declaration, also across blocks of the same table.
    let e = error(
        "table ip t {\n\tplugin g { path \"a.wasm\"; }\n\tplugin g { path \"b.wasm\"; }\n}\n",
    );
    assert!(
        e.starts_with("p.nft:3:9: error: plugin `g` is already declared in table `ip t`"),
        "{e}"
    );
    assert!(e.contains("note: first declared here: p.nft:2:2"), "{e}");
    let e =
        error("table ip t {\n\tplugin g\n}\ntable ip t {\n\tplugin g { path \"g.wasm\"; }\n}\n");
    assert!(
        e.starts_with(
            "p.nft:5:9: error: plugin `g` is already declared in table `ip t` with another path"
        ),
        "{e}"
    );
    // Declared again the same way (a file applied twice): one declaration, as for a set.
    let twice = "table ip t {\n\tplugin g\n}\ntable ip t {\n\tplugin g\n}\n";
    let r = wasp_ruleset::parse_str(twice, "p.nft").expect("the same declaration again");
    assert_eq!(r.tables[0].plugins.len(), 1);
    // Missing path.
    let e = error("table ip t {\n\tplugin g { }\n}\n");
    assert!(
        e.starts_with("p.nft:2:2: error: plugin `g` needs a `path`"),
        "{e}"
    );
    // A name rules already use.
    let e = error("table ip t {\n\tplugin accept\n}\n");
    assert!(
        e.starts_with("p.nft:2:9: error: `accept` cannot name a plugin"),
        "{e}"
    );
    // `fallback` takes `drop` only.
    let e = error(&chain("geneve x fallback accept"));
    assert!(
        e.starts_with("p.nft:4:21: error: expected `drop` after `fallback`, found `accept`"),
        "{e}"
    );
    // A word nft knows stays nft's, however close to a plugin name.
    let e = error(
        "table ip t {\n\tplugin ctx { path \"c.wasm\"; }\n\tchain c {\n\t\tct timeout \"x\" accept\n\t}\n}\n",
    );
    assert!(
        e.contains("p.nft:4:14: error: ")
            && e.contains("`set` after `ct timeout`")
            && !e.contains("plugin"),
        "{e}"
    );
    // An unclosed brace in the arguments.
    let e = error("table ip t {\n\tplugin g { path \"a.wasm\"; }\n\tchain c {\n\t\tg { a\n");
    assert!(e.contains("expected `}`, found end of file"), "{e}");
}
