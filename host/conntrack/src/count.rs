//! `ct count` (nft_connlimit over the kernel's `nf_conncount` lists): per use site, the ids of
//! the connections that passed it.

use std::collections::HashMap;

use parking_lot::Mutex;

use crate::table::Conntrack;

/// The lists of every use site.
#[derive(Default)]
pub(crate) struct Counts {
    sites: Mutex<HashMap<u32, Vec<u64>>>,
}

impl Conntrack {
    /// Add connection `id` to the list of use site `site` (a `ct count` statement) and return
    /// how many live connections the list holds, as `nf_conncount_add` and
    /// `nft_connlimit_do_eval`: connections that are gone (removed, expired at `now_ns`) or
    /// closed (TCP TIME_WAIT or CLOSE, `already_closed`) are pruned from the list first; an id
    /// already in the list is not added twice; unconfirmed connections count (the kernel keeps
    /// them as "might be about to be confirmed"). The statement matches when the count is at
    /// most its limit (or above it with `over`).
    ///
    /// Every call checks every id of the list (one shard lock each): fine for the per-rule
    /// limits connlimit is used for (tens to thousands of connections).
    pub fn count_add(&self, site: u32, id: u64, now_ns: u64) -> u32 {
        let mut sites = self.counts.sites.lock();
        let list = sites.entry(site).or_default();
        list.retain(|&c| {
            self.with_entry(c, |e, live| {
                let gone = live && e.expired(now_ns);
                let closed = e.tuple[0].proto == crate::proto::TCP && e.tcp.closed();
                !gone && !closed
            }) == Some(true)
        });
        if id != 0 && !list.contains(&id) && self.with_entry(id, |_, _| ()).is_some() {
            list.push(id);
        }
        u32::try_from(list.len()).unwrap_or(u32::MAX)
    }

    /// Forget the list of `site` (its rule was deleted).
    pub fn count_forget(&self, site: u32) {
        self.counts.sites.lock().remove(&site);
    }
}
