//! A rule's statements to ops: [`Ctx::rule`] compiles them in order, one function per
//! statement kind, and stops after the first that ends the rule (a verdict, a verdict map,
//! `reject`, `fwd`, a NAT statement): the statements after it are not compiled. Then nft's
//! payload merge runs over the rule's ops, and matches are lowered to their field's width.

use std::collections::HashMap;

use wasp_ruleset::Error;
use wasp_ruleset::model::{
    CtKey, DataType, ElemData, Expr, Family, Limit, LogStmt, MetaKey, NatStmt, ObjKind, PluginUse,
    Quota, RejectKind, Rule, SetRef, SetUpdate, Span, Stmt, Table, Value, Verdict,
};

use super::{Ctx, RuleOps, read_only};
use crate::compare::Test;
use crate::compiled::{CtSetKey, Op, SetId};
use crate::expr::Load;
use crate::ext::{CounterUse, ExtKind, ExtSite, Fallback};
use crate::merge::{MergeKind, reduce};
use crate::setstore::SetStore;
use crate::stateful::{Bucket, QuotaOwner, QuotaState};

/// The rule being compiled, as its statements see it: where it is, the ops so far, and how
/// many counter and quota statements came before (they name their state).
struct RuleIn<'a> {
    ti: usize,
    ci: usize,
    t: &'a Table,
    named: &'a HashMap<String, (SetId, Vec<u8>)>,
    r: &'a Rule,
    ops: RuleOps,
    /// Counter statements of the rule so far.
    nth: u32,
    /// Quota statements of the rule so far.
    quota_nth: u32,
}

/// The index of table `t`'s conntrack object of `kind` named `name`.
fn ct_object(t: &Table, kind: ObjKind, name: &str) -> Option<u32> {
    t.ct_objects
        .iter()
        .position(|o| o.config.kind() == kind && o.name == name)
        .map(|i| i as u32)
}

/// A statement that is one op, with nothing to look up (`notrack`, `reset tcp option`).
fn stmt_op(rule: &mut RuleIn<'_>, op: Op) -> Result<(), Error> {
    rule.ops.push(op, MergeKind::Fence);
    Ok(())
}

/// Whether `s` ends its rule: the statements after it are not compiled.
fn ends_rule(s: &Stmt) -> bool {
    matches!(
        s,
        Stmt::Verdict(_)
            | Stmt::VerdictMap { .. }
            | Stmt::Reject { .. }
            | Stmt::Fwd { .. }
            | Stmt::Nat(_)
    )
}

