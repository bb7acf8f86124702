//! The idletimer plugin: the xt_IDLETIMER target (net/netfilter/xt_IDLETIMER.c).
//!
//! `idletimer label "wlan0" timeout 10s [hard]`: each packet through the rule restarts the
//! timer of its label with the rule's timeout; when no packet has come for that long, the event
//! `idletimer wlan0 expired` goes to the control side. `hard` (the kernel's `--alarm`, timer
//! type XT_IDLETIMER_ALARM) runs the timer on the boot-time clock, so it also expires across a
//! suspend; plain timers run on the monotonic clock. Every packet continues.
//!
//! Rules of the kernel (cases C24, C25):
//! - timeout: whole seconds, 1..=2147482 (0 and >= INT_MAX/1000 = 2147483 s are refused);
//! - label: 1..=27 bytes (28 with the NUL is refused), a valid sysfs name (not `.`, `..`, no
//!   `/`) and not `power`, `subsystem` or `uevent`;
//! - rules with the same label share one timer, counted by reference; `release` drops a
//!   reference and the last one removes the timer;
//! - a second rule with the same label and the other timer type is refused ("same label and
//!   different timer type");
//! - re-using a plain timer restarts it with the new rule's timeout; re-using an alarm timer
//!   keeps its remaining time.
//!
//! `list_state` gives each label's remaining time in ms (0 once expired). The deadlines move
//! across a hot swap (`export_state` / `import_state`); timer keys are derived from the label,
//! so a timer armed by the previous version fires into the right label.

#![cfg_attr(target_arch = "wasm32", no_std)]

extern crate alloc;

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use wasp_plugin_sdk::blob::{Reader, Writer};
use wasp_plugin_sdk::{
    Clock, Edit, Info, Kind, Packets, Plugin, Sites, StateEntry, Verdict, args, host,
};

/// Longest label in bytes: the kernel's `char label[MAX_IDLETIMER_LABEL_SIZE]` (28) holds
/// the terminating NUL.
pub const MAX_LABEL: usize = 27;

/// Largest timeout in seconds: the kernel refuses `timeout >= INT_MAX / 1000`.
pub const MAX_TIMEOUT_S: u64 = 2_147_482;

/// Labels the kernel refuses: names sysfs already uses in the timer's directory.
const RESERVED: [&str; 3] = ["power", "subsystem", "uevent"];

const NS_PER_MS: u64 = 1_000_000;
const MAGIC: &[u8] = b"wasp-idletimer/1";

/// A use site's arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// The label.
    pub label: String,
    /// Timeout, seconds.
    pub timeout_s: u64,
    /// The clock: monotonic (plain) or boot time (`hard`).
    pub clock: Clock,
}

/// One label's timer, shared by the sites that name it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Timer {
    clock: Clock,
    /// Sites that use it (the reference count).
    refs: u32,
    /// When it falls due on `clock`, ns; `None` once it expired.
    deadline: Option<u64>,
    /// The host timer key.
    key: u64,
}

/// The plugin.
#[derive(Debug, Default)]
pub struct IdleTimer {
    sites: Sites<Rule>,
    timers: BTreeMap<String, Timer>,
    keys: BTreeMap<u64, String>,
    /// Deadlines imported for labels no site had configured yet (`None`: expired).
    imported: BTreeMap<String, (Clock, Option<u64>)>,
}

fn clock_name(c: Clock) -> &'static str {
    match c {
        Clock::Monotonic => "plain",
        Clock::Boottime => "hard",
    }
}

/// Checks a label as `idletimer_check_sysfs_name` and the label size check do.
pub fn check_label(label: &str) -> Result<(), String> {
    if label.is_empty() {
        return Err("idletimer: empty label".to_string());
    }
    if label.len() > MAX_LABEL {
        return Err(format!(
            "idletimer: label {label:?} is {} bytes, more than {MAX_LABEL}",
            label.len()
        ));
    }
    if label == "." || label == ".." || label.contains('/') || label.contains('\0') {
        return Err(format!(
            "idletimer: label {label:?} is not a valid sysfs name"
        ));
    }
    if RESERVED.contains(&label) {
        return Err(format!("idletimer: label {label:?} is reserved"));
    }
    Ok(())
}

