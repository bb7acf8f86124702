//! A network namespace of the harness's own with a veth pair in it, removed on drop.

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::cmd::run;
use crate::error::Result;

/// Prefix of every namespace the harness creates: `wasp-conf-<pid>-<n>`.
pub const NETNS_PREFIX: &str = "wasp-conf-";

/// MTU of both veth ends, in bytes (frames longer than this plus the link header are skipped).
pub const VETH_MTU: usize = 9000;

/// Where `ip netns` keeps its namespace handles.
const NETNS_RUN_DIR: &str = "/run/netns";

static NEXT_ID: AtomicU32 = AtomicU32::new(0);

/// A network namespace named `wasp-conf-<pid>-<n>`, deleted (with everything in it) on drop,
/// also while unwinding from a panic.
#[derive(Debug)]
pub struct Netns {
    name: String,
}

impl Netns {
    /// Creates a fresh namespace, after removing stale ones of earlier runs (namespaces with
    /// [`NETNS_PREFIX`] whose creating process is gone).
    ///
    /// # Errors
    /// When `ip netns add` fails (not root, no netns support).
    pub fn create() -> Result<Self> {
        remove_stale();
        let name = format!(
            "{NETNS_PREFIX}{}-{}",
            std::process::id(),
            NEXT_ID.fetch_add(1, Ordering::Relaxed)
        );
        run(Command::new("ip").args(["netns", "add", &name]))?;
        Ok(Netns { name })
    }

    /// The namespace's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The namespace's handle file (`/run/netns/<name>`), for `setns(2)`.
    pub fn path(&self) -> PathBuf {
        PathBuf::from(NETNS_RUN_DIR).join(&self.name)
    }

    /// A command that runs `program` inside the namespace (`ip netns exec <name> program`).
    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name, program]);
        c
    }

    /// Adds a veth pair `dev` / `peer`, both with IPv6 disabled (no ND/MLD noise), MTU
    /// [`VETH_MTU`], no addresses, and up.
    ///
    /// # Errors
    /// When one of the `ip` / `sysctl` commands fails.
    pub fn add_veth(&self, dev: &str, peer: &str) -> Result<()> {
        run(Command::new("ip").args([
            "-n", &self.name, "link", "add", dev, "type", "veth", "peer", "name", peer,
        ]))?;
        for d in [dev, peer] {
            run(self.command("sysctl").args([
                "-q",
                "-w",
                &format!("net.ipv6.conf.{d}.disable_ipv6=1"),
            ]))?;
            run(Command::new("ip").args([
                "-n",
                &self.name,
                "link",
                "set",
                d,
                "mtu",
                &VETH_MTU.to_string(),
            ]))?;
        }
        for d in [dev, peer] {
            run(Command::new("ip").args(["-n", &self.name, "link", "set", d, "up"]))?;
        }
        Ok(())
    }
}

impl Netns {
    /// Moves link `dev` into namespace `to` and brings it up there (IPv6 off, MTU
    /// [`VETH_MTU`], as [`Netns::add_veth`] leaves it).
    ///
    /// # Errors
    /// When one of the `ip` / `sysctl` commands fails.
    pub fn move_link(&self, dev: &str, to: &Netns) -> Result<()> {
        run(Command::new("ip").args(["-n", &self.name, "link", "set", dev, "netns", &to.name]))?;
        run(to.command("sysctl").args([
            "-q",
            "-w",
            &format!("net.ipv6.conf.{dev}.disable_ipv6=1"),
        ]))?;
        run(Command::new("ip").args([
            "-n",
            &to.name,
            "link",
            "set",
            dev,
            "mtu",
            &VETH_MTU.to_string(),
            "up",
        ]))?;
        Ok(())
    }

    /// Sets the link-layer address of `dev` (`aa:bb:cc:dd:ee:ff`).
    ///
    /// # Errors
    /// When `ip link set` fails.
    pub fn set_mac(&self, dev: &str, mac: &str) -> Result<()> {
        run(Command::new("ip").args(["-n", &self.name, "link", "set", dev, "address", mac]))?;
        Ok(())
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Deleting the namespace destroys the veth pair with it once nothing holds it.
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}

/// Deletes namespaces named `wasp-conf-<pid>-<n>` whose process `<pid>` no longer runs.
fn remove_stale() {
    let Ok(dir) = std::fs::read_dir(NETNS_RUN_DIR) else {
        return;
    };
    for entry in dir.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix(NETNS_PREFIX) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if !PathBuf::from(format!("/proc/{pid}")).exists() {
            let _ = Command::new("ip").args(["netns", "del", &name]).output();
        }
    }
}
