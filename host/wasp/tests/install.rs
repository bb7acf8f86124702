//! wasp installed as a user installs it, and run with the build directory out of reach:
//!
//! - the binary alone, laid out as `cargo install --path host/wasp --root PREFIX` lays it
//!   out (`PREFIX/bin/wasp`; the test copies the built binary: a release build for `cargo
//!   install` would take longer than CI allows);
//! - the Debian package's files: every asset of `[package.metadata.deb]` in
//!   `host/wasp/Cargo.toml` and its systemd unit, staged into a root where dpkg would unpack
//!   them, the generated ones (completions, man pages) made by `packaging/build-deb.sh
//!   --assets` with the built binary.
//!
//! Each runs `wasp replay` of the samples (`firewall`; `geneve-gateway` and `idle-gateway`,
//! whose rulesets use the geneve and idletimer plugins; every `counter` is the counter
//! plugin) from another working directory, in a mount namespace where the target directory
//! (and so the build's plugin directory, `wasp_guests::plugin_dir()`) is covered by an empty
//! tmpfs, and must give the summary, verdicts and output captures of the build's binary run
//! from the checkout: the plugins came from inside the binary. Without a mount namespace (not
//! root) the runs see the target directory, and the test says so; `wasp plugin list` must
//! still say `embedded` for each bundled plugin.
//!
//! Also: the search order (`WASP_PLUGIN_PATH`, then `plugins/` beside the executable, then
//! the embedded copy); the package's unit through `systemd-analyze verify` (when it exists;
//! the Debian package `systemd`), its man pages (wasp-ctl(1) lists ctl's command words) and
//! completions; and, as root with `ip`, the default `/etc/wasp/wasp.nft` running live in a
//! network namespace as the unit runs it (`Type=notify`: READY=1; `ExecReload`'s SIGHUP:
//! RELOADING=1 then READY=1; SIGTERM: STOPPING=1, a clean stop).

mod common;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::{repo, text};

/// The bundled plugins, as `wasp plugin list` names them.
const BUNDLED: [&str; 4] = ["counter", "geneve", "idletimer", "offload_table"];

/// The built binary.
fn built() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_wasp"))
}

/// The repository, without `..` (the installed runs' paths are compared with it).
fn checkout() -> PathBuf {
    repo().canonicalize().unwrap()
}

/// The directory to hide: the nearest common ancestor of the built binary and the build's
/// plugin directory (the target directory).
fn build_dir() -> PathBuf {
    let bin = built().canonicalize().unwrap();
    let plugins = wasp_guests::plugin_dir();
    plugins
        .ancestors()
        .find(|d| bin.starts_with(d))
        .expect("the binary and the plugins share a target directory")
        .to_path_buf()
}