/// Parses `label L timeout T [hard]` (any order).
pub fn parse(args: &[String]) -> Result<Rule, String> {
    let mut label = None;
    let mut timeout = None;
    let mut clock = Clock::Monotonic;
    let mut it = args.iter();
    while let Some(key) = it.next() {
        match key.as_str() {
            "label" => {
                let v = it.next().ok_or("idletimer: label needs a value")?;
                label = Some(args::unquote(v).to_string());
            }
            "timeout" => {
                let v = it.next().ok_or("idletimer: timeout needs a value")?;
                let ms =
                    args::parse_duration_ms(v).map_err(|e| format!("idletimer: timeout {e}"))?;
                if ms % 1000 != 0 {
                    return Err(format!(
                        "idletimer: timeout {v} is not a whole number of seconds"
                    ));
                }
                let s = ms / 1000;
                if s == 0 {
                    return Err(
                        "idletimer: timeout 0 is refused (1 to 2147482 seconds)".to_string()
                    );
                }
                if s > MAX_TIMEOUT_S {
                    return Err(format!(
                        "idletimer: timeout {v} is more than {MAX_TIMEOUT_S} seconds"
                    ));
                }
                timeout = Some(s);
            }
            "hard" | "alarm" => clock = Clock::Boottime,
            other => {
                return Err(format!(
                    "idletimer: unexpected {other:?} (expected label, timeout or hard)"
                ));
            }
        }
    }
    let label = label.ok_or("idletimer: label is required")?;
    check_label(&label)?;
    let timeout_s = timeout.ok_or("idletimer: timeout is required")?;
    Ok(Rule {
        label,
        timeout_s,
        clock,
    })
}

