//! Use sites: configuring one on its plugin (the kind it takes), releasing it, and listing or
//! resetting its state. Every call here runs under the setup deadline.

use wasp_core::{ExtKind, ExtSite};

use super::containment::CallError;
use super::{Runtime, Site, StateEntry};
use crate::error::PluginError;
use crate::host::wit_kind;

impl Runtime {
    /// Set up use site `site` on its plugin ([`ExtSite::plugin`]) with its arguments: as a
    /// match first when the plugin offers that kind, else (or when the match is refused) as a
    /// statement, then as a stateful expression, whichever the plugin offers. Returns the kind
    /// that took. A site id configured before is released first.
    ///
    /// Errors: the plugin's own message (for the ruleset error at the rule's file:line:col);
    /// when it refused two kinds, both messages (`as a match: ...; as a statement: ...`);
    /// `no plugin named "x"` for an unknown plugin; a trap's description.
    pub fn configure(&mut self, site: &ExtSite) -> Result<ExtKind, String> {
        let Some(&slot) = self.by_name.get(&site.plugin) else {
            return Err(PluginError::UnknownPlugin(site.plugin.clone()).to_string());
        };
        self.release(site.id);
        let offered = self.slots[slot].plugin.info().kinds.clone();
        let mut errors = Vec::new();
        for kind in [ExtKind::Match, ExtKind::Statement, ExtKind::Stateful] {
            if !offered.contains(&kind) {
                continue;
            }
            match self.configure_on(slot, site.id, kind, &site.args) {
                Ok(()) => {
                    let i = site.id as usize;
                    if self.sites.len() <= i {
                        self.sites.resize_with(i + 1, || None);
                    }
                    self.sites[i] = Some(Site::new(slot, kind, &site.args, site.fallback));
                    self.book_site(site.id);
                    return Ok(kind);
                }
                Err(e) => errors.push((kind, e)),
            }
        }
        Err(match errors.len() {
            1 => errors.remove(0).1,
            _ => errors
                .iter()
                .map(|(k, e)| format!("as {}: {e}", kind_name(*k)))
                .collect::<Vec<_>>()
                .join("; "),
        })
    }

    /// Set up use site `site` as exactly `kind` (when the syntax decides the kind, e.g. a
    /// `counter` on a set element is stateful). Errors as [`Runtime::configure`], plus
    /// `plugin P does not offer KIND` when it does not declare that kind.
    pub fn configure_as(&mut self, site: &ExtSite, kind: ExtKind) -> Result<(), String> {
        let Some(&slot) = self.by_name.get(&site.plugin) else {
            return Err(PluginError::UnknownPlugin(site.plugin.clone()).to_string());
        };
        self.release(site.id);
        if !self.slots[slot].plugin.info().kinds.contains(&kind) {
            return Err(format!(
                "plugin {} does not offer {}",
                site.plugin,
                kind_name(kind)
            ));
        }
        self.configure_on(slot, site.id, kind, &site.args)?;
        let i = site.id as usize;
        if self.sites.len() <= i {
            self.sites.resize_with(i + 1, || None);
        }
        self.sites[i] = Some(Site::new(slot, kind, &site.args, site.fallback));
        self.book_site(site.id);
        Ok(())
    }

    /// One `configure` call on the slot's live instance.
    fn configure_on(
        &mut self,
        slot: usize,
        site: u32,
        kind: ExtKind,
        args: &[String],
    ) -> Result<(), String> {
        let r = self.guarded_for(slot, self.host.config().setup_ticks, |live| {
            let b = &live.bindings;
            b.wasp_plugin_plugin()
                .call_configure(&mut live.store, site, wit_kind(kind), args)
        });
        match r {
            Ok(Ok(())) => Ok(()),
            Ok(Err(msg)) => Err(msg),
            Err(CallError::Failed(reason, msg)) => {
                let name = self.slots[slot].name.clone();
                self.fail(slot, reason, &msg);
                Err(format!("plugin {name}: {reason} in configure: {msg}"))
            }
            Err(CallError::NoInstance(msg)) => Err(msg),
        }
    }

    /// The use site is gone: tell its plugin (`release`) and forget it. Nothing happens for
    /// an unknown site.
    pub fn release(&mut self, site: u32) {
        let Some(s) = self.sites.get_mut(site as usize).and_then(Option::take) else {
            return;
        };
        let slot = s.slot;
        self.book_site(site);
        if let Err(CallError::Failed(reason, msg)) =
            self.guarded_for(slot, self.host.config().setup_ticks, |live| {
                let b = &live.bindings;
                b.wasp_plugin_plugin().call_release(&mut live.store, site)
            })
        {
            self.fail(slot, reason, &msg);
        }
    }

    /// The kind use site `site` was configured as.
    pub fn site_kind(&self, site: u32) -> Option<ExtKind> {
        self.site(site).map(|s| s.kind)
    }

    pub(super) fn site(&self, site: u32) -> Option<&Site> {
        self.sites.get(site as usize).and_then(Option::as_ref)
    }

    /// The state of use site `site` (WIT `list-state`).
    pub fn list_state(&mut self, site: u32) -> Result<Vec<StateEntry>, PluginError> {
        let slot = self.site(site).ok_or(PluginError::UnknownSite(site))?.slot;
        let r = self.guarded_for(slot, self.host.config().setup_ticks, |live| {
            let b = &live.bindings;
            b.wasp_plugin_plugin()
                .call_list_state(&mut live.store, site)
        });
        match r {
            Ok(entries) => Ok(entries
                .into_iter()
                .map(|e| StateEntry {
                    elem: e.elem,
                    values: e.values,
                    text: e.text,
                })
                .collect()),
            Err(CallError::Failed(reason, msg)) => Err(self.fail(slot, reason, &msg)),
            Err(CallError::NoInstance(msg)) => Err(no_instance(&self.slots[slot].name, msg)),
        }
    }

    /// Reset use site `site`'s state (`elem` 0: all of it; else that element's; WIT
    /// `reset-state`).
    pub fn reset_state(&mut self, site: u32, elem: u32) -> Result<(), PluginError> {
        let slot = self.site(site).ok_or(PluginError::UnknownSite(site))?.slot;
        let r = self.guarded_for(slot, self.host.config().setup_ticks, |live| {
            let b = &live.bindings;
            b.wasp_plugin_plugin()
                .call_reset_state(&mut live.store, site, elem)
        });
        r.map_err(|e| match e {
            CallError::Failed(reason, msg) => self.fail(slot, reason, &msg),
            CallError::NoInstance(msg) => no_instance(&self.slots[slot].name, msg),
        })
    }
}

fn no_instance(name: &str, msg: String) -> PluginError {
    PluginError::Instantiate {
        plugin: name.to_string(),
        msg,
    }
}

pub(super) fn kind_name(k: ExtKind) -> &'static str {
    match k {
        ExtKind::Match => "a match",
        ExtKind::Statement => "a statement",
        ExtKind::Stateful => "a stateful expression",
    }
}
