//! Element acceptance as the kernel's back-ends decide it, over a file's transaction. Every
//! row was run with `nft -c -f` (nft 1.0.6, kernel 6.18) and, for the accepted files, with
//! `nft -f` in a fresh namespace: the refusals, their line:col and wording are nft's.

use wasp_ruleset::error::Error;
use wasp_ruleset::model::Ruleset;

const CONCAT: &str = "table ip t {\nset s { type ipv4_addr . inet_service; flags interval; }\n}\n";
const PORTS: &str = "table ip t {\nset s { type inet_service; flags interval; }\n}\n";
const PAIR: &str = "table ip t {\nset s { type ipv4_addr . ipv4_addr; flags interval; elements = { 1.2.3.4 . 1.2.4.1 } }\n}\n";

fn refused(text: &str, line: u32, col: u32, needle: &str) {
    match wasp_ruleset::parse_str(text, "case.nft") {
        Ok(_) => panic!("accepted, expected {needle:?}:\n{text}"),
        Err(Error::At(l)) => {
            assert_eq!((l.line, l.col), (line, col), "{:?}\n{text}", l.message);
            assert!(
                l.message.contains(needle),
                "{:?} lacks {needle:?}",
                l.message
            );
        }
        Err(e) => panic!("unexpected error kind: {e}"),
    }
}

fn accepted(text: &str) -> Ruleset {
    match wasp_ruleset::parse_str(text, "case.nft") {
        Ok(r) => r,
        Err(e) => panic!("refused: {e}\n{text}"),
    }
}

/// The elements of the first set, as `wasp check --print` lists them.
fn listed(r: &Ruleset) -> String {
    let text = wasp_ruleset::print_ruleset(r, false);
    let mut out = String::new();
    for l in text
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("elements = "))
    {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(l.trim());
        if l.trim_end().ends_with('}') {
            break;
        }
    }
    out
}