/// The host timer key of `label`: FNV-1a, the same in every version of the plugin.
fn label_key(label: &str) -> u64 {
    label.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

impl IdleTimer {
    /// A free key for `label` (its hash, or the next free one after a collision).
    fn key_for(&self, label: &str) -> u64 {
        let mut key = label_key(label);
        while self.keys.get(&key).is_some_and(|l| l != label) {
            key = key.wrapping_add(1);
        }
        key
    }

    fn arm(t: &mut Timer, deadline: u64) {
        t.deadline = Some(deadline);
        host::timer_arm(t.key, t.clock, deadline);
    }

    /// Drops one reference to `label`; the last removes the timer.
    fn unref(&mut self, label: &str) {
        let Some(t) = self.timers.get_mut(label) else {
            return;
        };
        t.refs -= 1;
        if t.refs == 0 {
            host::timer_cancel(t.key);
            self.keys.remove(&t.key);
            self.timers.remove(label);
        }
    }

    /// The timer of a label, if a site uses it (for tests and listing).
    pub fn remaining_ms(&self, label: &str) -> Option<u64> {
        let t = self.timers.get(label)?;
        Some(
            t.deadline
                .map_or(0, |d| d.saturating_sub(host::clock_ns(t.clock)) / NS_PER_MS),
        )
    }

    /// How many sites use `label`.
    pub fn refs(&self, label: &str) -> u32 {
        self.timers.get(label).map_or(0, |t| t.refs)
    }
}

impl Plugin for IdleTimer {
    fn describe(&self) -> Info {
        Info::new(
            "idletimer",
            env!("CARGO_PKG_VERSION"),
            &[Kind::Statement],
            0,
        )
        .with_state_transfer()
    }

    fn configure(&mut self, site: u32, _kind: Kind, args: &[String]) -> Result<(), String> {
        let rule = parse(args)?;
        if let Some(t) = self.timers.get(&rule.label) {
            let only_this_site =
                self.sites.get(site).is_some_and(|r| r.label == rule.label) && t.refs == 1;
            if t.clock != rule.clock && !only_this_site {
                return Err(format!(
                    "idletimer: label {:?} is a {} timer: same label and different timer type",
                    rule.label,
                    clock_name(t.clock)
                ));
            }
        }
        // A site configured again: with the same label and type it keeps its reference (and
        // is a re-use below); otherwise it lets go of the old timer first.
        if let Some(old) = self.sites.remove(site) {
            let same = self
                .timers
                .get(&old.label)
                .is_some_and(|t| old.label == rule.label && t.clock == rule.clock);
            if same {
                if let Some(t) = self.timers.get_mut(&old.label) {
                    t.refs -= 1;
                }
            } else {
                self.unref(&old.label);
            }
        }
        let now = host::clock_ns(rule.clock);
        let deadline = now + rule.timeout_s * 1000 * NS_PER_MS;
        match self.timers.get_mut(&rule.label) {
            Some(t) => {
                t.refs += 1;
                // Plain re-use restarts with the new timeout; alarm re-use keeps the remaining
                // time (checkentry: mod_timer only for non-alarm timers).
                if t.clock == Clock::Monotonic {
                    Self::arm(t, deadline);
                }
            }
            None => {
                let key = self.key_for(&rule.label);
                let mut t = Timer {
                    clock: rule.clock,
                    refs: 1,
                    deadline: None,
                    key,
                };
                match self.imported.remove(&rule.label) {
                    Some((clock, Some(d))) if clock == rule.clock => Self::arm(&mut t, d),
                    Some((clock, None)) if clock == rule.clock => {}
                    _ => Self::arm(&mut t, deadline),
                }
                self.keys.insert(key, rule.label.clone());
                self.timers.insert(rule.label.clone(), t);
            }
        }
        self.sites.insert(site, rule);
        Ok(())
    }

    fn release(&mut self, site: u32) {
        if let Some(rule) = self.sites.remove(site) {
            self.unref(&rule.label);
        }
    }

    fn apply(
        &mut self,
        site: u32,
        pkts: Packets<'_>,
        _verdicts: &mut [Verdict],
        _edits: &mut Vec<Edit>,
    ) {
        if pkts.is_empty() {
            return;
        }
        let Some(rule) = self.sites.get(site) else {
            return;
        };
        let Some(t) = self.timers.get_mut(&rule.label) else {
            return;
        };
        // Every packet restarts the timer; the clock is the same for the whole vector.
        let deadline = host::clock_ns(t.clock) + rule.timeout_s * 1000 * NS_PER_MS;
        Self::arm(t, deadline);
    }

    fn on_timer(&mut self, key: u64) {
        let Some(label) = self.keys.get(&key) else {
            return;
        };
        let Some(t) = self.timers.get_mut(label) else {
            return;
        };
        let Some(deadline) = t.deadline else { return };
        if host::clock_ns(t.clock) < deadline {
            // Restarted since it was armed (e.g. by a previous version): wait for the new time.
            host::timer_arm(key, t.clock, deadline);
            return;
        }
        t.deadline = None;
        host::emit(&format!("idletimer {label} expired"));
    }

    fn list_state(&mut self, site: u32) -> Vec<StateEntry> {
        let Some(rule) = self.sites.get(site) else {
            return Vec::new();
        };
        let Some(remaining) = self.remaining_ms(&rule.label) else {
            return Vec::new();
        };
        let mut e = StateEntry::values(
            0,
            &[("remaining_ms", remaining), ("timeout_s", rule.timeout_s)],
        );
        e.text = format!(
            "label {:?} remaining {remaining} ms{}",
            rule.label,
            if rule.clock == Clock::Boottime {
                " hard"
            } else {
                ""
            }
        );
        alloc::vec![e]
    }

    fn export_state(&mut self) -> Vec<u8> {
        let mut w = Writer::new(MAGIC);
        w.u32(self.timers.len() as u32);
        for (label, t) in &self.timers {
            w.bytes(label.as_bytes());
            w.u8(matches!(t.clock, Clock::Boottime) as u8);
            match t.deadline {
                Some(d) => w.u8(1).u64(d),
                None => w.u8(0).u64(0),
            };
        }
        w.finish()
    }

    /// Takes the deadlines of the labels in the blob: a label a site already uses gets its
    /// deadline back (and is re-armed), others wait for their site's `configure`. A label
    /// whose timer type changed starts fresh. Nothing changes on an error.
    fn import_state(&mut self, blob: &[u8]) -> Result<(), String> {
        let mut r = Reader::new(blob, MAGIC)?;
        let mut entries = Vec::new();
        for _ in 0..r.u32()? {
            let label = String::from_utf8(r.bytes()?.to_vec())
                .map_err(|_| "label is not UTF-8".to_string())?;
            let clock = if r.u8()? == 1 {
                Clock::Boottime
            } else {
                Clock::Monotonic
            };
            let armed = r.u8()? == 1;
            let deadline = r.u64()?;
            entries.push((label, clock, armed.then_some(deadline)));
        }
        if !r.is_empty() {
            return Err("state blob has trailing bytes".to_string());
        }
        for (label, clock, deadline) in entries {
            match self.timers.get_mut(&label) {
                Some(t) if t.clock == clock => match deadline {
                    Some(d) => Self::arm(t, d),
                    None => {
                        t.deadline = None;
                        host::timer_cancel(t.key);
                    }
                },
                Some(_) => {}
                None => {
                    self.imported.insert(label, (clock, deadline));
                }
            }
        }
        Ok(())
    }
}

wasp_plugin_sdk::export_plugin!(IdleTimer);

#[cfg(test)]
mod tests;
