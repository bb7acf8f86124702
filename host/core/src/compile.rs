//! Model -> [`Program`]: chain references resolved, every match turned into loads and
//! comparisons with nft's implicit dependencies in front, sets built, and the checks the kernel
//! makes at load time (unknown chain, jump to a base chain, jump loops and depth).

use std::collections::HashMap;

use wasp_ruleset::Error;
use wasp_ruleset::model::{
    BinOp, CtKey, DataType, ElemData, Expr, Family, KeyPart, Match, MetaKey, PayloadField, RelOp,
    Rhs, Ruleset, SetDecl, SetElem, SetRef, Span, Stmt, Table, Value, Verdict,
};

use crate::calc::Calc;
use crate::compare::{ReadKey, Test};
use crate::compiled::{self, ChainId, Op, Program, SetId};
use crate::expr::{Cmp, Load, Src, mask_bits};
use crate::ext::{COUNTER_PLUGIN, CounterUse, ExtKind, ExtSite, Fallback};
use crate::field::{Dep, dep_check, dep_field_load, dtype_width, exthdr_bit, meta_src};
use crate::field::{payload_field, payload_load};
use crate::merge::{Cand, MergeKind};
use crate::setstore::{ElemIn, SetStore};
use crate::stateful::{Bucket, QuotaOwner, QuotaState, Stateful};
use wasp_ruleset::model::{OptHeader, OptSel};

mod stmt;

/// Deepest chain level the kernel accepts below a base chain (`NFT_JUMP_STACK_SIZE`): a chain
/// reached through 16 jumps/gotos makes the load fail with EMLINK ("Too many links").
pub const MAX_JUMP_LEVEL: u32 = 16;

struct Ctx<'r> {
    rs: &'r Ruleset,
    prog: Program,
    /// (table, name) -> use site of each named counter object.
    objects: HashMap<(usize, String), u32>,
    /// The rule being compiled: (table, chain, handle), and how many of its anonymous sets
    /// the compiler has met so far (they own the counters of their elements).
    rule_at: (u32, u32, u64),
    anon_nth: u32,
    /// Buckets and quotas made so far.
    stateful: Stateful,
    /// (table, name) -> bucket of each named limit object.
    limit_objects: HashMap<(usize, String), u32>,
    /// (table, name) -> quota of each named quota object.
    quota_objects: HashMap<(usize, String), u32>,
    /// A `meta cpu|random|time|day|hour` was compiled ([`Program::needs_env`]).
    needs_env: std::cell::Cell<bool>,
    /// A `ct` key of the connection's detail was compiled ([`Program::reads_ct_detail`]).
    reads_ct_detail: std::cell::Cell<bool>,
    /// A rule looks a set up that set statements change, and one changes a set
    /// ([`Program::one_by_one`] when both).
    dyn_read: bool,
    dyn_write: bool,
}

/// Whose set [`Ctx::build_set`] builds, which decides who serves its element counters.
#[derive(Clone, Copy)]
enum SetOwner<'a> {
    /// A named set or map of the table.
    Named(&'a SetDecl),
    /// The `nth` anonymous set of the rule being compiled (`Ctx::rule_at`).
    Anonymous(u32),
    /// A one-element set the compiler makes for a concatenated value (no counters).
    Inline,
}

/// Compile a whole ruleset.
pub(crate) fn compile(rs: &Ruleset) -> Result<Program, Error> {
    let mut cx = Ctx {
        rs,
        prog: Program::default(),
        objects: HashMap::new(),
        rule_at: (0, 0, 0),
        anon_nth: 0,
        stateful: Stateful::default(),
        limit_objects: HashMap::new(),
        quota_objects: HashMap::new(),
        needs_env: std::cell::Cell::new(false),
        reads_ct_detail: std::cell::Cell::new(false),
        dyn_read: false,
        dyn_write: false,
    };
    // Chain ids first, so that jumps can be resolved in any order.
    for (ti, t) in rs.tables.iter().enumerate() {
        for f in &t.flowtables {
            cx.prog.flowtables.push(crate::conn::FlowtableSpec {
                table: ti as u32,
                name: f.name.clone(),
                priority: f.priority,
                devices: f.devices.clone(),
                counter: f.counter,
            });
        }
        cx.prog.tables.push((t.name.clone(), t.family));
        let mut ids = Vec::with_capacity(t.chains.len());
        for (ci, c) in t.chains.iter().enumerate() {
            ids.push(ChainId(cx.prog.chains.len() as u32));
            cx.prog.chains.push(compiled::Chain {
                table: ti as u32,
                index: ci as u32,
                name: c.name.clone(),
                rules: Vec::new(),
                base: c.base.as_ref().map(|b| compiled::Base {
                    chain_type: b.chain_type,
                    hook: b.hook,
                    devices: b.devices.clone(),
                    priority: b.priority,
                    policy: b.policy,
                }),
                family: t.family,
                rank: 0,
            });
        }
        cx.prog.chain_ids.push(ids);
    }
    for (ti, t) in rs.tables.iter().enumerate() {
        for o in &t.counters {
            let args = vec![
                "name".to_string(),
                format!("\"{}\"", o.name),
                "packets".to_string(),
                o.packets.to_string(),
                "bytes".to_string(),
                o.bytes.to_string(),
            ];
            let use_ = CounterUse::Object {
                table: ti as u32,
                name: o.name.clone(),
            };
            let id = cx.counter_site(ti, args, use_, o.span);
            cx.objects.insert((ti, o.name.clone()), id);
        }
        for o in &t.limits {
            let id = cx.stateful.limits.len() as u32;
            cx.stateful.limits.push(Bucket::new(&o.limit));
            cx.limit_objects.insert((ti, o.name.clone()), id);
        }
        for o in &t.quotas {
            let id = cx.stateful.quotas.len() as u32;
            cx.stateful.quotas.push(QuotaState::new(&o.quota));
            cx.stateful.quota_owners.push(QuotaOwner::Object {
                table: ti as u32,
                name: o.name.clone(),
            });
            cx.quota_objects.insert((ti, o.name.clone()), id);
        }
        let named = cx.named_sets(ti, t)?;
        for (ci, c) in t.chains.iter().enumerate() {
            let mut rules: Vec<compiled::Rule> = Vec::with_capacity(c.rules.len());
            for r in &c.rules {
                let (handle, ops) = cx.rule(ti, ci, t, &named, r)?;
                rules.push(compiled::Rule::new(handle, ops, rules.last()));
            }
            let id = cx.prog.chain_ids[ti][ci].idx();
            cx.prog.chains[id].rules = rules;
        }
    }
    check_graph(rs, &mut cx.prog)?;
    mark_cached_reads(&mut cx.prog);
    cx.prog.stateful = std::sync::Arc::new(cx.stateful);
    cx.prog.needs_env = cx.needs_env.get();
    cx.prog.reads_ct_detail = cx.reads_ct_detail.get();
    cx.prog.one_by_one = cx.dyn_read && cx.dyn_write;
    Ok(cx.prog)
}