/// Whether the installed runs can have the build directory hidden: `Ok(dir)` when a mount
/// namespace can be made (root), `Err(why)` otherwise.
fn hiding() -> &'static Result<PathBuf, String> {
    static HIDE: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    HIDE.get_or_init(|| {
        let dir = build_dir();
        if dir.parent().is_none() || checkout().starts_with(&dir) {
            return Err(format!(
                "the build directory {} holds the checkout",
                dir.display()
            ));
        }
        match Command::new("unshare")
            .args(["--mount", "--propagation", "private", "--", "true"])
            .output()
        {
            Ok(o) if o.status.success() => Ok(dir),
            Ok(o) => Err(format!(
                "unshare --mount: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            )),
            Err(e) => Err(format!("unshare: {e}")),
        }
    })
}

/// Covers `$1` with an empty tmpfs, checks that the build's plugin directory `$2` is gone,
/// then runs the rest.
const HIDE_SCRIPT: &str = r#"set -e
t=$1; p=$2; shift 2
mount -t tmpfs wasp-build-hidden "$t"
if [ -e "$p" ]; then echo "the build's plugins are still at $p" >&2; exit 99; fi
exec "$@""#;

/// Run an installed `bin` with `args` in `cwd`, with `WASP_PLUGIN_PATH` unset (then `env`
/// set) and the build directory hidden when [`hiding`] allows.
fn installed(bin: &Path, cwd: &Path, args: &[&str], env: &[(&str, &OsStr)]) -> Output {
    let plugin_dir = wasp_guests::plugin_dir();
    let mut c = match hiding() {
        Ok(dir) => {
            let mut c = Command::new("unshare");
            c.args(["--mount", "--propagation", "private", "--", "sh", "-c"])
                .arg(HIDE_SCRIPT)
                .arg("sh")
                .arg(dir)
                .arg(&plugin_dir)
                .arg(bin);
            c
        }
        Err(why) => {
            eprintln!(
                "note: the build directory is not hidden from the installed wasp ({why}); \
                 `wasp plugin list` still has to say `embedded`"
            );
            Command::new(bin)
        }
    };
    c.args(args).current_dir(cwd).env_remove("WASP_PLUGIN_PATH");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("run the installed wasp")
}

/// `wasp` as `cargo install --root PREFIX` leaves it: `PREFIX/bin/wasp`.
fn install_binary(prefix: &Path) -> PathBuf {
    let bin = prefix.join("bin/wasp");
    std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
    std::fs::copy(built(), &bin).unwrap();
    bin
}

/// The files of `dir` (recursively) with their bytes, by path relative to `dir`, sorted.
fn files(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().to_path_buf();
                out.push((rel, std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// `wasp replay samples/NAME` by the installed `bin` from another directory gives what the
/// build's binary gives from the checkout: summary (stdout), notes and log lines (stderr),
/// verdict lines, output captures.
fn same_replay(bin: &Path, sample: &str, tmp: &Path) {
    let repo = checkout();
    let run_dir = |who: &str| {
        let d = tmp.join(format!("{who}-{sample}"));
        std::fs::create_dir_all(&d).unwrap();
        d
    };
    let (reference, elsewhere) = (run_dir("checkout"), run_dir("installed"));
    let out_arg = |d: &Path| d.join("out").to_str().unwrap().to_string();
    let v_arg = |d: &Path| d.join("verdicts.txt").to_str().unwrap().to_string();
    let rel = format!("samples/{sample}");
    let want = Command::new(built())
        .args(["replay", &rel, "--out", &out_arg(&reference)])
        .args(["--verdicts", &v_arg(&reference)])
        .current_dir(&repo)
        .output()
        .unwrap();
    let (want_out, want_err) = text(&want);
    assert!(
        want.status.success(),
        "{sample} from the checkout: {want_err}"
    );
    let abs = repo.join(&rel);
    let got = installed(
        bin,
        &elsewhere,
        &[
            "replay",
            abs.to_str().unwrap(),
            "--out",
            &out_arg(&elsewhere),
            "--verdicts",
            &v_arg(&elsewhere),
        ],
        &[],
    );
    let (got_out, got_err) = text(&got);
    assert!(got.status.success(), "{sample} installed: {got_err}");
    // The one difference: the sample's path as given (absolute here, relative there).
    let unroot = |s: &str| s.replace(&format!("{}/", repo.display()), "");
    assert_eq!(unroot(&got_out), want_out, "{sample}: the summary");
    assert_eq!(unroot(&got_err), want_err, "{sample}: notes and log lines");
    let verdicts = std::fs::read_to_string(elsewhere.join("verdicts.txt")).unwrap();
    assert!(verdicts.lines().count() > 10, "{sample}: {verdicts}");
    assert_eq!(
        verdicts,
        std::fs::read_to_string(reference.join("verdicts.txt")).unwrap(),
        "{sample}: the verdicts"
    );
    let (got_files, want_files) = (files(&elsewhere.join("out")), files(&reference.join("out")));
    assert!(!want_files.is_empty());
    assert!(
        got_files == want_files,
        "{sample}: the output captures differ"
    );
}

/// `wasp plugin list`'s line for `name`.
fn list_line(list: &str, name: &str) -> String {
    list.lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("no line for {name}:\n{list}"))
        .to_string()
}

#[test]
fn the_binary_alone_runs_every_sample_from_anywhere() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = install_binary(&tmp.path().join("prefix"));
    let elsewhere = tmp.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let out = installed(&bin, &elsewhere, &["plugin", "list"], &[]);
    let (list, err) = text(&out);
    assert!(out.status.success(), "{err}");
    for name in BUNDLED {
        assert!(
            list_line(&list, name).ends_with("  embedded"),
            "{name}:\n{list}"
        );
    }
    assert!(
        list.contains(&format!(
            "search order: WASP_PLUGIN_PATH (not set), {}, /usr/lib/wasp/plugins, embedded",
            bin.parent().unwrap().join("plugins").display()
        )),
        "{list}"
    );
    for sample in ["firewall", "geneve-gateway", "idle-gateway"] {
        same_replay(&bin, sample, tmp.path());
    }
}

#[test]
fn override_directories_come_before_the_embedded_plugins() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = install_binary(&tmp.path().join("prefix"));
    let beside = bin.parent().unwrap().join("plugins");
    std::fs::create_dir(&beside).unwrap();
    let gateway = checkout().join("samples/geneve-gateway/gateway.nft");
    let gateway = gateway.to_str().unwrap();
    let cwd = tmp.path();

    // A broken geneve beside the executable is used, and refused naming the file: the
    // search does not fall back past it.
    let broken = beside.join("geneve.wasm");
    std::fs::write(&broken, b"not a component").unwrap();
    let out = installed(&bin, cwd, &["check", gateway], &[]);
    let (_, err) = text(&out);
    assert!(!out.status.success());
    assert!(
        err.contains(&format!(
            "plugin `geneve`: {}: not a valid WebAssembly component",
            broken.display()
        )),
        "{err}"
    );

    // WASP_PLUGIN_PATH comes first: a good geneve there wins over the broken one.
    let env_dir = tmp.path().join("env-plugins");
    std::fs::create_dir(&env_dir).unwrap();
    std::fs::copy(wasp_guests::plugin("geneve"), env_dir.join("geneve.wasm")).unwrap();
    let nothing = tmp.path().join("nothing-here");
    let env = [("WASP_PLUGIN_PATH", nothing.as_os_str())];
    let path = std::env::join_paths([nothing.clone(), env_dir.clone()]).unwrap();
    let env_both = [("WASP_PLUGIN_PATH", path.as_os_str())];
    let out = installed(&bin, cwd, &["check", gateway], &env_both);
    assert!(out.status.success(), "{}", text(&out).1);
    let out = installed(&bin, cwd, &["plugin", "list"], &env_both);
    let (list, _) = text(&out);
    assert!(
        list_line(&list, "geneve").ends_with(&format!(
            "{} (WASP_PLUGIN_PATH)",
            env_dir.join("geneve.wasm").display()
        )),
        "{list}"
    );
    assert!(
        list_line(&list, "counter").ends_with("  embedded"),
        "{list}"
    );
    // A WASP_PLUGIN_PATH without the file: the one beside the executable again.
    let out = installed(&bin, cwd, &["check", gateway], &env);
    assert!(!out.status.success());

    // Every `counter` goes through the same search.
    std::fs::remove_file(&broken).unwrap();
    std::fs::write(beside.join("counter.wasm"), b"not a component").unwrap();
    let fw = checkout().join("samples/firewall");
    let out = installed(
        &bin,
        cwd,
        &["replay", fw.to_str().unwrap(), "--out", "o"],
        &[],
    );
    let (_, err) = text(&out);
    assert!(!out.status.success());
    assert!(
        err.contains("the bundled counter plugin cannot be loaded: ")
            && err.contains(&beside.join("counter.wasm").display().to_string()),
        "{err}"
    );
    std::fs::remove_file(beside.join("counter.wasm")).unwrap();
    let out = installed(&bin, cwd, &["check", gateway], &[]);
    assert!(out.status.success(), "{}", text(&out).1);
}

/// The package's files staged into `root` (see the module docs): returns the staged paths
/// (relative to `root`). The binary is the built one, the generated assets are made by
/// `packaging/build-deb.sh --assets`.
fn stage_package(root: &Path, generated: &Path) -> Vec<PathBuf> {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest: toml::Value =
        toml::from_str(&std::fs::read_to_string(manifest_dir.join("Cargo.toml")).unwrap()).unwrap();
    let deb = &manifest["package"]["metadata"]["deb"];
    let gen_out = Command::new("bash")
        .arg(checkout().join("packaging/build-deb.sh"))
        .arg("--assets")
        .arg(built())
        .arg(generated)
        .output()
        .unwrap();
    assert!(gen_out.status.success(), "{}", text(&gen_out).1);
    // cargo-deb's sources: `target/release/X` is the target directory's X (the binary, or
    // what build-deb.sh generated into target/release/packaging/); others are relative to
    // the package's directory. A `*` in the file name is a glob.
    let sources = |src: &str| -> Vec<PathBuf> {
        let path = match src.strip_prefix("target/release/") {
            Some("wasp") => return vec![built()],
            Some(rest) => generated.join(rest.strip_prefix("packaging/").expect(rest)),
            None => manifest_dir.join(src),
        };
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        let Some((pre, post)) = name.split_once('*') else {
            return vec![path];
        };
        let mut found: Vec<PathBuf> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                let n = p.file_name().unwrap().to_str().unwrap();
                n.starts_with(pre) && n.ends_with(post)
            })
            .collect();
        found.sort();
        found
    };
    let mut staged = Vec::new();
    let mut put = |from: &Path, dest: &str, mode: u32| {
        let to = if dest.ends_with('/') {
            root.join(dest).join(from.file_name().unwrap())
        } else {
            root.join(dest)
        };
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(from, &to).unwrap_or_else(|e| panic!("{}: {e}", from.display()));
        let mut perm = std::fs::metadata(&to).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perm, mode);
        std::fs::set_permissions(&to, perm).unwrap();
        staged.push(to.strip_prefix(root).unwrap().to_path_buf());
    };
    for a in deb["assets"].as_array().unwrap() {
        let a = a.as_array().unwrap();
        let (src, dest, mode) = (
            a[0].as_str().unwrap(),
            a[1].as_str().unwrap(),
            u32::from_str_radix(a[2].as_str().unwrap(), 8).unwrap(),
        );
        let found = sources(src);
        assert!(!found.is_empty(), "asset {src}: no such file");
        for f in found {
            assert!(f.is_file(), "asset {src}: {} is missing", f.display());
            put(&f, dest, mode);
        }
    }
    // systemd-units: the unit `wasp.service` of `unit-scripts`, installed where cargo-deb
    // puts units.
    let units = deb["systemd-units"]["unit-scripts"].as_str().unwrap();
    put(
        &manifest_dir.join(units).join("wasp.service"),
        "usr/lib/systemd/system/",
        0o644,
    );
    for conf in deb["conf-files"].as_array().unwrap() {
        let conf = conf.as_str().unwrap().trim_start_matches('/');
        assert!(root.join(conf).is_file(), "conffile {conf} is not an asset");
    }
    staged
}