#[test]
fn refusals_as_nft() {
    let mut rows: Vec<(String, u32, u32, &str)> = vec![
        // pipapo: create of an identical element (C05).
        (
            format!(
                "{CONCAT}add element ip t s {{ 10.0.0.1 . 22-25, 10.0.0.1 . 10-20 }}\nadd element ip t s {{ 10.0.0.1 . 22-25 }}\ncreate element ip t s {{ 10.0.0.1 . 22-25 }}\n"
            ),
            6,
            25,
            "File exists",
        ),
        // pipapo: partial overlap of the start point.
        (
            format!(
                "{CONCAT}add element ip t s {{ 10.0.0.1 . 22-25 }}\nadd element ip t s {{ 10.0.0.1 . 20-23 }}\n"
            ),
            5,
            22,
            "File exists",
        ),
        // pipapo: same start, longer end (C09 `0-1 . 0-2 n` kind).
        (
            "table inet t {\nset s { type inet_service . inet_service; flags interval; elements = { 0-2 . 0-3, 10-20 . 30-40 } }\n}\nadd element inet t s { 0-1 . 0-2 }\n".to_string(),
            4,
            24,
            "File exists",
        ),
        (
            "table inet t {\nset s { type inet_service . inet_service; flags interval; elements = { 0-2 . 0-3, 10-20 . 30-40 } }\n}\nadd element inet t s { 11-19 . 30-40 }\n".to_string(),
            4,
            24,
            "File exists",
        ),
        // rbtree: every overlap, in another command or in the same one.
        (
            format!("{PORTS}add element ip t s {{ 10-20 }}\nadd element ip t s {{ 15-30 }}\n"),
            5,
            22,
            "conflicting intervals specified",
        ),
        (
            format!("{PORTS}add element ip t s {{ 10-20, 15-30 }}\n"),
            4,
            29,
            "conflicting intervals specified",
        ),
        // C09 (tests/py/ip/sets.t): a single address inside a stored prefix.
        (
            "table ip t {\nset s { type ipv4_addr; flags interval; elements = { 192.168.1.0/24 } }\n}\nadd element ip t s { 192.168.1.1 }\n".to_string(),
            4,
            22,
            "conflicting intervals specified",
        ),
        (
            format!("{PORTS}add element ip t s {{ 10-20 }}\ncreate element ip t s {{ 10-20 }}\n"),
            5,
            25,
            "File exists",
        ),
        // hash: create of an existing key; a map key with other data.
        (
            "table ip t {\nset s { type inet_service; }\n}\nadd element ip t s { 10 }\ncreate element ip t s { 10 }\n".to_string(),
            5,
            25,
            "File exists",
        ),
        (
            "table ip t {\nmap m { type inet_service : mark; }\n}\nadd element ip t m { 10 : 1 }\nadd element ip t m { 10 : 2 }\n".to_string(),
            5,
            22,
            "File exists",
        ),
        // C01: an inverted range in a later field, of two and three fields.
        (
            format!("{CONCAT}add element ip t s {{ 10.0.0.1 . 100-50 }}\n"),
            4,
            33,
            "Range has zero or negative size",
        ),
        (
            "table ip t {\nset s { type ipv4_addr . inet_service . inet_proto; flags interval; }\n}\nadd element ip t s { 10.0.0.1 . 10 . 17-6 }\n".to_string(),
            4,
            38,
            "Range has zero or negative size",
        ),
        // C05: flush, then create twice in one transaction.
        (
            format!(
                "{PAIR}flush set ip t s\ncreate element ip t s {{ 1.2.3.4 . 1.2.4.1 }}\ncreate element ip t s {{ 1.2.3.4 . 1.2.4.1 }}\n"
            ),
            6,
            25,
            "File exists",
        ),
        // delete: a point inside a range (nft's cache), a deleted pipapo element, a hash key.
        (
            format!("{PORTS}add element ip t s {{ 10-20 }}\ndelete element ip t s {{ 10 }}\n"),
            5,
            25,
            "element does not exist",
        ),
        (
            format!(
                "{CONCAT}add element ip t s {{ 10.0.0.0/24 . 10-20 }}\ndelete element ip t s {{ 10.0.0.0/24 . 10-20 }}\ndelete element ip t s {{ 10.0.0.0/24 . 10-20 }}\n"
            ),
            6,
            25,
            "No such file or directory",
        ),
        (
            "table ip t {\nset s { type inet_service; }\n}\nadd element ip t s { 10 }\ndelete element ip t s { 11 }\n".to_string(),
            5,
            25,
            "No such file or directory",
        ),
        // size: the element past it, in a hash, rbtree and pipapo set.
        (
            "table ip t {\nset s { type inet_service; size 2; }\n}\nadd element ip t s { 10, 20, 30 }\n".to_string(),
            4,
            30,
            "Too many open files in system",
        ),
        (
            "table ip t {\nset s { type inet_service; flags interval; size 2; }\n}\nadd element ip t s { 10-20, 30-40, 50-60 }\n".to_string(),
            4,
            36,
            "Too many open files in system",
        ),
        (
            "table ip t {\nset s { type ipv4_addr . inet_service; flags interval; size 1; }\n}\nadd element ip t s { 10.0.0.1 . 22-25, 10.0.0.1 . 10-20 }\n".to_string(),
            4,
            40,
            "Too many open files in system",
        ),
    ];
    // rbtree: a range added and deleted earlier in the batch is still in the way of an
    // overlapping add (kernel 6.18: "File exists", which nft cannot place), and, when a set
    // declaration added it, of a `create` of the same range (refused at the range; also
    // `acceptance/rbtree-delete-then-create.nft` against the kernel).
    rows.push((
        format!("{PORTS}add element ip t s {{ 10-20 }}\ndelete element ip t s {{ 10-20 }}\nadd element ip t s {{ 12-14 }}\n"),
        6,
        22,
        "interval overlaps with an existing one",
    ));
    rows.push((
        "table ip t {\nset s { type inet_service; flags interval; elements = { 10-20 } }\n}\ndelete element ip t s { 10-20 }\ncreate element ip t s { 10-20 }\n".to_string(),
        5,
        25,
        "File exists",
    ));
    // An element timeout in a set without `flags timeout` (EINVAL).
    rows.push((
        "table ip t {\nset s { type ipv4_addr; elements = { 1.2.3.4 timeout 10s } }\n}\n"
            .to_string(),
        2,
        38,
        "Invalid argument",
    ));
    for (text, line, col, needle) in &rows {
        refused(text, *line, *col, needle);
    }
}