impl Ctx<'_> {
    /// Rule `r` of chain `ci` of table `ti`: its handle and its ops.
    pub(super) fn rule(
        &mut self,
        ti: usize,
        ci: usize,
        t: &Table,
        named: &HashMap<String, (SetId, Vec<u8>)>,
        r: &Rule,
    ) -> Result<(u64, Box<[Op]>), Error> {
        self.rule_at = (ti as u32, ci as u32, r.handle);
        self.anon_nth = 0;
        let mut rule = RuleIn {
            ti,
            ci,
            t,
            named,
            r,
            ops: RuleOps::default(),
            nth: 0,
            quota_nth: 0,
        };
        for s in &r.stmts {
            self.stmt(&mut rule, s)?;
            if ends_rule(s) {
                break;
            }
        }
        let ops = rule.ops;
        // What the kernel runs is nft's bytecode, after its payload merge; matches are then
        // lowered to their field's width.
        Ok((
            r.handle,
            reduce(ops.ops, &ops.kinds)
                .into_iter()
                .map(|op| match op {
                    Op::Cmp(lc) => Op::Test(Test::new(&lc.0, &lc.1)),
                    op => op,
                })
                .collect(),
        ))
    }

    /// One statement of the rule, by its kind.
    fn stmt(&mut self, rule: &mut RuleIn<'_>, s: &Stmt) -> Result<(), Error> {
        match s {
            Stmt::Match(m) => self.matcher(rule.ti, rule.t, rule.named, m, &mut rule.ops),
            Stmt::Verdict(v) => self.stmt_verdict(rule, v),
            Stmt::VerdictMap { key, map, span } => self.stmt_vmap(rule, key, map, *span),
            Stmt::Counter { packets, bytes } => self.stmt_counter(rule, *packets, *bytes),
            Stmt::CounterRef { name, span } => self.stmt_counter_ref(rule, name, *span),
            Stmt::Limit { limit, .. } => self.stmt_limit(rule, limit),
            Stmt::Quota { quota, .. } => self.stmt_quota(rule, quota),
            Stmt::LimitRef { name, span } => self.stmt_object_ref(rule, true, name, *span),
            Stmt::QuotaRef { name, span } => self.stmt_object_ref(rule, false, name, *span),
            Stmt::ObjectMap {
                kind,
                key,
                map,
                span,
            } => self.stmt_object_map(rule, *kind, key, map, *span),
            Stmt::CtObjRef { kind, name, span } => self.stmt_ct_obj_ref(rule, *kind, name, *span),
            Stmt::Reject { kind, .. } => self.stmt_reject(rule, *kind),
            Stmt::Plugin(u) => self.stmt_plugin(rule, u),
            Stmt::Fwd {
                dev,
                map: Some(m),
                span,
                ..
            } => self.stmt_out_map(rule, true, dev, m, *span),
            Stmt::Dup {
                dev,
                map: Some(m),
                span,
                ..
            } => self.stmt_out_map(rule, false, dev, m, *span),
            Stmt::Fwd { dev, via, span, .. } => self.stmt_fwd(rule, dev, *via, *span),
            Stmt::CtCount { over, count, .. } => self.stmt_ct_count(rule, *over, *count),
            Stmt::Nat(n) => self.stmt_nat(rule, n),
            Stmt::FlowAdd { flowtable, span } => self.stmt_flow_add(rule, flowtable, *span),
            Stmt::Dup { dev, via, span, .. } => self.stmt_dup(rule, dev, *via, *span),
            Stmt::Log(l) => self.stmt_log(rule, l),
            Stmt::MetaSet {
                key: MetaKey::Mark,
                value: Expr::Map { key, map, .. },
                span,
            }
            | Stmt::CtSet {
                key: CtKey::Mark,
                value: Expr::Map { key, map, .. },
                span,
            } if read_only(key) => {
                let ct = matches!(s, Stmt::CtSet { .. });
                self.stmt_mark_map(rule, key, map, ct, *span)
            }
            Stmt::PayloadSet {
                target,
                value,
                span,
            } => self.stmt_payload_set(rule, target, value, *span),
            Stmt::OptReset { kind, .. } => stmt_op(rule, Op::OptReset(*kind)),
            Stmt::SetUpdate(u) => self.stmt_set_update(rule, u),
            Stmt::MetaSet { key, value, span } => self.stmt_meta_set(rule, *key, value, *span),
            Stmt::CtSet { key, value, span } => self.stmt_ct_set(rule, *key, value, *span),
            Stmt::Notrack => stmt_op(rule, Op::Notrack),
        }
    }

    /// `accept`, `drop`, `jump C`, ...
    fn stmt_verdict(&mut self, rule: &mut RuleIn<'_>, v: &Verdict) -> Result<(), Error> {
        let verdict = self.verdict(rule.ti, rule.t, v, rule.r.span)?;
        rule.ops.push(Op::Verdict(verdict), MergeKind::Fence);
        Ok(())
    }

    /// `KEY vmap MAP`.
    fn stmt_vmap(
        &mut self,
        rule: &mut RuleIn<'_>,
        key: &Expr,
        map: &SetRef,
        span: Span,
    ) -> Result<(), Error> {
        let (ti, t, named) = (rule.ti, rule.t, rule.named);
        let loads = self.value_loads(t.family, key, span, &mut rule.ops)?;
        let set = self.set_ref(ti, t, named, map, &loads, true, span)?;
        rule.ops.push(
            Op::Vmap {
                keys: loads.into(),
                set,
            },
            MergeKind::Fence,
        );
        Ok(())
    }

    /// `counter [packets N bytes M]`: a use site of the counter plugin, named by its place
    /// (the rule and how many counters came before it).
    fn stmt_counter(
        &mut self,
        rule: &mut RuleIn<'_>,
        packets: u64,
        bytes: u64,
    ) -> Result<(), Error> {
        let ti = rule.ti;
        let args = vec![
            "packets".to_string(),
            packets.to_string(),
            "bytes".to_string(),
            bytes.to_string(),
        ];
        let use_ = CounterUse::Rule {
            table: ti as u32,
            chain: rule.ci as u32,
            handle: rule.r.handle,
            nth: rule.nth,
        };
        rule.nth += 1;
        let id = self.counter_site(ti, args, use_, rule.r.span);
        rule.ops.push(Op::Ext(id), MergeKind::Fence);
        Ok(())
    }

    /// `counter name NAME`: the named counter object's use site.
    fn stmt_counter_ref(
        &mut self,
        rule: &mut RuleIn<'_>,
        name: &str,
        span: Span,
    ) -> Result<(), Error> {
        let (ti, t) = (rule.ti, rule.t);
        let Some(&id) = self.objects.get(&(ti, name.to_string())) else {
            return Err(self.err(
                span,
                format!(
                    "unknown counter `{name}`: table `{} {}` declares no counter object of that name (nft: No such file or directory)",
                    t.family.name(),
                    t.name
                ),
            ));
        };
        rule.ops.push(Op::Ext(id), MergeKind::Fence);
        Ok(())
    }

    /// `limit rate ...`: a bucket of its own.
    fn stmt_limit(&mut self, rule: &mut RuleIn<'_>, limit: &Limit) -> Result<(), Error> {
        let id = self.stateful.limits.len() as u32;
        self.stateful.limits.push(Bucket::new(limit));
        rule.ops.push(Op::Limit(id), MergeKind::Fence);
        Ok(())
    }

    /// `quota ...`: a quota of its own, owned by its place in the rule.
    fn stmt_quota(&mut self, rule: &mut RuleIn<'_>, quota: &Quota) -> Result<(), Error> {
        let id = self.stateful.quotas.len() as u32;
        self.stateful.quotas.push(QuotaState::new(quota));
        self.stateful.quota_owners.push(QuotaOwner::Rule {
            table: rule.ti as u32,
            chain: rule.ci as u32,
            handle: rule.r.handle,
            nth: rule.quota_nth,
        });
        rule.quota_nth += 1;
        rule.ops.push(Op::Quota(id), MergeKind::Fence);
        Ok(())
    }

    /// `limit name NAME` (`limit`) or `quota name NAME`: the named object's state.
    fn stmt_object_ref(
        &mut self,
        rule: &mut RuleIn<'_>,
        limit: bool,
        name: &str,
        span: Span,
    ) -> Result<(), Error> {
        let (ti, t) = (rule.ti, rule.t);
        let (objects, kind) = if limit {
            (&self.limit_objects, "limit")
        } else {
            (&self.quota_objects, "quota")
        };
        let Some(&id) = objects.get(&(ti, name.to_string())) else {
            return Err(self.err(
                span,
                format!(
                    "unknown {kind} `{name}`: table `{} {}` declares no {kind} object of that name (nft: Could not process rule: No such file or directory)",
                    t.family.name(),
                    t.name
                ),
            ));
        };
        let op = if limit { Op::Limit(id) } else { Op::Quota(id) };
        rule.ops.push(op, MergeKind::Fence);
        Ok(())
    }

    /// `ct helper|timeout|expectation set "NAME"`: the table's object must exist (nft_objref
    /// init: ENOENT); the statement itself does nothing in wasp ([`wasp_ruleset::model::CtObj`]
    /// says why), so it compiles to no op.
    fn stmt_ct_obj_ref(
        &mut self,
        rule: &mut RuleIn<'_>,
        kind: ObjKind,
        name: &str,
        span: Span,
    ) -> Result<(), Error> {
        let t = rule.t;
        if ct_object(t, kind, name).is_none() {
            return Err(self.err(
                span,
                format!(
                    "unknown {k} `{name}`: table `{} {}` declares no {k} object of that name (nft: Could not process rule: No such file or directory)",
                    t.family.name(),
                    t.name,
                    k = kind.name()
                ),
            ));
        }
        Ok(())
    }

    /// `counter|quota|limit name KEY map { ... }`, `ct helper|timeout|expectation set KEY map
    /// { ... }`: the map's object names become the objects' indices (counters: their use
    /// sites; conntrack objects: their index in the table, which nothing reads).
    fn stmt_object_map(
        &mut self,
        rule: &mut RuleIn<'_>,
        kind: ObjKind,
        key: &Expr,
        map: &SetRef,
        span: Span,
    ) -> Result<(), Error> {
        let (ti, t, named) = (rule.ti, rule.t, rule.named);
        let SetRef::Anonymous(elems) = map else {
            return Err(self.err(span, "a named map of objects is not supported"));
        };
        let mut elems = elems.clone();
        for e in &mut elems {
            let Some(ElemData::Object(name)) = &e.data else {
                continue;
            };
            let found = match kind {
                ObjKind::Counter => self.objects.get(&(ti, name.clone())).copied(),
                ObjKind::Quota => self.quota_objects.get(&(ti, name.clone())).copied(),
                ObjKind::Limit => self.limit_objects.get(&(ti, name.clone())).copied(),
                ObjKind::CtHelper | ObjKind::CtTimeout | ObjKind::CtExpectation => {
                    ct_object(t, kind, name)
                }
            };
            let Some(id) = found else {
                return Err(self.err(
                    e.span,
                    format!(
                        "unknown {k} `{name}`: table `{} {}` declares no {k} object of that name (nft: Could not process rule: No such file or directory)",
                        t.family.name(),
                        t.name,
                        k = kind.name()
                    ),
                ));
            };
            e.data = Some(ElemData::Value(Value {
                dtype: DataType::Integer(32),
                bytes: id.to_be_bytes().to_vec().into(),
                wildcard: false,
            }));
        }
        let loads = self.value_loads(t.family, key, span, &mut rule.ops)?;
        let anon = SetRef::Anonymous(elems);
        let set = self.set_ref(ti, t, named, &anon, &loads, false, span)?;
        rule.ops.push(
            Op::ObjectMap {
                keys: loads.into(),
                set,
                kind,
            },
            MergeKind::Fence,
        );
        Ok(())
    }

    /// `reject [with ...]`.
    fn stmt_reject(&mut self, rule: &mut RuleIn<'_>, kind: RejectKind) -> Result<(), Error> {
        // The kernel's reject expressions end the rule with NF_DROP after queueing the reply
        // (built on the way out: `wasp_gateway::reject`).
        rule.ops.push(
            Op::Reject(crate::packet::Reject {
                kind,
                netdev: rule.t.family == Family::Netdev,
            }),
            MergeKind::Fence,
        );
        Ok(())
    }

    /// A plugin statement: a use site of a plugin the table declares.
    fn stmt_plugin(&mut self, rule: &mut RuleIn<'_>, u: &PluginUse) -> Result<(), Error> {
        let (ti, t) = (rule.ti, rule.t);
        if !t.plugins.iter().any(|p| p.name == u.name) {
            return Err(self.err(
                u.span,
                format!(
                    "unknown plugin `{}`: table `{} {}` does not declare it",
                    u.name,
                    t.family.name(),
                    t.name
                ),
            ));
        }
        let id = self.prog.ext_sites.len() as u32;
        self.prog.ext_sites.push(ExtSite {
            id,
            table: ti as u32,
            plugin: u.name.clone(),
            kind: ExtKind::Statement,
            args: u.args.clone(),
            fallback: if u.fallback_drop {
                Fallback::Drop
            } else {
                Fallback::Absent
            },
        });
        self.prog.ext_spans.push(u.span);
        self.prog.counter_uses.push(None);
        rule.ops.push(Op::Ext(id), MergeKind::Barrier);
        Ok(())
    }

    /// `fwd to DEV` / `fwd ip to ADDR device DEV`.
    fn stmt_fwd(
        &mut self,
        rule: &mut RuleIn<'_>,
        dev: &str,
        via: Option<std::net::IpAddr>,
        span: Span,
    ) -> Result<(), Error> {
        let id = self.out_target(dev, via, span)?;
        rule.ops.push(Op::Fwd(id), MergeKind::Fence);
        Ok(())
    }

    /// `ct count [over] N`: a connection count site of its own.
    fn stmt_ct_count(
        &mut self,
        rule: &mut RuleIn<'_>,
        over: bool,
        count: u32,
    ) -> Result<(), Error> {
        let site = self.prog.ct_counts;
        self.prog.ct_counts += 1;
        rule.ops
            .push(Op::CtCount { site, over, count }, MergeKind::Fence);
        Ok(())
    }

    /// `snat`, `dnat`, `masquerade`, `redirect`: the NAT spec, and the calculation of its
    /// target when it is computed from the packet.
    fn stmt_nat(&mut self, rule: &mut RuleIn<'_>, n: &NatStmt) -> Result<(), Error> {
        let (ti, t, named) = (rule.ti, rule.t, rule.named);
        let id = u16::try_from(self.prog.nats.len())
            .map_err(|_| self.err(n.span, "too many nat statements"))?;
        let calc = match &n.target {
            Some(e) => Some(crate::compiled::NatCalc {
                calc: self.calc(ti, t, named, e, n.span, &mut rule.ops)?,
                map_data: matches!(**e, Expr::Map { .. }),
                v6: match n.family {
                    Some(f) => f == Family::Ip6,
                    None => t.family == Family::Ip6,
                },
            }),
            None => None,
        };
        self.prog.nats.push(crate::conn::NatSpec {
            kind: n.kind,
            addr: n.addr,
            ports: n.ports,
            flags: n.flags,
            prefix: n.prefix,
        });
        self.prog.nat_calcs.push(calc);
        rule.ops.push(Op::Nat(id), MergeKind::Fence);
        Ok(())
    }

    /// `flow add @FT`: the table's flowtable of that name.
    fn stmt_flow_add(
        &mut self,
        rule: &mut RuleIn<'_>,
        flowtable: &str,
        span: Span,
    ) -> Result<(), Error> {
        let ti = rule.ti;
        let id = self
            .prog
            .flowtables
            .iter()
            .position(|f| f.table == ti as u32 && f.name == flowtable)
            .ok_or_else(|| self.err(span, format!("flowtable \"{flowtable}\" does not exist")))?;
        rule.ops.push(Op::FlowAdd(id as u16), MergeKind::Fence);
        Ok(())
    }

    /// `dup to DEV` / `dup to ADDR [device DEV]`.
    fn stmt_dup(
        &mut self,
        rule: &mut RuleIn<'_>,
        dev: &str,
        via: Option<std::net::IpAddr>,
        span: Span,
    ) -> Result<(), Error> {
        let id = self.out_target(dev, via, span)?;
        rule.ops.push(Op::Dup(id), MergeKind::Fence);
        Ok(())
    }

    /// `dup to KEY map { k : TARGET }` / `fwd [ip|ip6] to KEY map { ... }` (`fwd`): each
    /// element's target (a device name, or a next hop out of `dev`) becomes an output target,
    /// and the element's value its id, so that the lookup gives the target as the kernel's
    /// nft_lookup_eval gives nft_dup/nft_fwd their register. A miss ends the rule.
    fn stmt_out_map(
        &mut self,
        rule: &mut RuleIn<'_>,
        fwd: bool,
        dev: &str,
        m: &Expr,
        span: Span,
    ) -> Result<(), Error> {
        let (ti, t, named) = (rule.ti, rule.t, rule.named);
        let (key, map) = match m {
            // A named map of devices: its values are output targets already (`build_set`).
            Expr::Map {
                key,
                map: map @ SetRef::Named(_),
                data: DataType::IfaceIndex,
            } => (key, map.clone()),
            Expr::Map {
                key,
                map: SetRef::Anonymous(elems),
                data,
            } => (
                key,
                SetRef::Anonymous(self.out_map_elems(elems, *data, dev)?),
            ),
            _ => {
                return Err(self.err(
                    span,
                    "the targets of `dup`/`fwd` come from an anonymous map or a named map of devices",
                ));
            }
        };
        let loads = self.value_loads(t.family, key, span, &mut rule.ops)?;
        let set = self.set_ref(ti, t, named, &map, &loads, false, span)?;
        rule.ops.push(
            Op::OutMap {
                keys: loads.into(),
                set,
                fwd,
            },
            MergeKind::Fence,
        );
        Ok(())
    }

    /// An anonymous map's elements of `dup`/`fwd` targets with each element's data the id
    /// of its output target (a device, or a next hop out of `dev`).
    fn out_map_elems(
        &mut self,
        elems: &[wasp_ruleset::model::SetElem],
        data: DataType,
        dev: &str,
    ) -> Result<Vec<wasp_ruleset::model::SetElem>, Error> {
        let mut elems = elems.to_vec();
        for e in &mut elems {
            let Some(ElemData::Value(v)) = &e.data else {
                continue;
            };
            let id = match (data, v.bytes.as_slice()) {
                (DataType::IfaceIndex, b) => self.out_target(&super::ifname(b), None, e.span)?,
                (_, &[a, b, c, d]) => {
                    self.out_target(dev, Some(std::net::IpAddr::from([a, b, c, d])), e.span)?
                }
                (_, b) => {
                    let Ok(b16) = <[u8; 16]>::try_from(b) else {
                        return Err(self.err(e.span, "expected a device name or an address"));
                    };
                    self.out_target(dev, Some(std::net::IpAddr::from(b16)), e.span)?
                }
            };
            e.data = Some(ElemData::Value(Value {
                dtype: DataType::Integer(32),
                bytes: u32::from(id).to_be_bytes().to_vec().into(),
                wildcard: false,
            }));
        }
        Ok(elems)
    }

    /// `log [prefix ...] [flags ...] [group N]`.
    fn stmt_log(&mut self, rule: &mut RuleIn<'_>, l: &LogStmt) -> Result<(), Error> {
        self.prog.logs.push(crate::compiled::Log {
            prefix: l.prefix.clone().unwrap_or_default(),
            flags: l.flags.0,
            group: l.group,
        });
        let id = (self.prog.logs.len() - 1) as u32;
        rule.ops.push(Op::Log(id), MergeKind::Fence);
        Ok(())
    }

    /// `meta mark set KEY map { ... }` / `ct mark set ...` (`ct`) from a map of a key that only
    /// reads the packet: a miss ends the rule.
    fn stmt_mark_map(
        &mut self,
        rule: &mut RuleIn<'_>,
        key: &Expr,
        map: &SetRef,
        ct: bool,
        span: Span,
    ) -> Result<(), Error> {
        let (ti, t, named) = (rule.ti, rule.t, rule.named);
        let loads = self.value_loads(t.family, key, span, &mut rule.ops)?;
        let set = self.set_ref(ti, t, named, map, &loads, false, span)?;
        rule.ops.push(
            Op::SetMarkMap {
                keys: loads.into(),
                set,
                ct,
            },
            MergeKind::Fence,
        );
        Ok(())
    }

    /// `FIELD set VALUE`: a payload field (with its dependencies in front) and one value.
    fn stmt_payload_set(
        &mut self,
        rule: &mut RuleIn<'_>,
        target: &Expr,
        value: &Expr,
        span: Span,
    ) -> Result<(), Error> {
        let family = rule.t.family;
        if !matches!(target, Expr::Payload(_) | Expr::Raw { .. } | Expr::Opt(_)) {
            return Err(self.err(span, "only a payload field can be set"));
        }
        let mut deps = Vec::new();
        let mut field_loads = Vec::new();
        self.expr(target, span, &mut field_loads, &mut deps)?;
        self.deps(family, &deps, &mut rule.ops);
        let [field] = field_loads[..] else {
            return Err(self.err(span, "only a payload field can be set"));
        };
        let loads = self.value_loads(family, value, span, &mut rule.ops)?;
        if loads.len() != 1 {
            return Err(self.err(span, "a payload statement needs a single value"));
        }
        rule.ops.push(
            Op::PayloadSet(Box::new(crate::payload_set::PayloadSet {
                field,
                value: loads[0],
            })),
            MergeKind::Fence,
        );
        Ok(())
    }

    /// `add|update|delete @SET { KEY [timeout T] [STMTS] [: DATA] }`: the set must be one the
    /// packet path can change.
    fn stmt_set_update(&mut self, rule: &mut RuleIn<'_>, u: &SetUpdate) -> Result<(), Error> {
        let key = self.value_loads(rule.t.family, &u.key, u.span, &mut rule.ops)?;
        let set = self.set_update_target(rule, u, &key)?;
        let data = self.set_update_data(rule, u)?;
        let (limits, quotas, counter) = self.set_update_stmts(u)?;
        self.dyn_write = true;
        rule.ops.push(
            Op::SetUpdate {
                keys: key.into(),
                data,
                stmt: Box::new(crate::compiled::SetUpdate {
                    op: u.op,
                    set,
                    timeout_ns: u.timeout_ms.map_or(0, |ms| ms.saturating_mul(1_000_000)),
                    limits: limits.into(),
                    quotas: quotas.into(),
                    counter,
                }),
            },
            MergeKind::Fence,
        );
        Ok(())
    }

    /// The dynamic set a set statement changes, its reference checked against `key` (which is
    /// no look-up).
    fn set_update_target(
        &mut self,
        rule: &RuleIn<'_>,
        u: &SetUpdate,
        key: &[Load],
    ) -> Result<u32, Error> {
        let (ti, t, named) = (rule.ti, rule.t, rule.named);
        let Some((id, _)) = named.get(&u.set) else {
            return Err(self.err(
                u.span,
                format!("unknown set \"{}\" in table {}", u.set, t.name),
            ));
        };
        // The type check of the set reference is no lookup.
        let read = self.dyn_read;
        let id = self
            .set_ref(
                ti,
                t,
                named,
                &SetRef::Named(u.set.clone()),
                key,
                false,
                u.span,
            )
            .map(|_| *id)?;
        self.dyn_read = read;
        let SetStore::Dynamic(d) = self.prog.sets[id].store else {
            return Err(self.err(
                u.span,
                format!("set \"{}\" cannot be changed from the packet path (it has `flags interval` or is a verdict map)", u.set),
            ));
        };
        Ok(d)
    }

    /// The data a set statement gives a map's element: one field of up to 32 bits, or for a
    /// map of addresses or of concatenated data (a NAT map, [`super::nat_valued`]) constants,
    /// kept as a NAT target of the program.
    fn set_update_data(
        &mut self,
        rule: &mut RuleIn<'_>,
        u: &SetUpdate,
    ) -> Result<Option<Box<Load>>, Error> {
        let Some(v) = &u.data else {
            return Ok(None);
        };
        if rule
            .t
            .sets
            .iter()
            .any(|s| s.name == u.set && super::nat_valued(s))
        {
            let fields: Vec<&Expr> = match v {
                Expr::Concat(parts) => parts.iter().collect(),
                e => vec![e],
            };
            let mut parts = Vec::with_capacity(fields.len());
            for f in fields {
                let Expr::Const(c) = f else {
                    return Err(self.err(
                        u.span,
                        "wasp's maps of addresses changed from the packet path take constant data (`: 10.0.0.1 . 80`)",
                    ));
                };
                parts.push(wasp_ruleset::model::KeyPart::Value(c.clone()));
            }
            let at = self.push_nat_data(&parts, u.span)?;
            return Ok(Some(Box::new(Load::constant(u128::from(at), 4))));
        }
        let l = self.value_loads(rule.t.family, v, u.span, &mut rule.ops)?;
        let [l] = l[..] else {
            return Err(self.err(
                u.span,
                "wasp's maps changed from the packet path take data of one field of up to 32 bits",
            ));
        };
        if l.width > 4 {
            return Err(self.err(
                u.span,
                "wasp's maps changed from the packet path take data of one field of up to 32 bits",
            ));
        }
        Ok(Some(Box::new(l)))
    }

    /// A set statement's element statements: its limits, its quotas, and whether it counts.
    fn set_update_stmts(&self, u: &SetUpdate) -> Result<(Vec<Limit>, Vec<Quota>, bool), Error> {
        let mut limits = Vec::new();
        let mut quotas = Vec::new();
        let mut counter = false;
        for st in &u.stmts {
            match st {
                Stmt::Limit { limit, .. } => limits.push(*limit),
                Stmt::Quota { quota, .. } => quotas.push(*quota),
                Stmt::Counter { .. } => counter = true,
                _ => {
                    return Err(self.err(
                        u.span,
                        "a set element takes `limit`, `quota` and `counter` statements",
                    ));
                }
            }
        }
        Ok((limits, quotas, counter))
    }

    /// `meta mark|priority|nftrace set VALUE`.
    fn stmt_meta_set(
        &mut self,
        rule: &mut RuleIn<'_>,
        key: MetaKey,
        value: &Expr,
        span: Span,
    ) -> Result<(), Error> {
        let fence = MergeKind::Fence;
        let (ti, t, named) = (rule.ti, rule.t, rule.named);
        let l = Box::new(self.calc(ti, t, named, value, span, &mut rule.ops)?);
        match key {
            MetaKey::Mark => rule.ops.push(Op::SetMark(l), fence),
            MetaKey::Nftrace => rule.ops.push(Op::SetNftrace(l), fence),
            MetaKey::Priority => rule.ops.push(Op::SetPriority(l), fence),
            _ => {
                return Err(self.err(
                    span,
                    "only meta mark, meta priority and meta nftrace can be set",
                ));
            }
        }
        Ok(())
    }

    /// `ct mark|zone|label|event set VALUE`.
    fn stmt_ct_set(
        &mut self,
        rule: &mut RuleIn<'_>,
        key: CtKey,
        value: &Expr,
        span: Span,
    ) -> Result<(), Error> {
        let fence = MergeKind::Fence;
        let (ti, t, named) = (rule.ti, rule.t, rule.named);
        let value = Box::new(self.calc(ti, t, named, value, span, &mut rule.ops)?);
        let key = match key {
            CtKey::Mark => {
                rule.ops.push(Op::CtSetMark(value), fence);
                return Ok(());
            }
            CtKey::Zone(_) => CtSetKey::Zone,
            CtKey::Label => CtSetKey::Label,
            CtKey::Event => CtSetKey::Event,
            _ => {
                return Err(self.err(span, "only ct mark, zone, label and event can be set"));
            }
        };
        rule.ops.push(Op::CtSet { key, value }, fence);
        Ok(())
    }
}