/// Let the tests whose payload read another test of the program makes too keep their values
/// in the vector pipeline's read cache ([`crate::compare::ReadCache`]).
fn mark_cached_reads(prog: &mut Program) {
    fn tests(prog: &mut Program) -> impl Iterator<Item = &mut Test> {
        prog.chains
            .iter_mut()
            .flat_map(|c| c.rules.iter_mut())
            .flat_map(|r| r.ops.iter_mut())
            .filter_map(|op| match op {
                Op::Test(t) => Some(t),
                _ => None,
            })
    }
    let mut seen: HashMap<ReadKey, u32> = HashMap::new();
    for k in tests(prog).filter_map(|t| t.read_key()) {
        *seen.entry(k).or_default() += 1;
    }
    // Ids in order of first use, for the reads made more than once.
    let mut ids: HashMap<ReadKey, u16> = HashMap::new();
    for t in tests(prog) {
        let Some(k) = t.read_key() else { continue };
        if seen.get(&k).is_some_and(|&n| n > 1) {
            let next = ids.len() + 1;
            let Ok(next) = u16::try_from(next) else {
                continue;
            };
            let id = *ids.entry(k).or_insert(next);
            t.set_read_id(id);
        }
    }
}

fn value_u128(rs: &Ruleset, span: Span, v: &Value) -> Result<u128, Error> {
    if v.bytes.len() > 16 {
        return Err(Error::at(rs, span, "value wider than 128 bits"));
    }
    Ok(v.bytes.iter().fold(0u128, |a, &b| (a << 8) | u128::from(b)))
}

/// Inclusive bounds of a key part in a field of `w` bytes (`rs` names the place of an
/// error).
pub(crate) fn part_bounds(
    rs: &Ruleset,
    part: &KeyPart,
    w: u8,
    span: Span,
) -> Result<(u128, u128), Error> {
    let full = mask_bits(u32::from(w) * 8);
    Ok(match part {
        KeyPart::Value(v) if v.wildcard => {
            let m = ifname_prefix_mask(v);
            let x = value_u128(rs, span, v)? & m;
            (x, x | !m)
        }
        KeyPart::Value(v) => {
            let x = value_u128(rs, span, v)?;
            (x, x)
        }
        KeyPart::Range(a, b) => (value_u128(rs, span, a)?, value_u128(rs, span, b)?),
        KeyPart::Prefix(v, plen) => {
            let bits = u32::from(w) * 8;
            let host = mask_bits(bits.saturating_sub(u32::from(*plen)));
            let x = value_u128(rs, span, v)? & full & !host;
            (x, x | host)
        }
    })
}

/// Mask of the first `n` bytes of a 16-byte interface name.
fn ifname_prefix_mask(v: &Value) -> u128 {
    let n = v.bytes.iter().take_while(|&&b| b != 0).count() as u32;
    if n == 0 { 0 } else { !mask_bits(128 - 8 * n) }
}

/// The link-layer protocol nft knows from the statements of a rule so far (its `proto_ctx` at
/// the link-layer base), which decides how it writes the dependency of a network header field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum LinkCtx {
    /// No link-layer field matched yet: `ip ...` depends on `meta protocol ip`.
    #[default]
    Unknown,
    /// An `ether` field was matched: `ip ...` depends on `ether type ip` (link + 12).
    Ether,
    /// A field of VLAN tag `d` was matched: `ip ...` depends on that tag's `vlan type ip`.
    Vlan(u8),
}

/// The operations of a rule being compiled, each with what nft's payload merge sees in it, and
/// the link-layer context for dependencies.
#[derive(Default)]
struct RuleOps {
    ops: Vec<Op>,
    kinds: Vec<MergeKind>,
    link: LinkCtx,
}

impl RuleOps {
    fn push(&mut self, op: Op, kind: MergeKind) {
        self.ops.push(op);
        self.kinds.push(kind);
    }

    /// Update the link-layer context after a statement that reads `loads`: a read at link + 14
    /// or later is a field of VLAN tag `(off - 14) / 4`, an earlier one an Ethernet field.
    fn note_link_reads(&mut self, loads: &[Load]) {
        for l in loads.iter().filter(|l| l.src == Src::Link) {
            self.link = match (l.off.checked_sub(14), self.link) {
                (Some(o), LinkCtx::Vlan(d)) => LinkCtx::Vlan(d.max((o / 4) as u8)),
                (Some(o), _) => LinkCtx::Vlan((o / 4) as u8),
                (None, LinkCtx::Unknown) => LinkCtx::Ether,
                (None, ctx) => ctx,
            };
        }
    }
}

impl RuleOps {
    /// After `ether type vlan` (`== 0x8100` or `0x88a8` at link + 12) or `vlan type vlan` of
    /// tag `d`, the next header is tag 0 (`d + 1`): nft's protocol context then asks that tag
    /// for the network protocol, so `ip ...` depends on its `vlan type ip` (link + 16 for the
    /// first tag), not on `meta protocol` (nft 1.0.6 `--debug=netlink` of `ether type vlan ip
    /// protocol 1`: `[ payload load 2b @ link header + 16 ]`, `cmp eq 0x0008`).
    fn note_next_is_tag(&mut self, load: &Load, cmp: &Cmp) {
        let whole = load.src == Src::Link
            && load.len == 2
            && load.shift == 0
            && load.xor == 0
            && load.mask == 0xffff;
        if !whole || !matches!(cmp, Cmp::Eq(0x8100 | 0x88a8)) {
            return;
        }
        match load.off {
            12 => self.link = LinkCtx::Vlan(0),
            o if o >= 16 && (o - 16) % 4 == 0 => {
                self.link = LinkCtx::Vlan(((o - 16) / 4 + 1) as u8);
            }
            _ => {}
        }
    }
}

/// Whether a payload field is its header's protocol field (nft's `EXPR_F_PROTOCOL`: the
/// template at `desc->protocol_key`).
fn is_protocol_field(f: PayloadField) -> bool {
    f.is_protocol_key()
}

/// `load & m`, composed into the load's mask and xor.
fn and(mut l: Load, m: u128) -> Load {
    l.mask &= m;
    l.xor &= m;
    l
}