#[test]
fn delete_then_readd_in_one_batch() {
    // rbtree: the same range again is fine; pipapo and hash: the deleted key is free.
    let r = accepted(&format!(
        "{PORTS}add element ip t s {{ 10-20, 30-40 }}\ndelete element ip t s {{ 10-20 }}\nadd element ip t s {{ 10-20 }}\nadd element ip t s {{ 21-25 }}\n"
    ));
    assert_eq!(listed(&r), "elements = { 10-20, 21-25, 30-40 }");
    let r = accepted(&format!(
        "{CONCAT}add element ip t s {{ 10.0.0.0/24 . 10-20 }}\ndelete element ip t s {{ 10.0.0.0/24 . 10-20 }}\nadd element ip t s {{ 10.0.0.0/25 . 12-14 }}\ncreate element ip t s {{ 10.0.0.0/24 . 10-20 }}\n"
    ));
    assert_eq!(r.tables[0].sets[0].elements.len(), 2);
    accepted(
        "table ip t {\nset s { type inet_service; elements = { 10, 30 } }\n}\ndelete element ip t s { 10 }\ncreate element ip t s { 10 }\n",
    );
    // rbtree, kernel 6.18 with nft 1.0.6: a range that `add element` added and a later
    // command deleted is taken again by `create` (also
    // `acceptance/rbtree-add-delete-create.nft` against the kernel).
    let r = accepted(&format!(
        "{PORTS}add element ip t s {{ 10-20, 30-40 }}\ndelete element ip t s {{ 10-20 }}\ncreate element ip t s {{ 10-20 }}\n"
    ));
    assert_eq!(listed(&r), "elements = { 10-20, 30-40 }");
    // A range committed before and deleted is in the way of nothing.
    let base = accepted(&format!("{PORTS}add element ip t s {{ 10-20 }}\n"));
    for (batch, after) in [
        (
            "delete element ip t s { 10-20 }\ncreate element ip t s { 10-20 }\n",
            "elements = { 10-20 }",
        ),
        (
            "delete element ip t s { 10-20 }\nadd element ip t s { 12-14 }\n",
            "elements = { 12-14 }",
        ),
    ] {
        let r = wasp_ruleset::apply_batch(&base, batch, "b.nft").expect(batch);
        assert_eq!(listed(&r), after, "{batch}");
    }
}

#[test]
fn c04_flush_and_readd_in_another_order() {
    let mut text = String::from(CONCAT);
    for _ in 0..100 {
        text.push_str("add element ip t s { 10.0.0.1 . 22-25, 10.0.0.1 . 10-20 }\n");
        text.push_str("flush set ip t s\n");
        text.push_str("add element ip t s { 10.0.0.1 . 10-20, 10.0.0.1 . 22-25 }\n");
    }
    let r = accepted(&text);
    assert_eq!(r.tables[0].sets[0].elements.len(), 2);
    assert_eq!(
        listed(&r),
        "elements = { 10.0.0.1 . 10-20, 10.0.0.1 . 22-25 }"
    );
}

#[test]
fn c05_add_twice_create_after_flush() {
    // add twice: both succeed, one element.
    let r = accepted(&format!(
        "{PAIR}add element ip t s {{ 1.2.3.4 . 1.2.4.1, 1.2.4.1 . 1.2.3.4 }}\nadd element ip t s {{ 1.2.3.4 . 1.2.4.1, 1.2.4.1 . 1.2.3.4 }}\n"
    ));
    assert_eq!(r.tables[0].sets[0].elements.len(), 2);
    // flush then one create in the same transaction: the flush freed the key.
    let r = accepted(&format!(
        "{PAIR}flush set ip t s\ncreate element ip t s {{ 1.2.3.4 . 1.2.4.1 }}\n"
    ));
    assert_eq!(listed(&r), "elements = { 1.2.3.4 . 1.2.4.1 }");
    // create of an element already there.
    refused(
        &format!("{PAIR}create element ip t s {{ 1.2.3.4 . 1.2.4.1 }}\n"),
        4,
        25,
        "File exists",
    );
}