#[test]
fn the_debian_package_layout_works() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let staged = stage_package(&root, &tmp.path().join("generated"));
    for want in [
        "usr/bin/wasp",
        "etc/wasp/wasp.nft",
        "usr/lib/systemd/system/wasp.service",
        "usr/share/bash-completion/completions/wasp",
        "usr/share/zsh/vendor-completions/_wasp",
        "usr/share/fish/vendor_completions.d/wasp.fish",
        "usr/share/man/man1/wasp.1.gz",
        "usr/share/man/man1/wasp-run.1.gz",
        "usr/share/man/man1/wasp-ctl.1.gz",
        "usr/share/man/man1/wasp-plugin-list.1.gz",
        "usr/share/man/man1/wasp-plugin-new.1.gz",
    ] {
        assert!(staged.contains(&PathBuf::from(want)), "{want}: {staged:?}");
    }
    assert!(
        !staged
            .iter()
            .any(|p| p.extension() == Some(OsStr::new("wasm"))),
        "the plugins are in the binary, the package has none: {staged:?}"
    );
    let bin = root.join("usr/bin/wasp");
    let cwd = tmp.path();

    // The default configuration loads.
    let conf = root.join("etc/wasp/wasp.nft");
    let out = installed(&bin, cwd, &["check", conf.to_str().unwrap()], &[]);
    assert!(out.status.success(), "{}", text(&out).1);
    for sample in ["firewall", "geneve-gateway"] {
        same_replay(&bin, sample, tmp.path());
    }

    // Completions name the commands.
    for file in [
        "usr/share/bash-completion/completions/wasp",
        "usr/share/zsh/vendor-completions/_wasp",
        "usr/share/fish/vendor_completions.d/wasp.fish",
    ] {
        let script = std::fs::read_to_string(root.join(file)).unwrap();
        for word in ["replay", "ctl", "plugin", "completions", "ruleset"] {
            assert!(script.contains(word), "{file}: no {word}");
        }
    }

    // wasp-ctl(1) lists ctl's command words: each `...` item of `wasp ctl --help`'s
    // "Commands:" paragraph, the first two words of it.
    let ctl_help = {
        let out = Command::new(built())
            .args(["ctl", "--help"])
            .output()
            .unwrap();
        text(&out).0
    };
    let commands = ctl_help
        .lines()
        .find(|l| l.starts_with("Commands: "))
        .expect("wasp ctl --help has a Commands: paragraph");
    let words: Vec<String> = commands
        .split('`')
        .skip(1)
        .step_by(2)
        .map(|item| {
            item.split_whitespace()
                .take(2)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    assert!(words.len() > 10, "{words:?}");
    let roff = Command::new("gzip")
        .arg("-dc")
        .arg(root.join("usr/share/man/man1/wasp-ctl.1.gz"))
        .output()
        .unwrap();
    let roff = String::from_utf8(roff.stdout).unwrap().replace("\\-", "-");
    assert!(roff.contains(".TH wasp-ctl 1"), "{roff}");
    for w in &words {
        assert!(
            roff.contains(w.as_str()),
            "wasp-ctl(1) lacks `{w}`:\n{roff}"
        );
    }
    if Command::new("man").arg("--version").output().is_ok() {
        let page = Command::new("man")
            .arg("-l")
            .arg(root.join("usr/share/man/man1/wasp-ctl.1.gz"))
            .env("MANWIDTH", "4000")
            .env("LC_ALL", "C")
            .env("MANPAGER", "cat")
            .env("PAGER", "cat")
            .output()
            .unwrap();
        let page = String::from_utf8_lossy(&page.stdout);
        for w in &words {
            assert!(
                page.contains(w.as_str()),
                "man wasp-ctl lacks `{w}`:\n{page}"
            );
        }
    } else {
        eprintln!("note: no man(1) here: wasp-ctl(1) checked as roff only");
    }

    // The unit, as systemd reads it (its executables and man pages must exist: the staged
    // ones stand in for /usr/bin/wasp, /etc/wasp/wasp.nft and /usr/share/man).
    if Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!(
            "note: skipping `systemd-analyze verify` of wasp.service: no systemd-analyze here \
             (the Debian package systemd has it)"
        );
        return;
    }
    let unit = std::fs::read_to_string(root.join("usr/lib/systemd/system/wasp.service"))
        .unwrap()
        .replace("/usr/bin/wasp", bin.to_str().unwrap())
        .replace("/etc/wasp/wasp.nft", conf.to_str().unwrap());
    let unit_dir = tmp.path().join("unit");
    std::fs::create_dir(&unit_dir).unwrap();
    std::fs::write(unit_dir.join("wasp.service"), unit).unwrap();
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(unit_dir.join("wasp.service"))
        .env("MANPATH", root.join("usr/share/man"))
        .output()
        .unwrap();
    let (so, se) = text(&out);
    assert!(out.status.success(), "systemd-analyze verify: {so}{se}");
    // It exits 0 on what it ignores (an unknown key, a bad value): those are warnings here.
    assert_eq!(se.trim(), "", "systemd-analyze verify warns");
}