impl Ctx<'_> {
    fn err(&self, span: Span, msg: impl Into<String>) -> Error {
        Error::at(self.rs, span, msg)
    }

    /// The id of output target (`dev`, `via`) of a `fwd` or `dup`, added when new. At most
    /// [`crate::packet::MAX_OUT_TARGETS`] different targets (an [`crate::Outcome`]'s `dup` is a
    /// bitmask over them).
    fn out_target(
        &mut self,
        dev: &str,
        via: Option<std::net::IpAddr>,
        span: Span,
    ) -> Result<u16, Error> {
        let t = &mut self.prog.out_targets;
        if let Some(i) = t.iter().position(|o| &*o.dev == dev && o.via == via) {
            return Ok(i as u16);
        }
        if t.len() >= crate::packet::MAX_OUT_TARGETS {
            return Err(self.err(
                span,
                format!(
                    "too many different fwd/dup targets: wasp takes at most {}",
                    crate::packet::MAX_OUT_TARGETS
                ),
            ));
        }
        t.push(crate::packet::OutTarget {
            dev: dev.into(),
            via,
        });
        Ok((t.len() - 1) as u16)
    }

    fn chain_target(&self, ti: usize, t: &Table, name: &str, span: Span) -> Result<ChainId, Error> {
        let Some(ci) = t.chains.iter().position(|c| c.name == name) else {
            return Err(self.err(
                span,
                format!("unknown chain \"{name}\" in table {}", t.name),
            ));
        };
        if t.chains[ci].base.is_some() {
            return Err(self.err(
                span,
                format!("cannot jump to base chain \"{name}\" (the kernel refuses it: EOPNOTSUPP)"),
            ));
        }
        Ok(self.prog.chain_ids[ti][ci])
    }

    fn verdict(
        &self,
        ti: usize,
        t: &Table,
        v: &Verdict,
        span: Span,
    ) -> Result<compiled::Verdict, Error> {
        Ok(match v {
            Verdict::Accept => compiled::Verdict::Accept,
            Verdict::Drop => compiled::Verdict::Drop,
            Verdict::Continue => compiled::Verdict::Continue,
            Verdict::Return => compiled::Verdict::Return,
            Verdict::Jump(n) => compiled::Verdict::Jump(self.chain_target(ti, t, n, span)?),
            Verdict::Goto(n) => compiled::Verdict::Goto(self.chain_target(ti, t, n, span)?),
        })
    }

    /// Build a set back-end from elements whose fields have the given widths. Returns the set's
    /// index.
    fn build_set(
        &mut self,
        ti: usize,
        t: &Table,
        widths: &[u8],
        elems: &[SetElem],
        verdict_map: bool,
        owner: SetOwner<'_>,
    ) -> Result<SetId, Error> {
        let decl = match owner {
            SetOwner::Named(d) => Some(d),
            _ => None,
        };
        let exact = elems.iter().all(|e| {
            e.key
                .iter()
                .all(|p| matches!(p, KeyPart::Value(v) if !v.wildcard))
        });
        let lens: Vec<usize> = widths.iter().map(|&w| usize::from(w)).collect();
        let key_len: usize = lens.iter().sum();
        let mut verdicts = Vec::new();
        let mut ins = Vec::with_capacity(elems.len());
        // Model indices of the elements that count, and their initial counts as arguments of
        // the set's counter site.
        let mut counted = Vec::new();
        let mut counter_args = Vec::new();
        let mut catch_all = None;
        // The model index of each element of `ins`.
        let mut ins_model = Vec::with_capacity(elems.len());
        for (mi, e) in elems.iter().enumerate() {
            if !e.is_catch_all() && e.key.len() != widths.len() {
                return Err(self.err(
                    e.span,
                    format!(
                        "element has {} fields, the key has {}",
                        e.key.len(),
                        widths.len()
                    ),
                ));
            }
            let mut lo = Vec::with_capacity(key_len);
            let mut hi = Vec::with_capacity(key_len);
            for (part, &w) in e.key.iter().zip(widths) {
                let (a, b) = self.part_bounds(part, w, e.span)?;
                let wb = usize::from(w);
                lo.extend_from_slice(&a.to_be_bytes()[16 - wb..]);
                hi.extend_from_slice(&b.to_be_bytes()[16 - wb..]);
            }
            let value = match &e.data {
                // A map of devices (`fwd to KEY map @m`, `dup to KEY map @m`): the device's
                // output target.
                Some(ElemData::Value(v))
                    if decl.is_some_and(|d| d.data == Some(DataType::IfaceIndex)) =>
                {
                    u32::from(self.out_target(&ifname(&v.bytes), None, e.span)?)
                }
                Some(ElemData::Value(v)) if decl.is_some_and(nat_valued) => {
                    self.push_nat_data(&[KeyPart::Value(v.clone())], e.span)?
                }
                Some(ElemData::Value(v)) => value_u128(self.rs, e.span, v)? as u32,
                Some(ElemData::Nat(parts)) => self.push_nat_data(parts, e.span)?,
                _ => 0,
            };
            let verdict = if verdict_map {
                let Some(ElemData::Verdict(v)) = &e.data else {
                    return Err(self.err(e.span, "verdict map element without a verdict"));
                };
                verdicts.push(self.verdict(ti, t, v, e.span)?);
                (verdicts.len() - 1) as u32
            } else {
                0
            };
            // Remaining life: `expires`, else the element's `timeout`, else the set's.
            let life_ms = e
                .expires_ms()
                .or(e.timeout_ms())
                .or(decl.and_then(|d| d.timeout_ms));
            let expires = life_ms.map_or(u64::MAX, |ms| ms.saturating_mul(1_000_000));
            if e.counter && e.data.is_some() && matches!(owner, SetOwner::Anonymous(_)) {
                // nft 1.0.6 refuses a counter on an anonymous map's element (the map has no
                // statement declared for its elements), naming the `counter`.
                return Err(self.err(
                    e.counter_span().unwrap_or(e.span),
                    "missing statement in map declaration",
                ));
            }
            let counts = match owner {
                SetOwner::Named(d) => d.counter || e.counter,
                SetOwner::Anonymous(_) => e.counter,
                SetOwner::Inline => false,
            };
            let counter = if counts {
                counted.push(mi);
                if e.packets() != 0 || e.bytes() != 0 {
                    counter_args.extend([
                        "elem".to_string(),
                        (mi + 1).to_string(),
                        "packets".to_string(),
                        e.packets().to_string(),
                        "bytes".to_string(),
                        e.bytes().to_string(),
                    ]);
                }
                (mi + 1) as u32
            } else {
                0
            };
            let elem = compiled::Elem {
                verdict,
                value,
                expires,
                counter,
                // A named set's listing from its compiled set names each element's file.
                origin: if decl.is_some() { e.span.file } else { 0 },
            };
            if e.is_catch_all() {
                // The parser keeps one catch-all per set.
                catch_all = Some(elem);
            } else {
                ins.push(ElemIn { lo, hi, elem });
                ins_model.push(mi);
            }
        }
        match compiled::Set::build(&lens, exact, ins, verdicts.into()) {
            Ok(mut set) => {
                set.catch_all = catch_all;
                let site = match owner {
                    _ if counted.is_empty() => None,
                    SetOwner::Named(d) => Some((
                        CounterUse::Set {
                            table: ti as u32,
                            set: d.name.clone(),
                            elements: std::sync::Arc::new(crate::ext::CountedElems::numbered(
                                &counted,
                                elems.len(),
                            )),
                        },
                        d.span,
                    )),
                    SetOwner::Anonymous(nth) => {
                        let (table, chain, handle) = self.rule_at;
                        let span = elems[counted[0]].span;
                        Some((
                            CounterUse::AnonSet {
                                table,
                                chain,
                                handle,
                                nth,
                                elements: counted,
                            },
                            span,
                        ))
                    }
                    SetOwner::Inline => None,
                };
                if let Some((use_, span)) = site {
                    set.counter_site = Some(self.counter_site(ti, counter_args, use_, span));
                }
                self.prog.sets.push(std::sync::Arc::new(set));
                Ok(SetId((self.prog.sets.len() - 1) as u32))
            }
            Err(i) => Err(self.err(
                elems[ins_model[i]].span,
                "range with its low end above its high end",
            )),
        }
    }

    /// Inclusive bounds of a key part in a field of `w` bytes ([`part_bounds`]).
    fn part_bounds(&self, part: &KeyPart, w: u8, span: Span) -> Result<(u128, u128), Error> {
        part_bounds(self.rs, part, w, span)
    }

    /// Move named set `id` (declared as `s`, fields of `widths` bytes) to a
    /// [`crate::dynset::DynSet`] that set statements change, with its declared elements.
    fn make_dynamic(
        &mut self,
        ti: usize,
        id: SetId,
        s: &SetDecl,
        widths: &[u8],
    ) -> Result<(), Error> {
        let timeout_ns = s.timeout_ms.map_or(0, |ms| ms.saturating_mul(1_000_000));
        let mut d = crate::dynset::DynSet::new(s.size.map_or(65_535, |n| n as usize), timeout_ns)
            .with_counter(s.counter);
        for e in &s.elements {
            let mut key = Vec::new();
            for (part, &w) in e.key.iter().zip(widths) {
                let (a, _) = self.part_bounds(part, w, e.span)?;
                key.extend_from_slice(&a.to_be_bytes()[16 - usize::from(w)..]);
            }
            if let Some(elem) = self.prog.sets[id].lookup(&key, 0) {
                d.preload(&key, *elem);
            }
        }
        let set = &mut self.prog.sets[id];
        set.store = SetStore::Dynamic(self.stateful.dynsets.len() as u32);
        self.stateful.dynsets.push(d);
        self.stateful
            .dynset_owners
            .push((ti as u32, s.name.clone(), widths.to_vec()));
        Ok(())
    }

    fn named_sets(
        &mut self,
        ti: usize,
        t: &Table,
    ) -> Result<HashMap<String, (SetId, Vec<u8>)>, Error> {
        let mut out = HashMap::new();
        let mut ids = Vec::with_capacity(t.sets.len());
        // The sets that set statements change (a map changed so is not `flags dynamic`).
        let changed: std::collections::HashSet<&str> = t
            .chains
            .iter()
            .flat_map(|c| &c.rules)
            .flat_map(|r| &r.stmts)
            .filter_map(|s| match s {
                Stmt::SetUpdate(u) => Some(u.set.as_str()),
                _ => None,
            })
            .collect();
        for s in &t.sets {
            let widths = self.decl_widths(s);
            let is_vmap = s.is_map && s.data == Some(DataType::Verdict);
            // Elements held by the running program's set are listed for the build.
            let listed: Vec<SetElem>;
            let elems = match s.elements.as_slice() {
                Some(v) => v,
                None => {
                    listed = s
                        .elements
                        .iter()
                        .map(std::borrow::Cow::into_owned)
                        .collect();
                    &listed
                }
            };
            let id = self.build_set(ti, t, &widths, elems, is_vmap, SetOwner::Named(s))?;
            if (s.flags.dynamic || changed.contains(s.name.as_str()))
                && !s.flags.interval
                && !is_vmap
            {
                self.make_dynamic(ti, id, s, &widths)?;
            }
            out.insert(s.name.clone(), (id, widths));
            ids.push(id);
        }
        if self.prog.named_sets.len() <= ti {
            self.prog.named_sets.resize(ti + 1, Vec::new());
        }
        self.prog.named_sets[ti] = ids;
        Ok(out)
    }

    fn decl_widths(&self, s: &SetDecl) -> Vec<u8> {
        s.key.iter().map(|&d| dtype_width(d)).collect()
    }

    /// Loads of an expression (one per concatenated field) and the dependencies they need.
    fn expr(
        &self,
        e: &Expr,
        span: Span,
        loads: &mut Vec<Load>,
        deps: &mut Vec<Dep>,
    ) -> Result<(), Error> {
        match e {
            Expr::Payload(f) => {
                let (pos, d) = payload_field(*f);
                deps.extend_from_slice(d);
                loads.push(payload_load(pos));
            }
            Expr::Meta(k) => {
                if matches!(
                    k,
                    MetaKey::Cpu
                        | MetaKey::Random
                        | MetaKey::Time
                        | MetaKey::Day
                        | MetaKey::Hour
                        | MetaKey::Pkttype
                ) {
                    self.needs_env.set(true);
                }
                let (src, w) = meta_src(*k);
                let mut l = Load::meta(src, w);
                if let Some(c) = crate::field::meta_const(*k) {
                    l.mask = 0;
                    l.xor = c;
                }
                loads.push(l);
            }
            Expr::Ct(k) => {
                let (src, w) = match k {
                    CtKey::State => (Src::CtState, 4),
                    CtKey::Direction => (Src::CtDir, 1),
                    CtKey::Status => (Src::CtStatus, 4),
                    CtKey::Mark => (Src::CtMark, 4),
                    k => {
                        self.reads_ct_detail.set(true);
                        (Src::CtDetail(*k), k.dtype().width_bytes() as u8)
                    }
                };
                loads.push(Load::meta(src, w));
            }
            Expr::ExthdrExists(h) => {
                deps.push(Dep::Ipv6);
                loads.push(Load::meta(Src::Exthdr(exthdr_bit(*h)), 1));
            }
            Expr::Raw {
                base,
                offset_bits,
                len_bits,
            } => loads.push(crate::field::raw_load(*base, *offset_bits, *len_bits)),
            // No IPsec state and no local sockets in wasp: the loads fail (NFT_BREAK).
            Expr::Ipsec(_) | Expr::Socket(_) => {
                loads.push(Load::meta(Src::Never, e.dtype().width_bytes() as u8));
            }
            Expr::Osf { .. } => loads.push(Load::meta(Src::Osf, 16)),
            Expr::Fib(f) => loads.push(Load::meta(Src::Fib(*f), f.dtype().width_bytes() as u8)),
            Expr::Rt(k) => loads.push(Load::meta(Src::Rt(*k), k.dtype().width_bytes() as u8)),
            Expr::Opt(o) => {
                let sctp = o.hdr == OptHeader::SctpChunk;
                let kind = o.kind;
                let (off_bits, len_bits, _) = o.position();
                loads.push(if o.sel == OptSel::Exists {
                    Load::meta(
                        Src::Opt {
                            sctp,
                            kind,
                            present: true,
                        },
                        1,
                    )
                } else {
                    payload_load(crate::field::FieldPos {
                        src: Src::Opt {
                            sctp,
                            kind,
                            present: false,
                        },
                        off_bits: u32::from(off_bits),
                        len_bits: u32::from(len_bits),
                    })
                });
            }
            Expr::Concat(parts) => {
                for p in parts {
                    if matches!(p, Expr::Concat(_)) {
                        return Err(self.err(span, "nested concatenation"));
                    }
                    self.expr(p, span, loads, deps)?;
                }
            }
            Expr::Binop { expr, op, value } => {
                let start = loads.len();
                self.expr(expr, span, loads, deps)?;
                if loads.len() != start + 1 {
                    return Err(self.err(span, "a bitwise operation needs a single field"));
                }
                let v = value_u128(self.rs, span, value)?;
                let l = &mut loads[start];
                let m = l.mask;
                match op {
                    BinOp::And => *l = and(*l, v),
                    BinOp::Or => {
                        l.mask &= !v;
                        l.xor = (l.xor & !v) ^ (v & m);
                    }
                    BinOp::Xor => l.xor ^= v & m,
                    BinOp::Lshift | BinOp::Rshift => {
                        return Err(self.err(
                            span,
                            "a shift gives a value only to a statement (`meta mark set ct mark >> 8`)",
                        ));
                    }
                }
            }
            Expr::Const(v) => {
                let w = v.bytes.len().clamp(1, 16) as u8;
                loads.push(Load::constant(value_u128(self.rs, span, v)?, w));
            }
            Expr::Map { .. } => {
                return Err(self.err(span, "a map lookup gives a value only to a statement"));
            }
            Expr::Numgen { .. } | Expr::Jhash { .. } | Expr::Symhash { .. } => {
                return Err(self.err(
                    span,
                    "`numgen`, `jhash` and `symhash` give a value only to a statement (`meta mark set`, `ct mark set`, `dnat to`)",
                ));
            }
        }
        Ok(())
    }

    /// Put the implicit dependencies in front, unless the rule already matches that field. A
    /// payload dependency (`ether type 8021q` for a vlan field) is an `==` payload match that nft
    /// may merge with its neighbours.
    ///
    /// The network dependency follows nft's protocol context (`payload_gen_dependency` asks the
    /// header below for its protocol field): `meta protocol ip` (`meta nfproto ipv4` in inet)
    /// when the rule has matched no link-layer field before, but `ether type ip` after an
    /// `ether` field and `vlan type ip` after a `vlan` field. The difference matters for tagged
    /// frames: `ether saddr X ip saddr Y` reads the rebuilt frame's EtherType at offset 12, which
    /// is 0x8100 there, so it never matches a tagged frame, while `ip saddr Y` alone does (nft
    /// 1.0.6 `--debug=netlink`: `[ payload load 8b @ link header + 6 ]` with the 0x0800 in it).
    /// Loads of a statement's value expression (one per concatenated field), with the
    /// dependency checks it needs put in front.
    fn value_loads(
        &self,
        family: Family,
        e: &Expr,
        span: Span,
        ops: &mut RuleOps,
    ) -> Result<Vec<Load>, Error> {
        let mut loads = Vec::new();
        let mut deps = Vec::new();
        self.expr(e, span, &mut loads, &mut deps)?;
        self.deps(family, &deps, ops);
        ops.note_link_reads(&loads);
        Ok(loads)
    }

    /// A statement's value ([`Calc`]): a plain field or constant is one load; shifts,
    /// bitwise operations on a computed value, `numgen`, `jhash`, `symhash` and `KEY map`
    /// are computed (see [`crate::calc`]). Dependencies of the fields read go in front.
    #[allow(clippy::too_many_arguments)]
    fn calc(
        &mut self,
        ti: usize,
        t: &Table,
        named: &HashMap<String, (SetId, Vec<u8>)>,
        e: &Expr,
        span: Span,
        ops: &mut RuleOps,
    ) -> Result<Calc, Error> {
        if let Expr::Numgen { modulus: 0, .. }
        | Expr::Jhash { modulus: 0, .. }
        | Expr::Symhash { modulus: 0, .. } = e
        {
            return Err(self.err(span, "the modulus must be at least 1"));
        }
        Ok(match e {
            Expr::Numgen {
                random: true,
                modulus,
                offset,
            } => {
                self.needs_env.set(true);
                Calc::NumgenRandom {
                    modulus: *modulus,
                    offset: *offset,
                }
            }
            Expr::Numgen {
                random: false,
                modulus,
                offset,
            } => {
                let counter = self.stateful.numgens.len() as u32;
                // `nft_ng_inc_init`: the counter starts at `modulus - 1`.
                self.stateful
                    .numgens
                    .push(std::sync::atomic::AtomicU32::new(modulus - 1));
                Calc::NumgenInc {
                    counter,
                    modulus: *modulus,
                    offset: *offset,
                }
            }
            Expr::Jhash {
                expr,
                modulus,
                seed,
                offset,
            } => {
                let loads = self.value_loads(t.family, expr, span, ops)?;
                let parts: Vec<&Expr> = match &**expr {
                    Expr::Concat(p) => p.iter().collect(),
                    e => vec![e],
                };
                let host = parts
                    .iter()
                    .enumerate()
                    .filter(|(_, p)| host_order_register(p))
                    .fold(0u32, |acc, (i, _)| acc | 1 << i.min(31));
                Calc::Jhash {
                    keys: loads.into(),
                    host,
                    seed: seed.unwrap_or(0),
                    modulus: *modulus,
                    offset: *offset,
                }
            }
            Expr::Symhash { modulus, offset } => Calc::Symhash {
                modulus: *modulus,
                offset: *offset,
            },
            Expr::Map { key, map, .. } => {
                let parts: Vec<&Expr> = match &**key {
                    Expr::Concat(p) => p.iter().collect(),
                    e => vec![e],
                };
                let mut keys = Vec::with_capacity(parts.len());
                let mut widths = Vec::with_capacity(parts.len());
                for p in parts {
                    keys.push(self.calc(ti, t, named, p, span, ops)?);
                    widths.push(dtype_width(p.dtype()));
                }
                let set = self.set_ref_widths(ti, t, named, map, &widths, false, span)?;
                Calc::Map {
                    keys: keys.into(),
                    widths: widths.into(),
                    set,
                }
            }
            Expr::Binop { expr, op, value } if needs_calc(e) => {
                let inner = self.calc(ti, t, named, expr, span, ops)?;
                let v = value_u128(self.rs, span, value)?;
                let width = dtype_width(expr.dtype());
                let all = crate::expr::mask_bytes(width);
                let inner = Box::new(inner);
                match op {
                    BinOp::And => Calc::Bits {
                        inner,
                        mask: v & all,
                        xor: 0,
                    },
                    BinOp::Or => Calc::Bits {
                        inner,
                        mask: !v & all,
                        xor: v & all,
                    },
                    BinOp::Xor => Calc::Bits {
                        inner,
                        mask: all,
                        xor: v & all,
                    },
                    BinOp::Lshift | BinOp::Rshift => Calc::Shift {
                        inner,
                        left: *op == BinOp::Lshift,
                        bits: v.min(128) as u32,
                        width,
                    },
                }
            }
            _ => {
                let loads = self.value_loads(t.family, e, span, ops)?;
                let [l] = loads.as_slice() else {
                    return Err(self.err(span, "a statement's value is a single field here"));
                };
                Calc::Load(*l)
            }
        })
    }

    /// The NAT target of `parts` ([`Ctx::nat_data`]) added to the program: its index in
    /// [`crate::compiled::Program::nat_data`], the value a NAT map's lookup gives.
    pub(crate) fn push_nat_data(&mut self, parts: &[KeyPart], span: Span) -> Result<u32, Error> {
        let target = self.nat_data(parts, span)?;
        self.prog.nat_data.push(target);
        Ok((self.prog.nat_data.len() - 1) as u32)
    }

    /// The NAT target of a NAT map element's data (an address range, maybe a port range).
    fn nat_data(&self, parts: &[KeyPart], span: Span) -> Result<crate::conn::NatTarget, Error> {
        let mut target = crate::conn::NatTarget {
            addr: None,
            ports: None,
            netmap: false,
        };
        for (i, part) in parts.iter().enumerate() {
            let w = match part {
                KeyPart::Value(v) | KeyPart::Range(v, _) | KeyPart::Prefix(v, _) => {
                    dtype_width(v.dtype)
                }
            };
            let (lo, hi) = self.part_bounds(part, w, span)?;
            if i == 0 {
                let ip = |n: u128| match w {
                    4 => std::net::IpAddr::from((n as u32).to_be_bytes()),
                    _ => std::net::IpAddr::from(n.to_be_bytes()),
                };
                target.addr = Some((ip(lo), ip(hi)));
            } else {
                target.ports = Some((lo as u16, hi as u16));
            }
        }
        Ok(target)
    }

    fn deps(&self, family: Family, deps: &[Dep], ops: &mut RuleOps) {
        for &d in deps {
            // An ip or ip6 table's hooks see packets of its family only: nft 1.0.6 puts no
            // network dependency there (`icmpv6 type 1` in an ip table is `meta l4proto 58`
            // alone, and matches an IPv4 packet whose protocol is 58).
            if matches!(family, Family::Ip | Family::Ip6) && matches!(d, Dep::Ipv4 | Dep::Ipv6) {
                continue;
            }
            let meta = dep_field_load(d, family);
            let (load, v) = match (d, ops.link) {
                (Dep::Ipv4 | Dep::Ipv6, LinkCtx::Ether | LinkCtx::Vlan(_)) => {
                    let f = match ops.link {
                        LinkCtx::Vlan(depth) => PayloadField::VLAN_TYPE.at_depth(depth),
                        _ => PayloadField::ETHER_TYPE,
                    };
                    let v = if d == Dep::Ipv4 { 0x0800 } else { 0x86dd };
                    (payload_load(payload_field(f).0), v)
                }
                _ => dep_check(d, family),
            };
            let present = ops
                .ops
                .iter()
                .any(|o| matches!(o, Op::Cmp(lc) if lc.0 == meta || lc.0 == load));
            if !present {
                let kind = match load.src {
                    Src::Link | Src::Net | Src::Transport => MergeKind::Candidate(Cand {
                        src: load.src,
                        off: load.off,
                        len: load.len,
                        value: v,
                        ne: false,
                        protocol: true,
                    }),
                    _ => MergeKind::Other,
                };
                ops.push(Op::Cmp(Box::new((load, Cmp::Eq(v)))), kind);
            }
        }
    }

    /// What nft's `stmt_reduce` sees in match `m`: a candidate when it is a whole-byte payload
    /// field (no bitwise operation) against one plain value with `==`, an implicit `==` or `!=`
    /// (`tcp flags syn` is a bitwise test, `10.0.0.0/8` a prefix: neither merges).
    fn merge_kind(&self, m: &Match) -> Result<MergeKind, Error> {
        let Expr::Payload(f) = m.left else {
            return Ok(MergeKind::Other);
        };
        let Rhs::Key(parts) = &m.right else {
            return Ok(MergeKind::Other);
        };
        let [KeyPart::Value(v)] = parts.as_slice() else {
            return Ok(MergeKind::Other);
        };
        let ne = match m.op {
            RelOp::Implicit if v.dtype == DataType::TcpFlag => return Ok(MergeKind::Other),
            RelOp::Implicit | RelOp::Eq => false,
            RelOp::Ne => true,
            _ => return Ok(MergeKind::Other),
        };
        let (pos, _) = payload_field(f);
        if v.wildcard || pos.off_bits % 8 != 0 || pos.len_bits % 8 != 0 {
            return Ok(MergeKind::Other);
        }
        Ok(MergeKind::Candidate(Cand {
            src: pos.src,
            off: (pos.off_bits / 8) as u16,
            len: (pos.len_bits / 8) as u8,
            value: value_u128(self.rs, m.span, v)?,
            ne,
            protocol: is_protocol_field(f),
        }))
    }

    #[allow(clippy::too_many_arguments)]
    fn set_ref(
        &mut self,
        ti: usize,
        t: &Table,
        named: &HashMap<String, (SetId, Vec<u8>)>,
        sref: &SetRef,
        loads: &[Load],
        vmap: bool,
        span: Span,
    ) -> Result<SetId, Error> {
        let widths: Vec<u8> = loads.iter().map(|l| l.width).collect();
        self.set_ref_widths(ti, t, named, sref, &widths, vmap, span)
    }

    /// [`Self::set_ref`] for keys of `widths` bytes per field.
    #[allow(clippy::too_many_arguments)]
    fn set_ref_widths(
        &mut self,
        ti: usize,
        t: &Table,
        named: &HashMap<String, (SetId, Vec<u8>)>,
        sref: &SetRef,
        widths: &[u8],
        vmap: bool,
        span: Span,
    ) -> Result<SetId, Error> {
        let widths = widths.to_vec();
        match sref {
            SetRef::Anonymous(elems) => {
                let nth = self.anon_nth;
                self.anon_nth += 1;
                self.build_set(ti, t, &widths, elems, vmap, SetOwner::Anonymous(nth))
            }
            SetRef::Named(n) => {
                let Some((id, w)) = named.get(n) else {
                    return Err(self.err(span, format!("unknown set \"{n}\" in table {}", t.name)));
                };
                if *w != widths {
                    return Err(self.err(
                        span,
                        format!("datatype mismatch: set \"{n}\" has keys of {w:?} bytes per field, the expression gives {widths:?}"),
                    ));
                }
                if vmap
                    && self.prog.sets[*id].verdicts.is_empty()
                    && !self.prog.sets[*id].is_empty()
                {
                    return Err(self.err(span, format!("\"{n}\" is not a verdict map")));
                }
                if matches!(self.prog.sets[*id].store, SetStore::Dynamic(_)) {
                    self.dyn_read = true;
                }
                Ok(*id)
            }
        }
    }

    fn matcher(
        &mut self,
        ti: usize,
        t: &Table,
        named: &HashMap<String, (SetId, Vec<u8>)>,
        m: &Match,
        ops: &mut RuleOps,
    ) -> Result<(), Error> {
        let mut loads = Vec::new();
        let mut deps = Vec::new();
        self.expr(&m.left, m.span, &mut loads, &mut deps)?;
        self.deps(t.family, &deps, ops);
        ops.note_link_reads(&loads);
        let neg = match m.op {
            RelOp::Implicit | RelOp::Eq => false,
            RelOp::Ne => true,
            _ => {
                if let Rhs::Key(p) = &m.right
                    && loads.len() == 1
                    && p.len() == 1
                    && matches!(p[0], KeyPart::Value(_))
                {
                    false
                } else {
                    return Err(
                        self.err(m.span, "<, >, <= and >= need a single value on the right")
                    );
                }
            }
        };
        match &m.right {
            Rhs::Set(sref) => {
                let set = self.set_ref(ti, t, named, sref, &loads, false, m.span)?;
                ops.push(
                    Op::Lookup {
                        keys: loads.into(),
                        set,
                        neg,
                    },
                    MergeKind::Other,
                );
            }
            Rhs::Key(parts) if parts.len() != loads.len() => {
                return Err(self.err(
                    m.span,
                    format!(
                        "the expression has {} fields, the value {}",
                        loads.len(),
                        parts.len()
                    ),
                ));
            }
            Rhs::Key(parts) if parts.len() > 1 => {
                // A concatenated key: a one-element set, as nft does.
                let elem = SetElem::new(parts.clone(), m.span);
                let widths: Vec<u8> = loads.iter().map(|l| l.width).collect();
                let set = self.build_set(ti, t, &widths, &[elem], false, SetOwner::Inline)?;
                ops.push(
                    Op::Lookup {
                        keys: loads.into(),
                        set,
                        neg,
                    },
                    MergeKind::Other,
                );
            }
            Rhs::Key(parts) => {
                let load = loads[0];
                // With a bitwise operation on the left, an implicit operator is `==` even for
                // a bitmask type: nft compiles `tcp flags & (fin | syn) syn` to a bitwise and
                // then `cmp eq` (and lists it with `==`), not to a flag test.
                let op = match (m.op, &m.left) {
                    (RelOp::Implicit, Expr::Binop { .. }) => RelOp::Eq,
                    (op, _) => op,
                };
                let (load, cmp) = self.single(load, op, &parts[0], m.span)?;
                ops.note_next_is_tag(&load, &cmp);
                // `meta iiftype ether` sets nft's link-layer protocol context to Ethernet: a
                // later `ip ...` depends on `ether type ip` (link + 12), as after an `ether`
                // field (nft 1.0.6 `--debug=netlink` of `iiftype ether ip daddr 1.2.3.4`).
                if matches!(m.left, Expr::Meta(MetaKey::Iiftype))
                    && cmp == Cmp::Eq(1)
                    && ops.link == LinkCtx::Unknown
                {
                    ops.link = LinkCtx::Ether;
                }
                ops.push(Op::Cmp(Box::new((load, cmp))), self.merge_kind(m)?);
            }
        }
        Ok(())
    }

    /// One field against one key part.
    fn single(
        &self,
        load: Load,
        op: RelOp,
        part: &KeyPart,
        span: Span,
    ) -> Result<(Load, Cmp), Error> {
        let ne = op == RelOp::Ne;
        Ok(match part {
            KeyPart::Value(v) if v.wildcard => {
                let m = ifname_prefix_mask(v);
                let x = value_u128(self.rs, span, v)? & m;
                let l = and(load, m);
                (l, if ne { Cmp::Ne(x) } else { Cmp::Eq(x) })
            }
            KeyPart::Value(v) => {
                let x = value_u128(self.rs, span, v)?;
                match op {
                    RelOp::Implicit if v.dtype == DataType::TcpFlag => (and(load, x), Cmp::Ne(0)),
                    // Bitmask types: a flag test, as nft encodes `ct state new` and
                    // `ct state != invalid` (bitwise and, then cmp neq / eq 0).
                    RelOp::Implicit
                        if matches!(v.dtype, DataType::CtState | DataType::CtStatus) =>
                    {
                        (and(load, x), Cmp::Ne(0))
                    }
                    RelOp::Ne if matches!(v.dtype, DataType::CtState | DataType::CtStatus) => {
                        (and(load, x), Cmp::Eq(0))
                    }
                    RelOp::Implicit | RelOp::Eq => (load, Cmp::Eq(x)),
                    RelOp::Ne => (load, Cmp::Ne(x)),
                    RelOp::Lt => (load, Cmp::Lt(x)),
                    RelOp::Gt => (load, Cmp::Gt(x)),
                    RelOp::Le => (load, Cmp::Le(x)),
                    RelOp::Ge => (load, Cmp::Ge(x)),
                }
            }
            KeyPart::Range(a, b) => {
                let (a, b) = (value_u128(self.rs, span, a)?, value_u128(self.rs, span, b)?);
                if a > b {
                    return Err(self.err(span, "range with its low end above its high end"));
                }
                (load, if ne { Cmp::NotIn(a, b) } else { Cmp::In(a, b) })
            }
            KeyPart::Prefix(_, plen) => {
                let (lo, hi) = self.part_bounds(part, load.width, span)?;
                let pm = !(lo ^ hi) & mask_bits(u32::from(load.width) * 8);
                let mut l = and(load, pm);
                // nft loads only the bytes the prefix covers (`ip saddr 10.0.0.0/8` is a 1-byte
                // load), so only those need to be inside the frame.
                let whole = load.shift == 0
                    && load.xor == 0
                    && load.len == load.width
                    && load.mask == mask_bits(u32::from(load.width) * 8);
                if whole && matches!(load.src, Src::Link | Src::Net | Src::Transport) {
                    l.need = (u32::from(*plen).div_ceil(8)).clamp(1, u32::from(load.len)) as u8;
                }
                (l, if ne { Cmp::Ne(lo) } else { Cmp::Eq(lo) })
            }
        })
    }

    /// A use site of the counter plugin for `use_`, with the plugin's arguments `args`.
    fn counter_site(&mut self, ti: usize, args: Vec<String>, use_: CounterUse, span: Span) -> u32 {
        let id = self.prog.ext_sites.len() as u32;
        self.prog.ext_sites.push(ExtSite {
            id,
            table: ti as u32,
            plugin: COUNTER_PLUGIN.to_string(),
            kind: ExtKind::Stateful,
            args,
            fallback: Fallback::Absent,
        });
        self.prog.ext_spans.push(span);
        self.prog.counter_uses.push(Some(use_));
        id
    }
}

