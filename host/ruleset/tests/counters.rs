//! Named counter objects (`counter NAME { packets N bytes M }`) and `counter name X` in rules,
//! printed as nft 1.0.6 lists them (checked with `nft list ruleset` / `nft -a list ruleset`
//! after `nft -f` of the same text in a fresh network namespace).

use wasp_ruleset::model::Stmt;
use wasp_ruleset::{parse_str, print_ruleset};

const TEXT: &str = "table netdev t {
  counter c1 { packets 5 bytes 300 }
  counter c2 { }
  set s { type ipv4_addr; counter; elements = { 10.0.0.1 counter packets 2 bytes 3 } }
  chain c { type filter hook ingress device \"lo\" priority 0; policy accept;
    counter name \"c1\" accept
    counter name c2
    ip saddr @s counter packets 1 bytes 2
  }
}
";

#[test]
fn objects_and_references_print_as_nft_lists_them() {
    let rs = parse_str(TEXT, "t.nft").expect("parses");
    let t = &rs.tables[0];
    let objs: Vec<(&str, u64, u64, u64)> = t
        .counters
        .iter()
        .map(|c| (c.name.as_str(), c.handle, c.packets, c.bytes))
        .collect();
    // Handles as `nft -a list ruleset` gave them: chain c 1, then c1 2 and c2 3.
    assert_eq!(objs, [("c1", 2, 5, 300), ("c2", 3, 0, 0)]);
    assert_eq!(t.chains[0].handle, 1);
    assert!(
        matches!(&t.chains[0].rules[1].stmts[0], Stmt::CounterRef { name, .. } if name == "c2")
    );
    let text = print_ruleset(&rs, false);
    for want in [
        "table netdev t {\n\tcounter c1 {\n\t\tpackets 5 bytes 300\n\t}\n\n\tcounter c2 {\n\t\tpackets 0 bytes 0\n\t}\n\n\tset s {",
        "\t\tcounter name \"c1\" accept\n\t\tcounter name \"c2\"\n\t\tip saddr @s counter packets 1 bytes 2\n",
        "elements = { 10.0.0.1 counter packets 2 bytes 3 }",
    ] {
        assert!(text.contains(want), "{want:?} not in\n{text}");
    }
    assert!(print_ruleset(&rs, true).contains("\tcounter c1 { # handle 2\n"));
    // The listing reads back to the same model.
    let again = parse_str(&text, "t.nft").expect("reparses");
    let counts = |r: &wasp_ruleset::Ruleset| -> Vec<(String, u64, u64, u64)> {
        r.tables[0]
            .counters
            .iter()
            .map(|c| (c.name.clone(), c.handle, c.packets, c.bytes))
            .collect()
    };
    assert_eq!(counts(&again), counts(&rs));
}

#[test]
fn a_bad_counter_object_is_an_error_with_its_place() {
    let err = parse_str("table netdev t {\n\tcounter c1 { packets 5 }\n}\n", "t.nft")
        .unwrap_err()
        .to_string();
    assert!(err.contains("t.nft:2:"), "{err}");
    assert!(err.contains("`bytes`"), "{err}");
}
