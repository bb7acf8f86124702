//! A ruleset change hands each plugin's state to the next program's runtime: when a worker
//! replaces its runtime by one built for a new ruleset (`wasp ctl -f`, a reload), every plugin
//! that both run under the same name, in versions that declare state transfer, moves its state
//! blob from the old instance to the new one (export-state, then import-state, as a hot swap
//! does), after the new instance's use sites are configured.
//!
//! The new instance's use sites are the new program's: a site id in the blob may name another
//! rule now. A plugin keeps what should outlive a change keyed by what the rules name (the
//! IDLETIMER plugin keys its timers by label, as the kernel's target does); state kept by site
//! id needs the host's own carry (the counter plugin's counts: `wasp_core::carry`).

use super::Runtime;
use super::swap::{StateMove, move_blob};

impl Runtime {
    /// Take the state of each plugin of `old` that this runtime runs under the same name,
    /// except those named in `skip`. Returns what happened, per plugin, in this runtime's
    /// order; a plugin whose versions do not both declare state transfer, or whose old instance
    /// had failed, starts as configured (`Fresh`). An import that traps leaves the new
    /// instance to the runtime's containment (re-created at its next call), as `Fresh`.
    pub fn take_state(&mut self, old: &mut Runtime, skip: &[&str]) -> Vec<(String, StateMove)> {
        let deadline = self.host.config().setup_ticks.max(1);
        let mut out = Vec::new();
        for i in 0..self.slots.len() {
            let slot = &mut self.slots[i];
            if skip.contains(&&*slot.name) {
                continue;
            }
            let Some(&o) = old.by_name.get(&*slot.name) else {
                continue;
            };
            let was = &mut old.slots[o];
            let transfer = was.plugin.info().state_transfer && slot.plugin.info().state_transfer;
            let moved = match (transfer, was.live.as_mut(), slot.live.as_mut()) {
                (false, _, _) => StateMove::Fresh {
                    reason: "no state transfer in both versions".into(),
                },
                (true, None, _) | (true, _, None) => StateMove::Fresh {
                    reason: "an instance had failed".into(),
                },
                (true, Some(from), Some(to)) => match move_blob(from, to, deadline) {
                    Ok(m) => m,
                    Err(reason) => {
                        slot.live = None;
                        StateMove::Fresh { reason }
                    }
                },
            };
            let name = slot.name.to_string();
            if let (true, StateMove::Fresh { reason }) = (transfer, &moved) {
                let text = format!("plugin {name} started fresh in the new ruleset: {reason}");
                self.event(name.clone(), text);
            }
            // The timers the import armed (an IDLETIMER label's deadline) join the runtime's.
            self.drain(i);
            out.push((name, moved));
        }
        out
    }
}
