//! The engine: [`Engine::compile`] a ruleset, configure what its keys read (clocks, device
//! addresses, plugins, `ct count`'s lists), then run vectors of packets through a hook with
//! [`Engine::run`] (`hooks`), and read the counters through the counter plugin (`counters`).

use wasp_ruleset::model::{Family, Hook, Span};
use wasp_ruleset::{Error, Ruleset};

use crate::compile::compile;
use crate::compiled::{ChainId, Program};
use crate::conn::{ConnCount, FlowtableSpec, NatSpec};
use crate::expr::{PktState, ifname_value};
use crate::ext::{ExtEdit, ExtKind, ExtSite, Extensions};
use crate::hooks::{HookList, NF_IP_PRI_CONNTRACK, PRE_CONNTRACK};
use crate::packet::{Decision, FinalVerdict, MAX_VECTOR, OutId, OutTarget};
use crate::pipeline::Scratch;

/// A compiled ruleset, ready to classify packets.
///
/// Holds the compiled program and the reusable buffers of the vector pipeline (so one engine
/// serves one worker at a time). Counters are not the engine's: every `counter` is a use site
/// of the counter plugin ([`Engine::counter_uses`]), served by the installed [`Extensions`].
#[derive(Debug)]
pub struct Engine {
    pub(crate) prog: Program,
    pub(crate) hooks: Vec<HookList>,
    /// Time of the ruleset's load on the packet path's clock (set element timeouts count from
    /// it); the first packet's time when not set.
    pub(crate) epoch: Option<u64>,
    pub(crate) scratch: Scratch,
    pub(crate) state: [PktState; MAX_VECTOR],
    pub(crate) res: [(FinalVerdict, Option<Decision>); MAX_VECTOR],
    /// The plugins installed with [`Engine::set_ext`].
    pub(crate) ext: ExtSlot,
    /// Edits of one extension call.
    pub(crate) ext_scratch: Vec<(usize, ExtEdit)>,
    /// The lists behind `ct count`.
    pub(crate) conn_count: Option<std::sync::Arc<dyn ConnCount>>,
    /// What `meta cpu`, `meta time|day|hour` and `meta random` read.
    pub(crate) env: MetaEnv,
    /// The rare statement outputs of the vector being walked ([`crate::expr::StmtOut`]).
    pub(crate) rare: Vec<crate::expr::StmtOut>,
    /// The element hits of the vector being walked ([`crate::eval::ElemHits`]): kept here, so
    /// that a walk does not fill its kilobyte of slots anew.
    pub(crate) hits: Box<crate::eval::ElemHits>,
    /// Some rule writes a connection ([`Engine::writes_conn`]).
    writes_conn: bool,
    /// Some rule has `flow add` ([`Engine::has_flow_add`]).
    flow_add: bool,
}

/// What the meta keys that are not in the packet read (see `wasp_ruleset::meta_keys`).
#[derive(Debug, Clone, Default)]
pub(crate) struct MetaEnv {
    /// Unix time in ns at `now_ns` 0 (0: `now_ns` is Unix time, as a replay's capture clock).
    wall_epoch_ns: u64,
    /// `meta cpu`: the worker's number.
    cpu: u32,
    /// State of `meta random`'s generator (splitmix64).
    random: u64,
    /// Link-layer addresses of the input devices that have one known (the `meta iifname`
    /// value of the name, the address), for `meta pkttype`.
    macs: Vec<(u128, [u8; 6])>,
}

impl MetaEnv {
    /// The per-packet fields of `st` at `now_ns`.
    pub(crate) fn fill(&mut self, st: &mut PktState, now_ns: u64) {
        st.wall_ns = self.wall_epoch_ns.wrapping_add(now_ns);
        st.cpu = self.cpu;
        st.iif_mac = self
            .macs
            .iter()
            .find(|(n, _)| *n == st.iif)
            .map(|(_, m)| *m);
        self.random = self.random.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.random;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        st.random = (z ^ (z >> 31)) as u32;
    }
}

/// An installed [`Extensions`] (not `Debug` itself).
#[derive(Default)]
pub(crate) struct ExtSlot(pub(crate) Option<Box<dyn Extensions>>);

impl std::fmt::Debug for ExtSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "ExtSlot(installed)"
        } else {
            "ExtSlot(none)"
        })
    }
}