/// Targets of jumps and gotos in a chain's rules (and in the verdict maps they use), with the
/// span of the rule.
/// `true` when `e` needs [`Calc`] rather than one [`Load`] (a shift, or a bitwise operation
/// on something computed).
fn needs_calc(e: &Expr) -> bool {
    match e {
        Expr::Binop {
            op: BinOp::Lshift | BinOp::Rshift,
            ..
        }
        | Expr::Numgen { .. }
        | Expr::Jhash { .. }
        | Expr::Symhash { .. }
        | Expr::Map { .. } => true,
        Expr::Binop { expr, .. } => needs_calc(expr),
        _ => false,
    }
}

/// `true` for an expression the kernel loads into its register in host byte order (the meta
/// keys but the protocol numbers and device names; `ct mark|state|status|zone|...`): `jhash`
/// reads its bytes as a little-endian number's.
fn host_order_register(e: &Expr) -> bool {
    match e {
        Expr::Meta(k) => !matches!(
            k,
            MetaKey::Protocol
                | MetaKey::L4proto
                | MetaKey::Nfproto
                | MetaKey::Iifname
                | MetaKey::Oifname
        ),
        Expr::Ct(k) => matches!(
            k,
            CtKey::Mark
                | CtKey::State
                | CtKey::Status
                | CtKey::Zone(_)
                | CtKey::Expiration
                | CtKey::Id
                | CtKey::Bytes(_)
                | CtKey::Packets(_)
                | CtKey::Avgpkt(_)
        ),
        Expr::Binop { expr, .. } => host_order_register(expr),
        _ => false,
    }
}