/// A network namespace, deleted on drop.
struct Netns(String);

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

#[test]
fn the_default_configuration_runs_live() {
    let root = Command::new("id").arg("-u").output().unwrap().stdout == b"0\n";
    let ip = Command::new("ip").arg("-V").output().is_ok();
    if !root || !ip {
        eprintln!("note: skipping the live run of packaging/wasp.nft: needs root and ip(8)");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ns = Netns(format!("waspinst{}", std::process::id()));
    let ok = |args: &[&str]| {
        let o = Command::new(args[0]).args(&args[1..]).output().unwrap();
        assert!(o.status.success(), "{args:?}: {}", text(&o).1);
    };
    ok(&["ip", "netns", "add", &ns.0]);
    ok(&["ip", "-n", &ns.0, "link", "set", "lo", "up"]);
    let socket = tmp.path().join("wasp.sock");
    let conf = checkout().join("packaging/wasp.nft");
    // systemd's side of Type=notify: a datagram socket named by NOTIFY_SOCKET.
    let notify_path = tmp.path().join("notify.sock");
    let notify = std::os::unix::net::UnixDatagram::bind(&notify_path).unwrap();
    notify
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut told = String::new();
    let wait_for = |what: &str, told: &mut String| {
        let mut buf = [0u8; 4096];
        while !told.lines().any(|l| l == what) {
            let n = notify
                .recv(&mut buf)
                .unwrap_or_else(|e| panic!("no {what} from wasp run (told {told:?}): {e}"));
            told.push_str(&String::from_utf8_lossy(&buf[..n]));
            told.push('\n');
        }
    };
    let mut daemon = Command::new("ip")
        .args(["netns", "exec", &ns.0])
        .arg(built())
        .arg("run")
        .arg(&conf)
        .arg("--socket")
        .arg(&socket)
        .args(["--workers", "1"])
        .env("NOTIFY_SOCKET", &notify_path)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while !socket.exists() {
        if let Some(st) = daemon.try_wait().unwrap() {
            let out = daemon.wait_with_output().unwrap();
            panic!("wasp run exited ({st}): {}", text(&out).1);
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "no control socket");
        std::thread::sleep(Duration::from_millis(50));
    }
    wait_for("READY=1", &mut told);
    ok(&[
        "ip",
        "netns",
        "exec",
        &ns.0,
        "ping",
        "-c",
        "3",
        "-i",
        "0.2",
        "-q",
        "127.0.0.1",
    ]);
    // The counter of the chain counts what lo carried.
    let mut listing = String::new();
    let counted = (0..50).any(|_| {
        let out = Command::new(built())
            .args([
                "ctl",
                "--socket",
                socket.to_str().unwrap(),
                "list",
                "ruleset",
            ])
            .output()
            .unwrap();
        listing = text(&out).0;
        let packets = listing
            .split("counter packets ")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(0);
        if packets >= 6 {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
        false
    });
    assert!(
        listing.contains("table netdev wasp {") && counted,
        "{listing}"
    );
    // ExecReload: SIGHUP reloads the file (RELOADING=1, then READY=1 again).
    told.clear();
    ok(&["kill", "-HUP", &daemon.id().to_string()]);
    wait_for("RELOADING=1", &mut told);
    told.clear();
    wait_for("READY=1", &mut told);
    ok(&["kill", "-TERM", &daemon.id().to_string()]);
    wait_for("STOPPING=1", &mut told);
    let out = daemon.wait_with_output().unwrap();
    let (so, se) = text(&out);
    assert!(out.status.success(), "wasp run: {se}");
    assert!(so.starts_with("packets "), "{so}");
}