impl Engine {
    /// Compile `ruleset`: resolve chain references, type-check, build set structures.
    ///
    /// Refuses what the kernel refuses at load: a jump or goto to an unknown chain or to a base
    /// chain (EOPNOTSUPP), a chain reached through 16 or more jumps/gotos from a base chain, or a
    /// jump loop reachable from a base chain (EMLINK, "Too many links"); also comparisons the
    /// evaluator cannot give a meaning (`<` on a set, mismatched key widths).
    ///
    /// # Errors
    /// A ruleset that parses but cannot run (unknown jump target, chain loop, ...) gives an
    /// [`Error`] at the offending place.
    pub fn compile(ruleset: &Ruleset) -> Result<Self, Error> {
        let prog = compile(ruleset)?;
        // Registration order: tables and chains as declared. Equal priorities: the chain
        // registered later runs first (nf_hook_entries_grow inserts a new hook before the
        // existing ones of the same priority; checked on the kernel with two tables).
        let mut hooks: Vec<HookList> = Vec::new();
        for (id, c) in prog.chains.iter().enumerate() {
            let Some(b) = &c.base else { continue };
            let l3 = matches!(c.family, Family::Ip | Family::Ip6 | Family::Inet)
                && matches!(
                    b.hook,
                    Hook::Prerouting
                        | Hook::Input
                        | Hook::Forward
                        | Hook::Output
                        | Hook::Postrouting
                );
            let runs = l3
                || matches!(
                    (c.family, b.hook),
                    (Family::Netdev, Hook::Ingress | Hook::Egress) | (Family::Inet, Hook::Ingress)
                );
            if !runs {
                continue;
            }
            // The IP hooks have no device: their chains see every packet of their family.
            // Prerouting chains below conntrack's priority run before it (their own list).
            let any = [
                if l3 && b.hook == Hook::Prerouting && b.priority < NF_IP_PRI_CONNTRACK {
                    PRE_CONNTRACK.to_string()
                } else {
                    String::new()
                },
            ];
            let devices = if l3 { &any[..] } else { &b.devices[..] };
            for dev in devices {
                let at = match hooks
                    .iter()
                    .position(|h| h.hook == b.hook && &h.device == dev)
                {
                    Some(at) => at,
                    None => {
                        hooks.push(HookList {
                            hook: b.hook,
                            device: dev.clone(),
                            chains: Vec::new(),
                            stats: Vec::new(),
                            all_nat: false,
                            key: ifname_value(dev),
                        });
                        hooks.len() - 1
                    }
                };
                hooks[at].chains.push(ChainId(id as u32));
            }
        }
        for h in &mut hooks {
            // Later registration first, then a stable sort by priority.
            h.chains.reverse();
            h.chains
                .sort_by_key(|&c| prog.chains[c].base.as_ref().map_or(0, |b| b.priority));
            h.stats = vec![(0, 0, 0); h.chains.len()];
            h.all_nat = h.chains.iter().all(|&c| prog.chains[c].is_nat());
        }
        let scratch = Scratch::new(prog.chains.len());
        let ops = || {
            prog.chains
                .iter()
                .flat_map(|c| &c.rules)
                .flat_map(|r| r.ops.iter())
        };
        let writes_conn = ops().any(|o| {
            matches!(
                o,
                crate::compiled::Op::CtSetMark(_)
                    | crate::compiled::Op::CtSet { .. }
                    | crate::compiled::Op::SetMarkMap { ct: true, .. }
            )
        });
        let flow_add = ops().any(|o| matches!(o, crate::compiled::Op::FlowAdd(_)));
        Ok(Engine {
            writes_conn,
            flow_add,
            prog,
            hooks,
            epoch: None,
            env: MetaEnv::default(),
            rare: Vec::new(),
            hits: Box::default(),
            scratch,
            state: [PktState::default(); MAX_VECTOR],
            res: [(FinalVerdict::Accept, None); MAX_VECTOR],
            ext: ExtSlot::default(),
            ext_scratch: Vec::new(),
            conn_count: None,
        })
    }

    /// The plugin use sites of the ruleset, ids dense from 0 in rule order (tables, chains,
    /// rules, statements as written). A site's `kind` is [`ExtKind::Statement`] until the
    /// embedder sets it ([`Engine::set_ext`], [`Engine::set_ext_kinds`]).
    pub fn ext_sites(&self) -> &[ExtSite] {
        &self.prog.ext_sites
    }

    /// Where use site `id` is written (for errors of its configuration: file:line:col of the
    /// plugin's name in the rule).
    pub fn ext_site_span(&self, id: u32) -> Option<Span> {
        self.prog.ext_spans.get(id as usize).copied()
    }

    /// Install the plugins of this worker and the kind of every use site (`kinds[id]`, as
    /// the plugin host decided when it configured the site; sites past `kinds.len()` keep
    /// theirs). Replaces the extension installed before. Before a call, every site gives its
    /// fallback: a statement continues (or drops with `fallback drop`), a match is false.
    pub fn set_ext(&mut self, ext: Box<dyn Extensions>, kinds: &[ExtKind]) {
        self.ext.0 = Some(ext);
        self.set_ext_kinds(kinds);
    }