#[test]
fn c11_exact_duplicates_in_one_batch() {
    let r = accepted(
        "table ip t {\nset s { type ipv4_addr; flags interval; }\n}\n\
         add element ip t s { 1.0.1.0/24, 1.0.2.0/23, 1.0.4.0/22, 1.0.8.0/21, 1.0.16.0/20, 1.0.32.0/19, 1.0.1.0/24 }\n\
         add element ip t s { 1.0.1.0/24 }\n",
    );
    assert_eq!(r.tables[0].sets[0].elements.len(), 6);
}

#[test]
fn c14_range_with_same_start_and_end() {
    let r = accepted(
        "table ip t {\nset s { type inet_service; flags interval; elements = { 10, 30-30, 30, 35 } }\n}\n",
    );
    // nft -f then nft list set: `elements = { 10, 30, 35 }`.
    assert_eq!(listed(&r), "elements = { 10, 30, 35 }");
}

#[test]
fn c02_delete_single_key_then_readd() {
    let r = accepted(
        "table ip t {\nset s { type ipv4_addr . ipv4_addr; flags interval; }\n}\n\
         add element ip t s { 1.0.0.0 . 2.0.0.0 }\ndelete element ip t s { 1.0.0.0 . 2.0.0.0 }\n\
         add element ip t s { 1.0.0.0 . 2.0.0.0 }\n",
    );
    assert_eq!(listed(&r), "elements = { 1.0.0.0 . 2.0.0.0 }");
}

#[test]
fn c06_delete_one_of_many_keeps_the_others() {
    let mut text = String::from(
        "table ip t {\nset s { type ipv4_addr . inet_service . inet_proto; flags interval; }\n}\n",
    );
    for i in 1..=10 {
        for j in 1..=20 {
            text.push_str(&format!(
                "add element ip t s {{ 10.{i}.{j}.0/24 . {j}-{}0 . 6-17 }}\n",
                j + 1
            ));
        }
    }
    text.push_str("delete element ip t s { 10.3.7.0/24 . 7-80 . 6-17 }\n");
    let r = accepted(&text);
    let els = &r.tables[0].sets[0].elements;
    assert_eq!(els.len(), 199);
    // The same element cannot be deleted twice; its neighbours still can.
    text.push_str("delete element ip t s { 10.3.8.0/24 . 8-90 . 6-17 }\n");
    accepted(&text);
    text.push_str("delete element ip t s { 10.3.7.0/24 . 7-80 . 6-17 }\n");
    refused(&text, 206, 25, "No such file or directory");
}

#[test]
fn set_counter_listed_as_nft() {
    // `nft -f` then `nft list ruleset` (nft 1.0.6) printed exactly this.
    let r = accepted(
        "table netdev t {\nset a { type ipv4_addr; counter; elements = { 10.0.0.1, 10.0.0.2 counter packets 3 bytes 4 } }\n}\n",
    );
    assert_eq!(
        wasp_ruleset::print_ruleset(&r, false),
        "table netdev t {\n\tset a {\n\t\ttype ipv4_addr\n\t\tcounter\n\t\telements = { 10.0.0.1 counter packets 0 bytes 0, 10.0.0.2 counter packets 3 bytes 4 }\n\t}\n}\n"
    );
}

