//! The samples live: each sample's `live.sh` builds its network namespaces and veth pairs, runs
//! this build's `wasp run` between a client and a server, sends real traffic and exits 0 only
//! when every packet ended as the sample's README says (the script removes everything it made,
//! also on failure). Needs root (CI runs as root); without it each test says so and passes
//! nothing off as run.

use std::path::PathBuf;
use std::process::Command;

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"0\n"))
}

/// Run `samples/<name>/live.sh` with this build's wasp; its exit status and output.
fn live(name: &str) -> Option<(i32, String)> {
    if !is_root() {
        eprintln!("skipped: samples/{name}/live.sh needs root (network namespaces)");
        return None;
    }
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../samples")
        .join(name)
        .join("live.sh");
    let o = Command::new("bash")
        .arg(&script)
        .env("WASP", env!("CARGO_BIN_EXE_wasp"))
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", script.display()));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    Some((o.status.code().unwrap_or(-1), text))
}

/// The line of `out` that starts with `start` (spaces squeezed), or a panic that shows `out`.
fn line<'a>(out: &'a str, start: &str) -> &'a str {
    out.lines()
        .find(|l| squeeze(l).starts_with(start))
        .unwrap_or_else(|| panic!("no line starting {start:?} in:\n{out}"))
}

fn squeeze(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[test]
fn firewall_live() {
    let Some((code, out)) = live("firewall") else {
        return;
    };
    assert_eq!(code, 0, "{out}");
    // expect, test, observed: what passed and what the firewall dropped, as the README says.
    for (start, observed) in [
        ("passed ping staff -> server 172.16.238.131", "passed"),
        ("passed tcp staff -> server :22 (ssh)", "passed"),
        ("dropped tcp staff -> server :25 (smtp)", "dropped"),
        (
            "passed udp staff -> resolver 172.16.238.2 :53 (dns)",
            "passed",
        ),
        ("passed tcp staff -> 198.51.100.80 :443 (https)", "passed"),
        (
            "dropped udp staff -> server :17500 (dropbox lan sync)",
            "dropped",
        ),
        (
            "dropped ping staff -> 203.0.113.66 (blocklisted)",
            "dropped",
        ),
        (
            "dropped tcp 198.51.100.80 -> staff :22 (inbound connection)",
            "dropped",
        ),
    ] {
        let l = squeeze(line(&out, start));
        assert!(
            l[start.len()..].trim_start().starts_with(observed),
            "{l}\n{out}"
        );
        assert!(!l.contains("UNEXPECTED"), "{l}");
    }
    // The counters of the rules that dropped them, from `wasp ctl list ruleset`.
    let blocked = line(&out, "ip daddr @blocklist counter packets");
    assert!(!blocked.contains("packets 0 "), "{blocked}");
    assert!(
        out.contains("verdict"),
        "wasp ctl stats names the drops: {out}"
    );
    assert!(
        out.contains("OK: every packet ended as the README says"),
        "{out}"
    );
}

#[test]
fn geneve_gateway_live() {
    let Some((code, out)) = live("geneve-gateway") else {
        return;
    };
    assert_eq!(code, 0, "{out}");
    for (start, rest) in [
        // The option's data rewritten in place: tag 12 -> 13.
        (
            "1 Geneve VNI 10, critical option tag 12",
            "passed geneve to 198.51.100.2 vni 10 opt 0000:80:0000000d inner frame 1",
        ),
        ("2 Geneve VNI 10, critical option tag 14", "dropped"),
        ("3 Geneve VNI 11, no options", "passed inner frame 3"),
        // Our option appended after Google's.
        (
            "4 Geneve, Google options 0132:1 and 0132:3",
            "passed geneve to 198.51.100.2 vni 0 opt 0132:01:00000001",
        ),
        (
            "6 Geneve VNI 0x1389 over an IPv6 underlay",
            "passed inner frame 6",
        ),
        ("7 Geneve VNI 100, option class 0xff72", "dropped"),
        ("12 untagged IPv4 UDP", "dropped"),
    ] {
        let l = squeeze(line(&out, start));
        assert!(
            l[start.len()..].trim_start().starts_with(rest),
            "{l}\n{out}"
        );
        assert!(!l.contains("UNEXPECTED"), "{l}");
    }
    assert!(
        squeeze(line(&out, "4 Geneve, Google")).contains("opt 0102:80:00880022 inner frame 4"),
        "{out}"
    );
    // Seven frames passed (the two VLAN access cases included), and the wire table's counter
    // says seven.
    assert!(squeeze(&out).contains("counter packets 7 bytes"), "{out}");
    assert!(
        out.contains("OK: every frame ended as the README says"),
        "{out}"
    );
}

#[test]
fn geneve_flowtable_live() {
    let Some((code, out)) = live("geneve-gateway/flowtable") else {
        return;
    };
    assert_eq!(code, 0, "{out}");
    for check in [
        "ok the server sees the overlay address (no NAT)",
        "ok every byte arrived once (20000)",
        "ok the flow came in through the tunnel (vni 11)",
        "ok both directions through the fast path",
        "ok flow add then flow del (fin) on the monitor",
        "ok no flow after the close",
        "ok the peer VTEP decapsulated every frame wasp sent",
    ] {
        line(&out, check);
    }
    assert!(!out.contains("FAIL"), "{out}");
}

#[test]
fn idle_gateway_live() {
    let Some((code, out)) = live("idle-gateway") else {
        return;
    };
    assert_eq!(code, 0, "{out}");
    // The events as `wasp ctl monitor` printed them.
    for label in ["bob", "carol", "branch"] {
        let event = format!("idletimer {label} expired");
        assert!(
            out.lines()
                .any(|l| l.contains(&event) && !l.contains("time(s)")),
            "no monitor event {event:?} in:\n{out}"
        );
        let count = squeeze(line(&out, &format!("idletimer {label} expired ")));
        assert_eq!(
            count,
            format!("idletimer {label} expired 1 time(s)"),
            "{out}"
        );
    }
    assert_eq!(
        squeeze(line(&out, "idletimer alice expired ")),
        "idletimer alice expired 0 time(s)",
        "{out}"
    );
    // The policy dropped the sender that is nobody's subscriber.
    assert!(
        squeeze(line(&out, "10.9.0.9")).starts_with("10.9.0.9 sent 2, arrived 0"),
        "{out}"
    );
    assert!(out.contains("OK: the quiet subscribers'"), "{out}");
}