fn edges(prog: &Program, rs: &Ruleset, c: ChainId) -> Vec<(ChainId, Span)> {
    let ch = &prog.chains[c];
    let model = &rs.tables[ch.table as usize].chains[ch.index as usize];
    let mut out = Vec::new();
    for (r, m) in ch.rules.iter().zip(&model.rules) {
        for op in r.ops.iter() {
            match op {
                Op::Verdict(compiled::Verdict::Jump(t) | compiled::Verdict::Goto(t)) => {
                    out.push((*t, m.span))
                }
                Op::Vmap { set, .. } => {
                    for v in prog.sets[*set].verdicts.iter() {
                        if let compiled::Verdict::Jump(t) | compiled::Verdict::Goto(t) = v {
                            out.push((*t, m.span));
                        }
                    }
                }
                _ => {}
            }
        }
    }
    out
}

/// The kernel's load-time walk from every base chain (nft_chain_validate): a chain reached at
/// level 16 (through jumps and gotos; a loop reaches any level) fails with EMLINK. Chains no base
/// chain reaches are not checked (the kernel accepts a loop between unreferenced chains). Also
/// numbers the chains in topological order for the vector pipeline.
fn check_graph(rs: &Ruleset, prog: &mut Program) -> Result<(), Error> {
    let n = prog.chains.len();
    let adj: Vec<Vec<(ChainId, Span)>> =
        (0..n as u32).map(|c| edges(prog, rs, ChainId(c))).collect();
    // 0 = unvisited, 1 = on stack, 2 = done
    let mut state = vec![0u8; n];
    let mut height = vec![0u32; n];
    let mut post: Vec<ChainId> = Vec::with_capacity(n);
    for root in 0..n {
        if prog.chains[root].base.is_none() || state[root] != 0 {
            continue;
        }
        // Iterative DFS: (chain, next edge index).
        let mut stack: Vec<(usize, usize)> = vec![(root, 0)];
        state[root] = 1;
        while let Some(&mut (c, ref mut i)) = stack.last_mut() {
            if let Some(&(t, span)) = adj[c].get(*i) {
                *i += 1;
                let t = t.idx();
                match state[t] {
                    0 => {
                        state[t] = 1;
                        stack.push((t, 0));
                    }
                    1 => {
                        return Err(Error::at(
                            rs,
                            span,
                            format!(
                                "jump loop: chain \"{}\" is reached again from chain \"{}\" (the kernel refuses it: Too many links)",
                                prog.chains[t].name, prog.chains[c].name
                            ),
                        ));
                    }
                    _ => {}
                }
            } else {
                height[c] = adj[c]
                    .iter()
                    .map(|&(t, _)| height[t.idx()] + 1)
                    .max()
                    .unwrap_or(0);
                state[c] = 2;
                post.push(ChainId(c as u32));
                stack.pop();
            }
        }
        if height[root] >= MAX_JUMP_LEVEL {
            // Walk down the deepest path to the jump that reaches level 16.
            let mut c = root;
            let mut level = 0;
            while let Some(&(t, span)) = adj[c].iter().max_by_key(|&&(t, _)| height[t.idx()]) {
                level += 1;
                if level >= MAX_JUMP_LEVEL {
                    return Err(Error::at(
                        rs,
                        span,
                        format!(
                            "chain \"{}\" would be reached through {level} jumps from base chain \"{}\"; the kernel allows at most {} (Too many links)",
                            prog.chains[t].name,
                            prog.chains[root].name,
                            MAX_JUMP_LEVEL - 1
                        ),
                    ));
                }
                c = t.idx();
            }
        }
    }
    // Reverse postorder: callers before callees. Unreached chains go last.
    for c in prog.chains.iter_mut() {
        c.rank = n as u32;
    }
    for (i, &c) in post.iter().rev().enumerate() {
        prog.chains[c].rank = i as u32;
    }
    Ok(())
}