/// Anonymous sets and maps in rules: what `nft -c -f` refused (line 4, column) or accepted.
#[test]
fn anonymous_sets_as_nft() {
    let rule = |r: &str| {
        format!(
            "table netdev t {{\nchain c {{\ntype filter hook ingress device \"eth0\" priority 0;\n{r}\n}}\n}}\n"
        )
    };
    let refused_rows = [
        (
            "udp dport vmap { 10-20 : accept, 15-30 : drop }",
            34,
            "conflicting intervals specified",
        ),
        (
            "ip saddr . udp dport vmap { 10.0.0.0/8 . 10-20 : accept, 10.0.0.0/8 . 10-20 : drop }",
            58,
            "File exists",
        ),
        (
            "ip saddr . udp dport { 10.0.0.0/8 . 10-20, 10.1.0.0/16 . 15-30 } accept",
            44,
            "File exists",
        ),
        (
            "udp dport vmap { 10 : accept, 10 : drop }",
            31,
            "File exists",
        ),
    ];
    for (r, col, needle) in refused_rows {
        refused(&rule(r), 4, col, needle);
    }
    for r in [
        "udp dport vmap { 10-20 : accept, 10-20 : accept }",
        "udp dport vmap { 10 : accept, 10 : accept }",
        "ip saddr . udp dport { 10.0.0.0/8 . 10-20, 10.0.0.0/8 . 10-20 } accept",
        // Less specific than an older element: accepted (pipapo).
        "ip saddr . udp dport { 10.0.0.0/8 . 10-20, 10.0.0.0/8 . 5-25 } accept",
        // A single-field set without data merges overlaps.
        "udp dport { 10-20, 15-30 } accept",
        "ip saddr . udp dport { 10.0.0.1 . 10, 10.0.0.1 . 10 } accept",
    ] {
        accepted(&rule(r));
    }
}

#[test]
fn data_maps_print_as_nft_lists_them() {
    // `nft -f` then `nft list ruleset` (nft 1.0.6) printed exactly this text.
    let text = "table netdev t {\n\tmap marks {\n\t\ttype ipv4_addr : mark\n\t\tflags interval\n\t\telements = { 10.0.0.0/8 : 0x00000001, 192.168.0.0/16 : 0x00000002 }\n\t}\n\n\tchain c {\n\t\ttype filter hook ingress device \"eth0\" priority filter; policy accept;\n\t\tmeta mark set ip saddr map @marks\n\t\tmeta mark set udp dport map { 10-20 : 0x00000003, 53 : 0x00000004 } accept\n\t\tmeta mark 0x00000001 drop\n\t}\n}\n";
    let r = accepted(text);
    assert_eq!(wasp_ruleset::print_ruleset(&r, false), text);
    // A map of marks is not a verdict map, and a set is not a map.
    refused(
        "table netdev t {\nset s { type ipv4_addr; }\nchain c {\nmeta mark set ip saddr map @s\n}\n}\n",
        4,
        28,
        "not a map of mark values",
    );
}

#[test]
fn typeof_map_listed_as_nft() {
    // `nft -f` then `nft list ruleset` (nft 1.0.6) printed exactly this text.
    let text = "table netdev t {\n\tmap m {\n\t\ttypeof ip saddr : meta mark\n\t\tflags interval\n\t\telements = { 10.0.0.0/8 : 0x00000001 }\n\t}\n\n\tchain c {\n\t\ttype filter hook ingress device \"eth0\" priority filter; policy accept;\n\t\tmeta mark set ip saddr map @m\n\t}\n}\n";
    assert_eq!(wasp_ruleset::print_ruleset(&accepted(text), false), text);
}

#[test]
fn listing_order_by_back_end() {
    // `nft list ruleset` after `nft -f` (nft 1.0.6 + kernel 6.18): pipapo lists in insertion
    // order, rbtree sorted.
    let r = accepted(
        "table ip t {\nset s { type ipv4_addr . inet_service; flags interval; elements = { 10.0.0.0/8 . 1-100, 0.0.0.0/1 . 5353, 5.0.0.0/8 . 7 } }\nset r { type ipv4_addr; flags interval; elements = { 10.0.0.0/8, 1.0.0.0/8, 5.0.0.0/8 } }\n}\n",
    );
    let text = wasp_ruleset::print_ruleset(&r, false);
    assert!(
        text.contains("elements = { 10.0.0.0/8 . 1-100,\n\t\t\t     0.0.0.0/1 . 5353,\n\t\t\t     5.0.0.0/8 . 7 }"),
        "{text}"
    );
    assert!(
        text.contains("elements = { 1.0.0.0/8, 5.0.0.0/8,\n\t\t\t     10.0.0.0/8 }"),
        "{text}"
    );
}