    /// Set the kind of every use site (`kinds[id]`; sites past `kinds.len()` keep theirs).
    pub fn set_ext_kinds(&mut self, kinds: &[ExtKind]) {
        for (s, &k) in self.prog.ext_sites.iter_mut().zip(kinds) {
            s.kind = k;
        }
    }

    /// Remove the installed plugins (sites then give their fallback) and return them.
    pub fn take_ext(&mut self) -> Option<Box<dyn Extensions>> {
        self.ext.0.take()
    }

    /// `true` when some prerouting chain runs before conntrack ([`crate::At::PreConntrack`]).
    pub fn has_pre_conntrack(&self) -> bool {
        self.has_hook(Hook::Prerouting, PRE_CONNTRACK)
    }

    /// `true` when packets the gateway routes take the IP path (conntrack, the IP hooks):
    /// some ip, ip6 or inet chain is on an IP hook, or the ruleset has a flowtable.
    pub fn uses_ip_path(&self) -> bool {
        !self.prog.flowtables.is_empty()
            || self
                .hooks
                .iter()
                .any(|h| !matches!(h.hook, Hook::Ingress | Hook::Egress))
    }

    /// `true` when some chain of IP hook `hook` would see a packet: one that is not `type
    /// nat`, or, with `nat_pending` (a new connection without its binding), any. The IP path
    /// skips a hook (and what the hook's packet needs: the connection's current state) when
    /// this is `false`, as nf_nat_inet_fn skips the nat chains of an established connection.
    pub fn ip_hook_runs(&self, hook: Hook, nat_pending: bool) -> bool {
        self.hooks
            .iter()
            .any(|h| h.hook == hook && h.device.is_empty() && (nat_pending || !h.all_nat))
    }

    /// `true` when some rule writes the packet's connection (`ct mark set`, `ct label|event|zone
    /// set`, `ct mark set ... map`): a later packet of the connection reads what an earlier
    /// one wrote, so the IP path never puts two packets of one connection in one hook call.
    pub fn writes_conn(&self) -> bool {
        self.writes_conn
    }

    /// `true` when some rule has `flow add @NAME`: a packet may offload its connection, and
    /// the next packet of it must look the flowtable up after that.
    pub fn has_flow_add(&self) -> bool {
        self.flow_add
    }

    /// `true` when some rule reads a `ct` key of the connection's detail (its tuples,
    /// `expiration`, `packets`, `bytes`, `zone`, `label`, ...): only then does a caller need
    /// to give the packets their [`crate::Packet::ct_detail`].
    pub fn reads_ct_detail(&self) -> bool {
        self.prog.reads_ct_detail
    }

    /// The NAT statements of the ruleset ([`crate::ConnFx::nat`] indexes them).
    pub fn nat_specs(&self) -> &[NatSpec] {
        &self.prog.nats
    }

    /// The flowtables of the ruleset ([`crate::ConnFx::flow_add`] indexes them).
    pub fn flowtables(&self) -> &[FlowtableSpec] {
        &self.prog.flowtables
    }

    /// Give `ct count` statements their connection lists (shared by every worker's engine).
    /// Without one, `ct count` ends its rule.
    pub fn set_conn_count(&mut self, c: std::sync::Arc<dyn ConnCount>) {
        self.conn_count = Some(c);
    }

    /// `true` when some base chain runs on `hook` of `dev`.
    pub fn has_hook(&self, hook: Hook, dev: &str) -> bool {
        let key = ifname_value(dev);
        self.hooks.iter().any(|h| h.is(hook, dev, key))
    }

    /// `true` when some rule has a `reject` statement: dropped packets may get a reply, so the
    /// embedder sends them the way out (`wasp_gateway::Forwarder::after_ingress`).
    pub fn has_rejects(&self) -> bool {
        self.prog
            .chains
            .iter()
            .flat_map(|c| &c.rules)
            .flat_map(|r| r.ops.iter())
            .any(|o| matches!(o, crate::compiled::Op::Reject(_)))
    }

    /// `true` when some rule has a `log` statement: the embedder passes a [`crate::TraceSink`] to
    /// receive its [`crate::TraceEvent::Log`] events (one that only wants those says so with
    /// [`crate::TraceSink::walk`], which keeps the walk's own events from being made).
    pub fn has_logs(&self) -> bool {
        !self.prog.logs.is_empty()
    }

    /// The output targets of the ruleset's `fwd` and `dup` statements, indexed by [`OutId`]
    /// (each device and next hop once, in the order the statements are written).
    pub fn out_targets(&self) -> &[OutTarget] {
        &self.prog.out_targets
    }