/// A key read from the packet as it is (fields, constants, bitwise operations with a constant),
/// not computed (`numgen`, `jhash`, `symhash`, shifts, a map's value): a map lookup on it is one
/// key load ([`Op::SetMarkMap`]), else a [`Calc`].
fn read_only(e: &Expr) -> bool {
    match e {
        Expr::Concat(p) => p.iter().all(read_only),
        Expr::Numgen { .. } | Expr::Jhash { .. } | Expr::Symhash { .. } | Expr::Map { .. } => false,
        Expr::Binop { expr, op, .. } => {
            !matches!(op, BinOp::Lshift | BinOp::Rshift) && read_only(expr)
        }
        _ => true,
    }
}

/// A named map whose values the compiled set holds as indices into [`Program::nat_data`]
/// (what a NAT statement's lookup gives, [`crate::compiled::NatCalc::map_data`]): data of an
/// address or of several fields (an address and a port). wasp reads such data only in NAT
/// statements (`dnat to KEY map @m`).
///
/// [`Program::nat_data`]: crate::compiled::Program::nat_data
pub(crate) fn nat_valued(decl: &wasp_ruleset::model::SetDecl) -> bool {
    matches!(decl.data, Some(DataType::Ipv4Addr | DataType::Ipv6Addr)) || !decl.data_tail.is_empty()
}

/// A device name from an `ifname` / `iface_index` value's bytes (NUL-padded).
pub(crate) fn ifname(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|c| *c == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}