/// The catch-all element `*` (nft_setelem_catchall_insert): one per set, a second is "File
/// exists" under `create` or with other data; nft lists it last (checked with nft 1.0.6).
#[test]
fn catch_all_element() {
    let decl = "table ip t {\nset s { type ipv4_addr; }\nmap m { type ipv4_addr : mark; }\n}\n";
    refused(
        &format!("{decl}add element ip t s {{ * }}\ncreate element ip t s {{ * }}\n"),
        6,
        25,
        "File exists",
    );
    refused(
        &format!("{decl}add element ip t m {{ * : 1 }}\nadd element ip t m {{ * : 2 }}\n"),
        6,
        22,
        "File exists",
    );
    let r = accepted(&format!(
        "{decl}add element ip t s {{ 192.168.3.5, *, 1.2.3.4 }}\nadd element ip t s {{ * }}\n"
    ));
    assert_eq!(listed(&r), "elements = { 1.2.3.4, 192.168.3.5, * }");
    assert_eq!(r.tables[0].sets[0].elements.len(), 3);
    let r = accepted(
        "table ip t {\nset s { type ipv4_addr . inet_service; flags interval; elements = { *, 10.0.0.1 . 10-20 } }\n}\n",
    );
    assert_eq!(listed(&r), "elements = { 10.0.0.1 . 10-20, * }");
}

