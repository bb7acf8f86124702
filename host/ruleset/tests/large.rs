//! A 1000-rule file: every rule parsed, handles consecutive after the chain (one table
//! counter), and the parse time printed (no timing assertion).

#[test]
fn thousand_rules() {
    let mut text = String::from(
        "table netdev big {\n\tchain in {\n\t\ttype filter hook ingress device \"eth0\" priority 0; policy accept;\n",
    );
    for i in 0..1000u32 {
        text.push_str(&format!(
            "\t\tip saddr 10.{}.{}.0/24 tcp dport {{ {}, {} }} counter accept\n",
            i / 256,
            i % 256,
            1000 + i,
            3000 + i
        ));
    }
    text.push_str("\t}\n}\n");
    let start = std::time::Instant::now();
    let r = wasp_ruleset::parse_str(&text, "big.nft").unwrap();
    let parse = start.elapsed();
    let start = std::time::Instant::now();
    let printed = wasp_ruleset::print_ruleset(&r, true);
    eprintln!("1000 rules: parse {parse:?}, print {:?}", start.elapsed());
    let rules = &r.tables[0].chains[0].rules;
    assert_eq!(rules.len(), 1000);
    // Chain 1; each rule's anonymous set takes the handle before the rule.
    assert_eq!(rules[0].handle, 3);
    assert_eq!(rules[999].handle, 2001);
    assert!(printed.contains("ip saddr 10.3.231.0/24 tcp dport { 1999, 3999 } counter packets 0 bytes 0 accept # handle 2001\n"));
}
