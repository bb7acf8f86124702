//! The printer and the handles against the real kernel: each ruleset in `tests/cases` is loaded
//! with `nft -f` into a fresh network namespace and `nft list ruleset` / `nft -a list ruleset`
//! must equal `print_ruleset` byte for byte. Skips (with a message) without root or `nft`.

use std::path::{Path, PathBuf};
use std::process::Command;

fn cases() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cases");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "nft"))
        .collect();
    v.sort();
    v
}

fn kernel_available() -> bool {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    let nft = Command::new("nft")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !root || !nft {
        eprintln!("SKIP: kernel comparison needs root and nft (root={root}, nft={nft})");
    }
    root && nft
}

/// A network namespace that is deleted when dropped.
struct Netns(String);

impl Netns {
    fn new(tag: &str) -> Netns {
        let name = format!("wasp-ruleset-t{}-{tag}", std::process::id());
        let ok = Command::new("ip")
            .args(["netns", "add", &name])
            .status()
            .unwrap()
            .success();
        assert!(ok, "ip netns add {name}");
        let ns = Netns(name);
        // netdev base chains need their devices to exist.
        ns.run(
            "ip",
            &[
                "link", "add", "eth0", "type", "veth", "peer", "name", "eth1",
            ],
        );
        ns
    }

    fn run(&self, cmd: &str, args: &[&str]) -> String {
        let out = Command::new("ip")
            .args(["netns", "exec", &self.0, cmd])
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{cmd} {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

/// Drop the `expires` times the kernel counts down (they depend on when the listing ran).
fn strip_expires(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find(" expires ") {
        out.push_str(&rest[..i]);
        let after = &rest[i + " expires ".len()..];
        let end = after
            .find(|c: char| !c.is_ascii_alphanumeric())
            .unwrap_or(after.len());
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

#[test]
fn printer_and_handles_match_the_kernel() {
    if !kernel_available() {
        return;
    }
    let cases = cases();
    assert!(cases.len() >= 6, "test cases missing");
    for (i, case) in cases.iter().enumerate() {
        let ruleset = wasp_ruleset::parse_file(case).unwrap_or_else(|e| panic!("{e}"));
        let ns = Netns::new(&i.to_string());
        let dir = case.parent().unwrap().to_str().unwrap();
        ns.run("nft", &["-I", dir, "-f", case.to_str().unwrap()]);
        for handles in [false, true] {
            let args: &[&str] = if handles {
                &["-a", "list", "ruleset"]
            } else {
                &["list", "ruleset"]
            };
            let kernel = strip_expires(&ns.run("nft", args));
            let ours = wasp_ruleset::print_ruleset(&ruleset, handles);
            assert_eq!(
                kernel,
                ours,
                "{} (handles: {handles}) differs from the kernel",
                case.display()
            );
        }
    }
}

#[test]
fn printed_rulesets_are_accepted_by_nft() {
    if !kernel_available() {
        return;
    }
    for case in cases() {
        let ruleset = wasp_ruleset::parse_file(&case).unwrap();
        let text = wasp_ruleset::print_ruleset(&ruleset, false);
        let tmp = std::env::temp_dir().join(format!(
            "wasp-ruleset-{}-{}",
            std::process::id(),
            case.file_name().unwrap().to_string_lossy()
        ));
        std::fs::write(&tmp, &text).unwrap();
        let ns = Netns::new("c");
        ns.run("nft", &["-c", "-f", tmp.to_str().unwrap()]);
        let _ = std::fs::remove_file(&tmp);
    }
}