/// `auto-merge` on a single-field interval set, as nft 1.0.6 with kernel 6.18 lists it after
/// `nft -f` of each file (and after separate `nft` commands for the batches, which make the
/// set's elements older than the new ones): overlapping and adjacent elements become one
/// range, listed as a prefix when it is one; the merged range carries what the lowest element
/// of the batch in it carries; a range inside an element already held changes nothing.
#[test]
fn auto_merge_merges_as_nft() {
    let set = |elems: &str| {
        format!(
            "table ip t {{\nset s {{ type ipv4_addr; flags interval; auto-merge; elements = {{ {elems} }} }}\n}}\n"
        )
    };
    // The elements between `elements = {` and `}`.
    let inner = |l: String| {
        l.trim_start_matches("elements = { ")
            .trim_end_matches(" }")
            .to_string()
    };
    let one = |text: &str| inner(listed(&accepted(text)));
    // In the declaration.
    assert_eq!(
        one(&set(
            "10.0.0.0/24, 10.0.1.0/24, 10.0.0.5, 10.0.3.1-10.0.3.9, 10.0.3.5-10.0.3.20"
        )),
        "10.0.0.0/23, 10.0.3.1-10.0.3.20"
    );
    assert_eq!(
        one(&set("10.0.1.0/24 comment \"b\", 10.0.0.0/24 comment \"a\"")),
        "10.0.0.0/23 comment \"a\""
    );
    // Later commands of the same file: the declared elements are of the batch too.
    let text = set("10.0.0.0/24 comment \"A\", 10.0.2.0/24 comment \"C\"")
        + "add element ip t s { 10.0.1.128/25 comment \"B2\", 10.0.1.0/25 comment \"B1\" }\n\
           add element ip t s { 10.0.0.7 }\nadd element ip t s { 10.9.0.0/16 }\n\
           create element ip t s { 10.9.1.1 }\n";
    assert_eq!(one(&text), "10.0.0.0-10.0.2.255 comment \"A\", 10.9.0.0/16");
    let ports = "table ip t {\nset s { type inet_service; flags interval; auto-merge; elements = { 1-5 } }\n}\n\
                 add element ip t s { 6-9 }\nadd element ip t s { 20 }\ndelete element ip t s { 20 }\n";
    assert_eq!(one(ports), "1-9");
    let ports = "table ip t {\nset s { type inet_service; flags interval; auto-merge; elements = { 1-10, 11, 12-20, 30, 25-35, 0-0 } }\n}\n";
    assert_eq!(one(ports), "0-20, 25-35");

    // Batches after the set's elements were committed: the new element's attributes win, an
    // element inside a held one is a no-op (even under `create`).
    let batch = |base: &str, cmds: &str| {
        let rs = wasp_ruleset::apply_batch(&accepted(base), cmds, "b.nft")
            .unwrap_or_else(|e| panic!("{cmds}: {e}"));
        inner(listed(&rs))
    };
    let base = set("10.0.0.0/24 comment \"A\", 10.0.2.0/24 comment \"C\"");
    assert_eq!(
        batch(&base, "add element ip t s { 10.0.1.0/24 comment \"B\" }\n"),
        "10.0.0.0-10.0.2.255 comment \"B\""
    );
    assert_eq!(
        batch(
            &base,
            "add element ip t s { 10.0.1.128/25 comment \"B2\", 10.0.1.0/25 comment \"B1\" }\n"
        ),
        "10.0.0.0-10.0.2.255 comment \"B1\""
    );
    let base = set("10.0.0.0/24 comment \"old\"");
    assert_eq!(
        batch(&base, "add element ip t s { 10.0.1.0/24 }\n"),
        "10.0.0.0/23"
    );
    assert_eq!(
        batch(&base, "add element ip t s { 10.0.0.7 }\n"),
        "10.0.0.0/24 comment \"old\""
    );
    assert_eq!(
        batch(&base, "create element ip t s { 10.0.0.5 }\n"),
        "10.0.0.0/24 comment \"old\""
    );
    assert_eq!(
        batch(
            &set("10.0.0.0/24"),
            "add element ip t s { 10.0.0.200-10.0.2.5 }\n"
        ),
        "10.0.0.0-10.0.2.5"
    );
    // A new range over a held element, with another new element inside it below the held
    // one (the new elements overlap each other): one range.
    let ports = "table inet t {\nset s { type inet_service; flags interval; auto-merge; elements = { 50 } }\n}\nadd element inet t s { 1-100, 20 }\n";
    assert_eq!(one(ports), "1-100");
    // `create` of an element the batch added is "File exists"; of one committed before, or
    // of a part of one, no error (above).
    refused(
        "table ip t {\nset s { type ipv4_addr; flags interval; auto-merge; }\n}\ncreate element ip t s { 10.0.0.1-10.0.0.5 }\ncreate element ip t s { 10.0.0.1-10.0.0.5 }\n",
        5,
        25,
        "File exists",
    );
    assert_eq!(
        batch(
            &set("10.0.0.0/24"),
            "create element ip t s { 10.0.0.0/24 }\n"
        ),
        "10.0.0.0/24"
    );
    // No separator after the flag.
    assert_eq!(
        one(
            "table ip t {\nset s { auto-merge type inet_service; flags interval; elements = { 1-5, 6 } }\n}\n"
        ),
        "1-6"
    );
    // No split on delete: a part of a merged range is not an element.
    let rs = wasp_ruleset::apply_batch(
        &accepted(&set("10.0.0.0/23")),
        "delete element ip t s { 10.0.0.128/25 }\n",
        "b.nft",
    );
    assert!(
        rs.unwrap_err()
            .to_string()
            .contains("element does not exist"),
        "delete of a part"
    );
    // Timeouts and counters: the merged element takes the lowest one's.
    let text = "table ip t {\nset s { type ipv4_addr; flags interval,timeout; counter; auto-merge; elements = { 10.0.0.0/24 timeout 1h, 10.0.1.0/24 timeout 2h } }\n}\n";
    assert_eq!(
        one(text),
        "10.0.0.0/23 counter packets 0 bytes 0 timeout 1h"
    );

    // Without the flag, the same elements are refused; concatenations are not merged.
    refused(
        "table ip t {\nset s { type ipv4_addr; flags interval; elements = { 10.0.0.0/24, 10.0.0.5 } }\n}\n",
        2,
        67,
        "conflicting intervals specified",
    );
    let concat = "table ip t {\nset s { type ipv4_addr . inet_service; flags interval; auto-merge; elements = { 10.0.0.0/24 . 80, 10.0.1.0/24 . 80 } }\n}\n";
    assert_eq!(one(concat), "10.0.0.0/24 . 80, 10.0.1.0/24 . 80");
    // Where nft refuses the flag.
    refused(
        "table ip t {\nset s { type ipv4_addr; auto-merge; }\n}\n",
        2,
        5,
        "auto-merge only works with interval sets",
    );
    refused(
        "table ip t {\nmap m { type ipv4_addr : mark; flags interval; auto-merge; }\n}\n",
        2,
        48,
        "syntax error, unexpected auto-merge",
    );
}