    /// Output target `id` ([`crate::Outcome::fwd`], [`crate::Outcome::dup`]).
    pub fn out_target(&self, id: OutId) -> Option<&OutTarget> {
        self.prog.out_targets.get(usize::from(id.0))
    }

    /// Name of table `table` (a [`Decision`]'s `table`); `""` when out of range.
    pub fn table_name(&self, table: u32) -> &str {
        self.prog
            .tables
            .get(table as usize)
            .map_or("", |t| t.0.as_str())
    }

    /// Family of table `table`.
    pub fn table_family(&self, table: u32) -> Option<Family> {
        self.prog.tables.get(table as usize).map(|t| t.1)
    }

    /// Name of chain `chain` of table `table` (a [`Decision`]'s `chain`); `""` when out of range.
    pub fn chain_name(&self, table: u32, chain: u32) -> &str {
        self.prog
            .chain_ids
            .get(table as usize)
            .and_then(|t| t.get(chain as usize))
            .map_or("", |&id| self.prog.chains[id].name.as_str())
    }

    /// Devices that have ingress base chains, in the order their first chain was declared
    /// (`wasp replay`'s default input device is the first).
    pub fn ingress_devices(&self) -> Vec<&str> {
        let mut first: Vec<(ChainId, &str)> = self
            .hooks
            .iter()
            .filter(|h| h.hook == Hook::Ingress)
            .map(|h| {
                (
                    h.chains.iter().copied().min().unwrap_or_default(),
                    h.device.as_str(),
                )
            })
            .collect();
        first.sort();
        first.into_iter().map(|(_, d)| d).collect()
    }

    /// The base chains that run on `hook` of `dev`, in running order, as (table, chain) indices.
    pub fn base_chains(&self, hook: Hook, dev: &str) -> Vec<(u32, u32)> {
        self.hooks
            .iter()
            .find(|h| h.is(hook, dev, ifname_value(dev)))
            .map(|h| {
                h.chains
                    .iter()
                    .map(|&c| {
                        let c = &self.prog.chains[c];
                        (c.table, c.index)
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The buckets of the ruleset's `limit`s and the consumed bytes of its `quota`s (one per
    /// statement or named object, as the kernel's expressions and objects). Give them to the
    /// engines of the other workers ([`Engine::share_stateful`]) so that a rate or a quota is
    /// one across the workers, as in the kernel.
    pub fn stateful(&self) -> std::sync::Arc<crate::Stateful> {
        self.prog.stateful.clone()
    }

    /// Use `shared` (another engine's [`Engine::stateful`], compiled from the same ruleset)
    /// for this engine's `limit`s and `quota`s. Returns `false`, keeping this engine's own,
    /// when `shared` does not belong to the same statements and objects.
    pub fn share_stateful(&mut self, shared: std::sync::Arc<crate::Stateful>) -> bool {
        if !shared.same_shape(&self.prog.stateful) {
            return false;
        }
        self.prog.stateful = shared;
        true
    }

    /// Set the time the ruleset was loaded, on the clock of the `now_ns` the hooks are given
    /// (for a replay, the capture's): a set element with `timeout 30s` (or `expires 30s`, or
    /// in a set with `timeout 30s`) stops matching at `epoch_ns + 30 s`, as the kernel's
    /// `nft_set_elem_expired`. Without a call, the epoch is the `now_ns` of the first packet.
    pub fn set_epoch(&mut self, epoch_ns: u64) {
        self.epoch = Some(epoch_ns);
    }

    /// The wall clock of the packet path: Unix time in ns at `now_ns` 0, for `meta time`,
    /// `meta day` and `meta hour` (default 0: the `now_ns` the hooks are given is Unix time,
    /// as a replay's capture timestamps are).
    pub fn set_wall_clock_epoch(&mut self, unix_ns_at_zero: u64) {
        self.env.wall_epoch_ns = unix_ns_at_zero;
    }

    /// The link-layer address of input device `dev`: a unicast frame to another address is
    /// `meta pkttype other` (PACKET_OTHERHOST, as the kernel's `eth_type_trans` decides).
    /// Without one every unicast frame is `host`.
    pub fn set_device_mac(&mut self, dev: &str, mac: [u8; 6]) {
        let name = ifname_value(dev);
        self.env.macs.retain(|(n, _)| *n != name);
        self.env.macs.push((name, mac));
    }

    /// What `meta cpu` reads: the number of the worker that runs this engine (default 0).
    pub fn set_cpu(&mut self, cpu: u32) {
        self.env.cpu = cpu;
    }

    /// `now_ns` as ns after the epoch (fixing the epoch at the first call).
    pub(crate) fn since_epoch(&mut self, now_ns: u64) -> u64 {
        now_ns.saturating_sub(*self.epoch.get_or_insert(now_ns))
    }
}