/// nft resolves a `"..."` string by the data type wherever a value goes, and takes empty
/// places in an element list; listed as nft 1.0.6 lists the same file (kernel 6.18).
#[test]
fn quoted_values_and_empty_places_as_nft() {
    let text = "table ip t {\nset s { type ipv4_addr; elements = { 10.0.0.1,, 10.0.0.2, \"10.0.0.3\" } }\nchain c {\nip saddr \"10.1.1.1\" accept\nip saddr { 10.2.2.2,,, \"10.2.2.3\" } accept\ntcp dport \"ssh\" accept\nct state \"established\" accept\n}\n}\n";
    let printed = wasp_ruleset::print_ruleset(&accepted(text), false);
    assert_eq!(
        printed,
        "table ip t {\n\tset s {\n\t\ttype ipv4_addr\n\t\telements = { 10.0.0.1, 10.0.0.2,\n\t\t\t     10.0.0.3 }\n\t}\n\n\tchain c {\n\t\tip saddr 10.1.1.1 accept\n\t\tip saddr { 10.2.2.2, 10.2.2.3 } accept\n\t\ttcp dport 22 accept\n\t\tct state established accept\n\t}\n}\n"
    );
    // A string is one value: no prefix or range inside it (nft: "Could not resolve hostname").
    refused(
        "table ip t {\nchain c {\nip saddr \"10.0.0.0/8\" accept\n}\n}\n",
        3,
        10,
        "expected an IPv4 address",
    );
    // A leading comma is not an empty place (nft: "syntax error, unexpected comma").
    refused(
        "table ip t {\nchain c {\nip saddr { ,10.2.2.2 } accept\n}\n}\n",
        3,
        12,
        "",
    );
}

/// `destroy element` deletes what the set holds and skips what it does not (the kernel's
/// NFT_MSG_DESTROYSETELEM, which nft sends from 1.0.8; 1.0.6 has no `destroy`), on every
/// back-end; `delete element` of the same is refused.
#[test]
fn destroy_element_skips_missing_elements() {
    for (decl, held, other, missing) in [
        ("type ipv4_addr", "10.0.0.1", "10.0.5.5", "10.0.0.9"),
        (
            "type ipv4_addr; flags interval",
            "10.0.0.0/24",
            "10.0.5.5",
            "10.1.0.0/24",
        ),
        (
            "type ipv4_addr . inet_service; flags interval",
            "10.0.0.0/24 . 80",
            "10.0.5.5 . 80",
            "10.1.0.0/24 . 80",
        ),
    ] {
        let base = accepted(&format!(
            "table ip t {{\nset s {{ {decl}; elements = {{ {held}, {other} }} }}\n}}\n"
        ));
        let rs = wasp_ruleset::apply_batch(
            &base,
            &format!("destroy element ip t s {{ {missing}, {held} }}\n"),
            "b.nft",
        )
        .unwrap_or_else(|e| panic!("{decl}: {e}"));
        let left = listed(&rs);
        assert_eq!(left, format!("elements = {{ {other} }}"), "{decl}");
        let e = wasp_ruleset::apply_batch(
            &base,
            &format!("delete element ip t s {{ {missing} }}\n"),
            "b.nft",
        );
        assert!(e.is_err(), "{decl}: delete of a missing element");
    }
}
