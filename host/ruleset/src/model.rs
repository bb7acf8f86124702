//! The typed ruleset model: what the parser produces, the printer prints and the evaluator
//! compiles. It follows nftables' own objects (table, chain, rule, set, expression, statement).
//!
//! Values are stored as big-endian byte strings of their field's width (see [`Value`]), typed by
//! the [`DataType`] of the expression they are compared with, exactly as nft types a right-hand
//! side by its left-hand side.

use std::path::PathBuf;

pub use crate::elements::{Elements, HeldElements, Place};

/// Index into [`Ruleset::sources`].
pub type FileId = u32;

/// A position in a source file: 1-based line and column (in characters), and the length of the
/// token or construct in characters (at least 1).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Span {
    /// Which file (index into [`Ruleset::sources`]).
    pub file: FileId,
    /// Line, counting from 1.
    pub line: u32,
    /// Column, counting from 1, in characters.
    pub col: u32,
    /// Length in characters (at least 1).
    pub len: u32,
}

impl Span {
    /// The span from the start of `self` to the end of `end`, when both sit on one line of one
    /// file and `end` does not start before `self`; otherwise `self` unchanged (a construct
    /// continued on the next line, e.g. after `\\`, is pointed at by its first token).
    pub fn through(self, end: Span) -> Span {
        if end.file == self.file && end.line == self.line && end.col >= self.col {
            Span {
                len: (end.col + end.len - self.col).max(self.len),
                ..self
            }
        } else {
            self
        }
    }
}

/// One source file that contributed to a ruleset (the main file and each `include`; for a
/// ruleset changed by batches, each batch's text and its includes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFile {
    /// What the spans of this file's text carry as [`Span::file`]. Ids rise in the order the
    /// files were read and are not given twice within a ruleset's life (a batch's files get
    /// ids after the running ruleset's last one), so a span keeps naming its file when earlier
    /// files are dropped ([`Ruleset::source`]).
    pub id: FileId,
    /// Path as given (the main file) or as resolved (includes).
    pub path: PathBuf,
    /// Full text, kept so that later errors (compile time) can show the offending line.
    text: SourceText,
    /// The `include` statement that read this file (`None` for the main file).
    pub included_from: Option<Span>,
}

/// A source file's text: as read, with the byte offset where each line starts (line 1 at
/// index 0), or packed ([`SourceFile::pack`]).
#[derive(Debug, Clone, PartialEq, Eq)]
enum SourceText {
    Plain {
        text: String,
        line_starts: Vec<usize>,
    },
    /// Deflated (miniz_oxide, level 1).
    Packed(Box<[u8]>),
}

/// The smallest text [`SourceFile::pack`] packs, bytes: a file of a large set's elements,
/// not a hand-written ruleset.
pub const PACK_MIN: usize = 64 * 1024;

impl SourceFile {
    /// Source file `id` of `text`, read from `path` (by `included_from`, for an include).
    pub fn new(id: FileId, path: PathBuf, text: String, included_from: Option<Span>) -> Self {
        let line_starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        SourceFile {
            id,
            path,
            text: SourceText::Plain { text, line_starts },
            included_from,
        }
    }

    /// The whole text (unpacked when packed).
    pub fn text(&self) -> std::borrow::Cow<'_, str> {
        match &self.text {
            SourceText::Plain { text, .. } => std::borrow::Cow::Borrowed(text),
            SourceText::Packed(bytes) => std::borrow::Cow::Owned(
                miniz_oxide::inflate::decompress_to_vec(bytes)
                    .ok()
                    .and_then(|v| String::from_utf8(v).ok())
                    .unwrap_or_default(),
            ),
        }
    }

    /// Line `n` (1-based) without its line ending, as `str::lines` gives it; `None` past the
    /// end. O(1) for a text as read (the line starts are indexed once); a packed text is
    /// unpacked.
    pub fn line(&self, n: u32) -> Option<String> {
        let i = (n as usize).checked_sub(1)?;
        match &self.text {
            SourceText::Plain { text, line_starts } => {
                let start = *line_starts.get(i)?;
                let end = line_starts.get(i + 1).map_or(text.len(), |&e| e - 1);
                if start >= text.len() {
                    return None;
                }
                let l = &text[start..end];
                Some(l.strip_suffix('\r').unwrap_or(l).to_string())
            }
            SourceText::Packed(_) => self.text().lines().nth(i).map(str::to_string),
        }
    }

    /// Keep a text of at least [`PACK_MIN`] bytes deflated (a daemon keeps each batch's text
    /// for messages about it; the text of a large set's elements is mostly what no message
    /// will show). Lines read back as before.
    pub fn pack(&mut self) {
        if let SourceText::Plain { text, .. } = &self.text
            && text.len() >= PACK_MIN
        {
            let packed = miniz_oxide::deflate::compress_to_vec(text.as_bytes(), 1);
            self.text = SourceText::Packed(packed.into());
        }
    }
}

/// A whole ruleset: what `nft list ruleset` shows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ruleset {
    /// Tables in the order they were first declared.
    pub tables: Vec<Table>,
    /// Source files, for error messages, in the order they were read (ids rising): the main
    /// file first, then its includes. A batch ([`crate::apply_batch`]) adds its own files and
    /// drops those no table, chain, rule, set, element or object comes from any more, so that
    /// a long-running ruleset keeps the text of what it holds, not of every change it went
    /// through. Look a span's file up with [`Ruleset::source`] (ids are not positions).
    pub sources: Vec<SourceFile>,
    /// The last table handle given out (0: none yet, or a ruleset made by hand: the tables'
    /// own handles say). The kernel never gives a handle twice, also after a table is deleted.
    pub table_handle: u64,
}

impl Ruleset {
    /// The source file of id `file` (a [`Span::file`]); `None` when the ruleset has none of
    /// that id (a span made by hand, or of a file dropped since).
    pub fn source(&self, file: FileId) -> Option<&SourceFile> {
        source_in(&self.sources, file)
    }

    /// Pack the text of every large source file ([`SourceFile::pack`]): what a daemon keeps
    /// for messages costs a fraction of the file.
    pub fn pack_sources(&mut self) {
        self.sources.iter_mut().for_each(SourceFile::pack);
    }
}

/// The file of id `file` among `sources` (ids rising): at its position when no file before it
/// was dropped, else found by binary search.
pub(crate) fn source_in(sources: &[SourceFile], file: FileId) -> Option<&SourceFile> {
    match sources.get(file as usize) {
        Some(s) if s.id == file => Some(s),
        _ => sources
            .binary_search_by_key(&file, |s| s.id)
            .ok()
            .map(|i| &sources[i]),
    }
}

/// Address family of a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Family {
    /// `ip`
    Ip,
    /// `ip6`
    Ip6,
    /// `inet`
    Inet,
    /// `arp`
    Arp,
    /// `bridge`
    Bridge,
    /// `netdev`
    Netdev,
}

impl Family {
    /// The family's keyword as nft writes it: `ip`, `ip6`, `inet`, `arp`, `bridge`, `netdev`.
    pub fn name(self) -> &'static str {
        match self {
            Family::Ip => "ip",
            Family::Ip6 => "ip6",
            Family::Inet => "inet",
            Family::Arp => "arp",
            Family::Bridge => "bridge",
            Family::Netdev => "netdev",
        }
    }
}

/// A table: a namespace for chains and sets of one family.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    /// Family.
    pub family: Family,
    /// Name.
    pub name: String,
    /// Kernel-style handle: tables are numbered from 1 in creation order across the ruleset.
    pub handle: u64,
    /// Chains in declaration order.
    pub chains: Vec<Chain>,
    /// Named sets and maps in declaration order.
    pub sets: Vec<SetDecl>,
    /// Plugins declared in the table (`plugin NAME { path "FILE"; }`), in declaration order.
    /// A wasp extension: the kernel has no such object.
    pub plugins: Vec<PluginDecl>,
    /// Named counter objects (`counter NAME { packets N bytes M }`), in declaration order.
    pub counters: Vec<CounterObj>,
    /// Named quota objects (`quota NAME { [over] N UNIT [used M UNIT] }`), in declaration
    /// order.
    pub quotas: Vec<QuotaObj>,
    /// Named limit objects (`limit NAME { rate ... }`), in declaration order.
    pub limits: Vec<LimitObj>,
    /// Named conntrack objects (`ct helper`, `ct timeout`, `ct expectation`), in declaration
    /// order.
    pub ct_objects: Vec<CtObj>,
    /// Flowtables (`flowtable NAME { hook ingress priority N; devices = { ... }; }`), in
    /// declaration order.
    pub flowtables: Vec<FlowtableDecl>,
    /// `comment "..."`.
    pub comment: Option<String>,
    /// Where the table was first declared.
    pub span: Span,
    /// The next handle this table gives out (0: one above its objects' handles, for a table
    /// made by hand). The kernel's per-table counter never goes back, also after the objects
    /// with the highest handles are deleted.
    pub next_handle: u64,
}

impl Table {
    /// The table's identity (family, name, handle, comment, where it was declared) without
    /// its chains, sets and objects: what a listing of some of them starts from.
    pub fn header(&self) -> Table {
        Table {
            family: self.family,
            name: self.name.clone(),
            handle: self.handle,
            chains: Vec::new(),
            sets: Vec::new(),
            plugins: Vec::new(),
            counters: Vec::new(),
            quotas: Vec::new(),
            limits: Vec::new(),
            ct_objects: Vec::new(),
            flowtables: Vec::new(),
            comment: self.comment.clone(),
            span: self.span,
            next_handle: 0,
        }
    }
}

/// A flowtable: `flowtable NAME { hook ingress priority N; devices = { a, b }; counter; }`
/// (the kernel's nf_flowtable, Documentation/networking/nf_flowtable.rst). Rules of a forward
/// chain put flows in it with `flow add @NAME`; packets of those flows arriving on one of
/// `devices` skip the chains.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowtableDecl {
    /// Name.
    pub name: String,
    /// Kernel-style handle, from the table's handle counter.
    pub handle: u64,
    /// `hook ingress` (the only hook a flowtable has).
    pub hook: Hook,
    /// `priority N` (named priorities resolved to their number).
    pub priority: i32,
    /// `devices = { ... }` in the order written.
    pub devices: Vec<String>,
    /// `counter`: flows count packets and bytes.
    pub counter: bool,
    /// Where the flowtable was first declared.
    pub span: Span,
}

/// A named counter object: `counter NAME { packets N bytes M }` (nft's `nft_counter` stateful
/// object, `NFT_OBJECT_COUNTER`), counted by every rule that says `counter name NAME`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CounterObj {
    /// Name.
    pub name: String,
    /// Kernel-style handle, from the table's handle counter.
    pub handle: u64,
    /// Packets counted (the initial value as written; after a run, what the counter counted).
    pub packets: u64,
    /// Bytes counted (`skb->len` of each packet).
    pub bytes: u64,
    /// `comment "..."`.
    pub comment: Option<String>,
    /// Where the object is declared (the `counter` keyword up to the name).
    pub span: Span,
}

/// A token bucket: what `limit rate [over] N/UNIT [burst M packets]` and `limit rate [over] N
/// BYTES/UNIT [burst M BYTES]` say, as the kernel gets it (NFTA_LIMIT_*: rate, unit in
/// seconds, burst, type, flags; `nft_limit_init`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Limit {
    /// `over` (NFT_LIMIT_F_INV): the statement matches beyond the rate instead of within it.
    pub over: bool,
    /// Packets, or bytes (NFT_LIMIT_PKT_BYTES: units already applied, `1 kbytes` is 1024),
    /// per `per_secs`.
    pub rate: u64,
    /// The rate's time unit in seconds: 1 (`second`), 60, 3600, 86400 or 604800 (`week`).
    pub per_secs: u64,
    /// `burst`: packets (0 is never stored: nft sends the default 5), or bytes (0 when not
    /// written). nft keeps the low 32 bits of what is written.
    pub burst: u32,
    /// `true` for a byte rate (NFT_LIMIT_PKT_BYTES), `false` for a packet rate (NFT_LIMIT_PKTS).
    pub bytes: bool,
}

/// Burst of a packet limit when none is written (nft's and the kernel's
/// NFT_LIMIT_PKT_BURST_DEFAULT).
pub const LIMIT_PKT_BURST_DEFAULT: u32 = 5;

/// A byte quota: what `quota [over|until] N UNIT [used M UNIT]` says (NFTA_QUOTA_BYTES,
/// NFTA_QUOTA_CONSUMED, NFT_QUOTA_F_INV; `nft_quota_do_init`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Quota {
    /// `over` (NFT_QUOTA_F_INV): the statement matches once the quota is exceeded instead of
    /// until then. (`until` is the default mode and lists as nothing.)
    pub over: bool,
    /// The quota in bytes (units applied: `25 mbytes` is 26214400).
    pub bytes: u64,
    /// Bytes consumed so far (`used M UNIT`; after a run, what the packets consumed).
    pub used: u64,
}

/// A named quota object: `quota NAME { [over] N UNIT [used M UNIT] }` (the kernel's
/// `nft_quota` stateful object, NFT_OBJECT_QUOTA), consumed by every rule that says `quota
/// name NAME`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuotaObj {
    /// Name.
    pub name: String,
    /// Kernel-style handle, from the table's handle counter.
    pub handle: u64,
    /// The quota.
    pub quota: Quota,
    /// `comment "..."`.
    pub comment: Option<String>,
    /// Where the object is declared (the `quota` keyword up to the name).
    pub span: Span,
}

/// A named limit object: `limit NAME { rate [over] N/UNIT [burst M packets] }` (the kernel's
/// `nft_limit` stateful object, NFT_OBJECT_LIMIT): one bucket shared by every rule that says
/// `limit name NAME`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitObj {
    /// Name.
    pub name: String,
    /// Kernel-style handle, from the table's handle counter.
    pub handle: u64,
    /// The bucket.
    pub limit: Limit,
    /// `comment "..."`.
    pub comment: Option<String>,
    /// Where the object is declared (the `limit` keyword up to the name).
    pub span: Span,
}

/// A named conntrack object: `ct helper NAME { ... }`, `ct timeout NAME { ... }` or `ct
/// expectation NAME { ... }` (the kernel's NFT_OBJECT_CT_HELPER, _CT_TIMEOUT, _CT_EXPECT of
/// nft_ct.c), attached to a connection by `ct helper set "NAME"`, `ct timeout set "NAME"`,
/// `ct expectation set "NAME"` (or a map to names).
///
/// In wasp they load, list and are checked as the kernel checks them, and the statements that
/// name them do nothing to the connection: wasp's conntrack has no helpers (no protocol parsers
/// that open expectations for related connections), keeps its own timeouts per protocol state,
/// and creates no expectations (see `wasp_conntrack`). A packet is never judged differently for
/// it in the kernel: the kernel's statements never end a rule (nft_ct_helper_obj_eval,
/// nft_ct_timeout_obj_eval, nft_ct_expect_obj_eval return without a verdict), only a map's miss
/// does, which wasp does as well.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CtObj {
    /// Name.
    pub name: String,
    /// Kernel-style handle, from the table's handle counter.
    pub handle: u64,
    /// What kind of object, and its configuration.
    pub config: CtObjConfig,
    /// `comment "..."`.
    pub comment: Option<String>,
    /// Where the object is declared (the `ct` keyword up to the name).
    pub span: Span,
}

/// The configuration of a [`CtObj`], by kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CtObjConfig {
    /// `ct helper NAME { type "ftp" protocol tcp; [l3proto ip|ip6|inet;] }`
    /// (NFTA_CT_HELPER_NAME, _L4PROTO, _L3PROTO).
    Helper {
        /// The kernel helper's name (`"ftp"`, `"sip"`, ...).
        helper: String,
        /// `protocol tcp|udp` (6 or 17).
        protocol: u8,
        /// `l3proto`: the table's family unless written.
        l3proto: Family,
    },
    /// `ct timeout NAME { protocol tcp; [l3proto ...;] policy = { established: 120, ... }; }`
    /// (NFTA_CT_TIMEOUT_L3PROTO, _L4PROTO, _DATA).
    Timeout {
        /// `protocol tcp|udp` (6 or 17).
        protocol: u8,
        /// `l3proto`: the table's family unless written.
        l3proto: Family,
        /// `policy`: (state index in the kernel's order, timeout in seconds), sorted by state,
        /// each state once (the last written counts).
        policy: Vec<(u8, u32)>,
    },
    /// `ct expectation NAME { protocol tcp; dport 1234; timeout 2m; size 12; [l3proto ...;]
    /// }` (NFTA_CT_EXPECT_L3PROTO, _L4PROTO, _DPORT, _TIMEOUT, _SIZE).
    Expectation {
        /// `protocol tcp|udp` (6 or 17).
        protocol: u8,
        /// `dport` (nft keeps the low 16 bits of what is written).
        dport: u16,
        /// `timeout` in ms.
        timeout_ms: u64,
        /// `size`: expectations at most (nft keeps the low 8 bits).
        size: u8,
        /// `l3proto`: the table's family unless written.
        l3proto: Family,
    },
}

impl CtObjConfig {
    /// The object kind ([`ObjKind::CtHelper`], [`ObjKind::CtTimeout`],
    /// [`ObjKind::CtExpectation`]).
    pub fn kind(&self) -> ObjKind {
        match self {
            CtObjConfig::Helper { .. } => ObjKind::CtHelper,
            CtObjConfig::Timeout { .. } => ObjKind::CtTimeout,
            CtObjConfig::Expectation { .. } => ObjKind::CtExpectation,
        }
    }
}

/// The states of a `ct timeout` policy for TCP, in the kernel's order
/// (CTA_TIMEOUT_TCP_*, nft's `tcp_state_to_name`), with nft's default of each in seconds
/// (`tcp_dflt_timeout`): nft lists only the states whose timeout differs from it.
pub const CT_TIMEOUT_TCP_STATES: &[(&str, u32)] = &[
    ("syn_sent", 120),
    ("syn_recv", 60),
    ("established", 432000),
    ("fin_wait", 120),
    ("close_wait", 60),
    ("last_ack", 30),
    ("time_wait", 120),
    ("close", 10),
    ("syn_sent2", 120),
    ("retrans", 300),
    ("unacknowledged", 300),
];

/// The states of a `ct timeout` policy for UDP (CTA_TIMEOUT_UDP_*, nft's
/// `udp_state_to_name` and `udp_dflt_timeout`).
pub const CT_TIMEOUT_UDP_STATES: &[(&str, u32)] = &[("unreplied", 30), ("replied", 180)];

/// The `ct timeout` policy states of transport protocol `protocol` (6 or 17; none for others).
pub fn ct_timeout_states(protocol: u8) -> &'static [(&'static str, u32)] {
    match protocol {
        6 => CT_TIMEOUT_TCP_STATES,
        17 => CT_TIMEOUT_UDP_STATES,
        _ => &[],
    }
}

/// A plugin declared in a table: `plugin NAME { path "FILE"; }`, or `plugin NAME;` for a
/// bundled plugin of that name.
///
/// Where the Wasm component comes from ([`PluginDecl::source`]): a path with a `/` or ending
/// in `.wasm` is a file, relative to the folder of the ruleset file that declares the plugin
/// (or absolute); any other path (`path "counter"`), and the bare form, name a bundled plugin,
/// which the `wasp` command finds (override directories, then the copy embedded in its binary:
/// `wasp::bundled`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginDecl {
    /// The name rules use it by (unique in its table).
    pub name: String,
    /// `path "..."` as written; `None` for the bare form `plugin NAME;`.
    pub path: Option<String>,
    /// Where the declaration is (the `plugin` keyword up to the name).
    pub span: Span,
}

/// Where a plugin's component is to be read from (see [`PluginDecl::source`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PluginSource {
    /// A bundled plugin by name, found by the `wasp` command (`wasp::bundled`).
    Bundled(String),
    /// A file (already joined to the declaring ruleset file's folder when relative).
    File(PathBuf),
}

impl PluginDecl {
    /// Where the component is: a bundled plugin, or a file resolved against the folder of the
    /// source file that holds the declaration ([`Ruleset::source`] of its span).
    pub fn source(&self, rs: &Ruleset) -> PluginSource {
        let path = match &self.path {
            None => return PluginSource::Bundled(self.name.clone()),
            Some(p) => p,
        };
        if !path.contains('/') && !path.ends_with(".wasm") {
            return PluginSource::Bundled(path.clone());
        }
        let p = std::path::Path::new(path);
        if p.is_absolute() {
            return PluginSource::File(p.to_path_buf());
        }
        let dir = rs
            .source(self.span.file)
            .and_then(|s| s.path.parent())
            .map(std::path::Path::to_path_buf)
            .unwrap_or_default();
        PluginSource::File(dir.join(p))
    }
}

/// A use of a plugin in a rule: `NAME ARG... [fallback drop]`.
///
/// The arguments are the tokens after the name up to the end of the rule, a verdict
/// (`accept`, `drop`, `continue`, `return`, `jump`, `goto`), `counter`, `log`, `comment` or
/// the use of another plugin of the table. Each token is kept as written: a quoted string
/// keeps its quotes (`label "wlan0"` gives `["label", "\"wlan0\""]`), `$variables` are
/// expanded, `{ ... }` may hold any token. `fallback drop` among them is not an argument: it
/// makes the use fail closed ([`PluginUse::fallback_drop`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginUse {
    /// The plugin's name, as declared in the rule's table.
    pub name: String,
    /// Arguments, one string per token, as written.
    pub args: Vec<String>,
    /// `fallback drop`: when the plugin fails, the packet is dropped (default: as if the
    /// expression were absent: a match is false, a statement continues).
    pub fallback_drop: bool,
    /// Where the use is (from the name to its last argument).
    pub span: Span,
}

/// A chain: a base chain (attached to a hook) or a regular chain (reached by jump/goto).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chain {
    /// Name.
    pub name: String,
    /// Kernel-style handle, from the table's handle counter (shared with rules and sets).
    pub handle: u64,
    /// Present for a base chain.
    pub base: Option<BaseChain>,
    /// Rules in evaluation order.
    pub rules: Vec<Rule>,
    /// `comment "..."`.
    pub comment: Option<String>,
    /// Where the chain was first declared.
    pub span: Span,
}

/// The hook attachment of a base chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseChain {
    /// `type filter|nat|route`.
    pub chain_type: ChainType,
    /// `hook ...`.
    pub hook: Hook,
    /// `device "x"` or `devices = { ... }` (netdev family).
    pub devices: Vec<String>,
    /// `priority N` (named priorities such as `filter` are resolved to their number).
    pub priority: i32,
    /// `policy accept|drop`; accept when not given.
    pub policy: Policy,
}

/// Chain type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChainType {
    /// `filter`
    Filter,
    /// `nat`
    Nat,
    /// `route`
    Route,
}

/// Netfilter hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Hook {
    /// `ingress` (netdev, inet)
    Ingress,
    /// `egress` (netdev)
    Egress,
    /// `prerouting`
    Prerouting,
    /// `input`
    Input,
    /// `forward`
    Forward,
    /// `output`
    Output,
    /// `postrouting`
    Postrouting,
}

impl Hook {
    /// The hook's keyword as nft writes it (`ingress`, `prerouting`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Hook::Ingress => "ingress",
            Hook::Egress => "egress",
            Hook::Prerouting => "prerouting",
            Hook::Input => "input",
            Hook::Forward => "forward",
            Hook::Output => "output",
            Hook::Postrouting => "postrouting",
        }
    }
}

/// Base chain policy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Policy {
    /// `accept` (the default)
    #[default]
    Accept,
    /// `drop`
    Drop,
}

/// A rule: statements evaluated left to right; the first match that fails ends the rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// Kernel-style handle, from the table's handle counter.
    pub handle: u64,
    /// Statements in order.
    pub stmts: Vec<Stmt>,
    /// `comment "..."`.
    pub comment: Option<String>,
    /// Where the rule starts.
    pub span: Span,
}

/// A statement inside a rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stmt {
    /// A match: `left op right`. The rule stops here when it does not hold.
    Match(Match),
    /// A verdict: `accept`, `drop`, `jump x`, ...
    Verdict(Verdict),
    /// `key vmap { k : verdict, ... }` or `key vmap @m`.
    VerdictMap {
        /// The key expression.
        key: Expr,
        /// The map.
        map: SetRef,
        /// Where the statement is.
        span: Span,
    },
    /// `counter` (with the counts it shows when listed).
    Counter {
        /// Packets counted.
        packets: u64,
        /// Bytes counted.
        bytes: u64,
    },
    /// `counter name NAME`: counts into the table's named counter object `NAME`.
    CounterRef {
        /// The object's name.
        name: String,
        /// Where the statement is (for an unknown name).
        span: Span,
    },
    /// `limit rate [over] N/UNIT [burst M packets]` or with bytes (nft_limit_pkts_eval,
    /// nft_limit_bytes_eval): matches while the statement's bucket has tokens for the packet
    /// (with `over`: while it has not).
    Limit {
        /// The bucket.
        limit: Limit,
        /// Where the statement is.
        span: Span,
    },
    /// `limit name NAME`: the table's named limit object `NAME` (nft_objref).
    LimitRef {
        /// The object's name.
        name: String,
        /// Where the statement is (for an unknown name).
        span: Span,
    },
    /// `quota [over|until] N UNIT [used M UNIT]` (nft_quota_eval): every packet that reaches
    /// it consumes its `skb->len`; matches while the consumed bytes are at most the quota
    /// (with `over`: once they are beyond it).
    Quota {
        /// The quota.
        quota: Quota,
        /// Where the statement is.
        span: Span,
    },
    /// `quota name NAME`: the table's named quota object `NAME` (nft_objref).
    QuotaRef {
        /// The object's name.
        name: String,
        /// Where the statement is (for an unknown name).
        span: Span,
    },
    /// `ct helper set "NAME"`, `ct timeout set "NAME"`, `ct expectation set "NAME"` (nft_objref
    /// of the table's [`CtObj`] `NAME`): nothing in wasp (see [`CtObj`]); the object must
    /// exist.
    CtObjRef {
        /// [`ObjKind::CtHelper`], [`ObjKind::CtTimeout`] or [`ObjKind::CtExpectation`].
        kind: ObjKind,
        /// The object's name.
        name: String,
        /// Where the statement is (for an unknown name).
        span: Span,
    },
    /// `counter name KEY map { k : "NAME", ... }`, `quota name ...`, `limit name ...`, `ct
    /// helper set KEY map { ... }` (and `ct timeout`, `ct expectation`) (nft_objref_map): the
    /// named object the packet's key maps to counts or judges it; a key the map does not hold
    /// ends the rule (NFT_BREAK).
    ObjectMap {
        /// Which kind of object the map names.
        kind: ObjKind,
        /// The key expression.
        key: Expr,
        /// The map (its elements' data are [`ElemData::Object`]).
        map: SetRef,
        /// Where the statement is.
        span: Span,
    },
    /// `reject [with icmp|icmpv6|icmpx TYPE | with tcp reset]` (nft_reject_inet_eval and the
    /// per-family nft_reject_*_eval): the packet is dropped (and the kernel sends the reply;
    /// wasp does not build the reply yet). Terminal.
    Reject {
        /// What reply (the family's default already resolved: `reject` in an ip table is
        /// `Icmp(3)`).
        kind: RejectKind,
        /// The table is inet, netdev or bridge: nft 1.0.6 lists an icmp or icmpv6 reply there
        /// in full (`reject with icmp port-unreachable`), where an ip or ip6 table lists its
        /// default as `reject`. Only the listing depends on it.
        verbose: bool,
        /// Where the statement is.
        span: Span,
    },
    /// `log [prefix "..."] [group N ...] [level ...] [flags ...]`.
    Log(LogStmt),
    /// A use of a plugin declared in the table (a wasp extension).
    Plugin(PluginUse),
    /// `meta KEY set VALUE` (e.g. `meta mark set 0x10`, `meta nftrace set 1`).
    MetaSet {
        /// Which meta key.
        key: MetaKey,
        /// The value expression (a constant, or e.g. `meta mark | 0x1`).
        value: Expr,
        /// Where the statement is.
        span: Span,
    },
    /// `FIELD set VALUE` (`ip dscp set cs1`, `tcp dport set 8080`, `@ih,58,6 set 0`,
    /// `tcp option maxseg size set 1360`): the kernel's payload statement
    /// (nft_payload_set_eval), which writes the field and updates the IPv4 header checksum and
    /// the TCP/UDP checksum the field is covered by; for a TCP option field nft_exthdr's write
    /// (2- and 4-byte fields only, the first option of its kind, never raising an MSS).
    PayloadSet {
        /// The field: [`Expr::Payload`], [`Expr::Raw`] or a TCP option field [`Expr::Opt`].
        target: Expr,
        /// The value expression.
        value: Expr,
        /// Where the statement is.
        span: Span,
    },
    /// `add|update|delete @set { KEY ... }`: the set statement (the kernel's nft_dynset),
    /// which changes a named set from the packet path.
    SetUpdate(Box<SetUpdate>),
    /// `reset tcp option KIND` (the kernel's nft_exthdr_tcp_strip_eval): the first TCP option
    /// of that kind becomes NOPs, the TCP checksum follows.
    OptReset {
        /// The option kind.
        kind: u8,
        /// Where the statement is.
        span: Span,
    },
    /// `fwd to "dev"` (netdev family): the packet leaves on `dev` and the hook ends for it
    /// (the kernel's nft_fwd_netdev: NF_STOLEN); with `via`, `fwd ip to ADDR device "dev"` /
    /// `fwd ip6 to ADDR device "dev"` (nft_fwd_neigh): the TTL or hop limit is decremented and
    /// the frame goes to the neighbour `ADDR` on `dev`. Terminal.
    Fwd {
        /// Output device name (empty when `map` gives the device).
        dev: String,
        /// Next hop of `fwd ip|ip6 to ADDR device "dev"`.
        via: Option<std::net::IpAddr>,
        /// `fwd to KEY map { k : "dev", ... }` / `fwd ip|ip6 to KEY map { k : ADDR, ... }
        /// device "dev"`: the [`Expr::Map`] whose data, looked up per packet, is the device
        /// (data type `iface_index`) or the next hop (an address, `dev` being the device).
        /// A key the map does not hold ends the rule (the kernel's nft_lookup_eval with a
        /// destination register: NFT_BREAK), so nothing is forwarded.
        map: Option<Box<Expr>>,
        /// Where the statement is.
        span: Span,
    },
    /// `ct KEY set VALUE` for `mark`, `label`, `event` and `[original|reply] zone`
    /// (nft_ct_set_eval): the connection's key is set. A packet without a connection is left
    /// alone, except for `zone`, which a rule before conntrack sets for the packet (the
    /// kernel's template conntrack).
    CtSet {
        /// Which key.
        key: CtKey,
        /// The value expression.
        value: Expr,
        /// Where the statement is.
        span: Span,
    },
    /// `ct count [over] N` (nft_connlimit): matches when the number of live connections that
    /// passed this statement is at most `count` (or, with `over`, more than `count`); the
    /// packet's connection is added to the statement's list first.
    CtCount {
        /// `over`.
        over: bool,
        /// The limit.
        count: u32,
        /// Where the statement is.
        span: Span,
    },
    /// `snat`, `dnat`, `masquerade` or `redirect` (nft_nat, nft_masq, nft_redir). Terminal in
    /// its chain: the connection gets the binding and the hook's nat chains end for it.
    Nat(NatStmt),
    /// `flow add @NAME` (also written `flow offload @NAME`; nft_flow_offload): the packet's
    /// connection is put in flowtable `NAME` of the table once the route is known. The walk
    /// goes on.
    FlowAdd {
        /// The flowtable's name.
        flowtable: String,
        /// Where the statement is.
        span: Span,
    },
    /// `notrack` (nft_notrack_eval): the packet skips connection tracking (`ct state
    /// untracked` matches it). It has an effect only before conntrack (a chain at priority
    /// `raw`, below -200).
    Notrack,
    /// `dup to "dev"` (netdev family): a copy of the packet leaves on `dev`, the walk goes on
    /// (the kernel's nft_dup_netdev). With `via`, `dup to ADDR [device "dev"]` of the ip and
    /// ip6 families (nft_dup_ipv4/ipv6): the copy goes to the neighbour `ADDR`, out of `dev`
    /// or (`dev` empty) of the route to `ADDR`.
    Dup {
        /// Output device name (empty: the route's, or the one `map` gives).
        dev: String,
        /// The next hop of `dup to ADDR` (ip, ip6 tables).
        via: Option<std::net::IpAddr>,
        /// `dup to KEY map { k : "dev", ... }` (netdev) / `dup to KEY map { k : ADDR, ... }
        /// [device "dev"]` (ip, ip6): the [`Expr::Map`] whose data, looked up per packet, is
        /// the device (data type `iface_index`) or the next hop. A key the map does not hold
        /// ends the rule (nft_lookup_eval: NFT_BREAK): no copy leaves.
        map: Option<Box<Expr>>,
        /// Where the statement is.
        span: Span,
    },
}

/// A `log` statement (the kernel's nft_log).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogStmt {
    /// `prefix "..."`.
    pub prefix: Option<String>,
    /// `level emerg|alert|crit|err|notice|info|debug|audit` (`warn`, the default, is `None`).
    pub level: Option<String>,
    /// `group N`: to nfnetlink_log group N instead of the kernel log.
    pub group: Option<u16>,
    /// `snaplen N` (bytes copied to the group).
    pub snaplen: Option<u32>,
    /// `queue-threshold N` (packets batched for the group).
    pub queue_threshold: Option<u16>,
    /// `flags ...`.
    pub flags: LogFlags,
}

/// `log flags` bits (the kernel's NF_LOG_*).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct LogFlags(pub u8);

impl LogFlags {
    /// `tcp sequence`.
    pub const TCPSEQ: u8 = 0x01;
    /// `tcp options`.
    pub const TCPOPT: u8 = 0x02;
    /// `ip options`.
    pub const IPOPT: u8 = 0x04;
    /// `skuid`.
    pub const UID: u8 = 0x08;
    /// `ether`.
    pub const MACDECODE: u8 = 0x20;
    /// `all`.
    pub const ALL: u8 = 0x2f;

    /// As nft lists them: ` flags all`, ` flags tcp sequence,options flags ip options`, or
    /// nothing.
    pub fn text(self) -> String {
        let b = self.0;
        if b == 0 {
            return String::new();
        }
        if b & Self::ALL == Self::ALL {
            return " flags all".to_string();
        }
        let mut s = String::new();
        match (b & Self::TCPSEQ != 0, b & Self::TCPOPT != 0) {
            (true, true) => s.push_str(" flags tcp sequence,options"),
            (true, false) => s.push_str(" flags tcp sequence"),
            (false, true) => s.push_str(" flags tcp options"),
            _ => {}
        }
        if b & Self::IPOPT != 0 {
            s.push_str(" flags ip options");
        }
        if b & Self::UID != 0 {
            s.push_str(" flags skuid");
        }
        if b & Self::MACDECODE != 0 {
            s.push_str(" flags ether");
        }
        s
    }
}

/// The reply of a `reject` statement (NFTA_REJECT_TYPE and NFTA_REJECT_ICMP_CODE).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RejectKind {
    /// `with icmp CODE` (NFT_REJECT_ICMP_UNREACH): an ICMP destination-unreachable with this
    /// code (`port-unreachable` is 3).
    Icmp(u8),
    /// `with icmpv6 CODE` (NFT_REJECT_ICMP_UNREACH in an ip6 table, or for IPv6 packets):
    /// an ICMPv6 destination-unreachable with this code (`port-unreachable` is 4).
    Icmpv6(u8),
    /// `with icmpx CODE` (NFT_REJECT_ICMPX_UNREACH, inet and netdev): a code that maps to
    /// each family's own (`port-unreachable` 1, `admin-prohibited` 3, ...).
    Icmpx(u8),
    /// `with tcp reset` (NFT_REJECT_TCP_RST).
    TcpReset,
}

/// The kinds of named objects a rule can name (NFT_OBJECT_COUNTER, _QUOTA, _LIMIT,
/// _CT_HELPER, _CT_TIMEOUT, _CT_EXPECT).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ObjKind {
    /// `counter`
    Counter,
    /// `quota`
    Quota,
    /// `limit`
    Limit,
    /// `ct helper`
    CtHelper,
    /// `ct timeout`
    CtTimeout,
    /// `ct expectation`
    CtExpectation,
}

impl ObjKind {
    /// The kind's keyword(s).
    pub fn name(self) -> &'static str {
        match self {
            ObjKind::Counter => "counter",
            ObjKind::Quota => "quota",
            ObjKind::Limit => "limit",
            ObjKind::CtHelper => "ct helper",
            ObjKind::CtTimeout => "ct timeout",
            ObjKind::CtExpectation => "ct expectation",
        }
    }

    /// The words before the object's name (or map) in a rule: `counter name`, `ct helper
    /// set`.
    pub fn reference(self) -> &'static str {
        match self {
            ObjKind::Counter => "counter name",
            ObjKind::Quota => "quota name",
            ObjKind::Limit => "limit name",
            ObjKind::CtHelper => "ct helper set",
            ObjKind::CtTimeout => "ct timeout set",
            ObjKind::CtExpectation => "ct expectation set",
        }
    }
}

/// `icmpx` codes of `reject with icmpx CODE` (nft's `icmpx_code`, NFT_REJECT_ICMPX_*).
pub const ICMPX_CODES: &[(&str, u8)] = &[
    ("no-route", 0),
    ("port-unreachable", 1),
    ("host-unreachable", 2),
    ("admin-prohibited", 3),
];

/// Which translation a [`NatStmt`] does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NatKind {
    /// `snat to ...` (postrouting, input): the source is rewritten.
    Snat,
    /// `dnat to ...` (prerouting, output): the destination is rewritten.
    Dnat,
    /// `masquerade` (postrouting): `snat` to the output device's address.
    Masquerade,
    /// `redirect` (prerouting, output): `dnat` to the input device's address (or the host).
    Redirect,
}

impl NatKind {
    /// The statement's keyword.
    pub fn name(self) -> &'static str {
        match self {
            NatKind::Snat => "snat",
            NatKind::Dnat => "dnat",
            NatKind::Masquerade => "masquerade",
            NatKind::Redirect => "redirect",
        }
    }
}

/// `random`, `fully-random`, `persistent` after a NAT statement (NF_NAT_RANGE_PROTO_RANDOM,
/// NF_NAT_RANGE_PROTO_RANDOM_FULLY, NF_NAT_RANGE_PERSISTENT).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct NatFlags {
    /// `random`
    pub random: bool,
    /// `fully-random`
    pub fully_random: bool,
    /// `persistent`
    pub persistent: bool,
}

/// A NAT statement: `snat [ip|ip6] to ADDR[-ADDR][:PORT[-PORT]]`, `dnat ...`,
/// `masquerade [to :PORT[-PORT]]`, `redirect [to :PORT[-PORT]]`, with flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NatStmt {
    /// Which translation.
    pub kind: NatKind,
    /// `ip` / `ip6` written after the keyword, as nft lists it: kept in an inet table (where
    /// an address needs it), `None` in an ip or ip6 table (nft drops it from the listing: the
    /// table's family says it) and when not written.
    pub family: Option<Family>,
    /// Address range, both ends inclusive (one address: both the same; a prefix
    /// `10.0.0.0/24` is its range). `None` for masquerade/redirect and for a port-only
    /// `snat to :PORT`.
    pub addr: Option<(std::net::IpAddr, std::net::IpAddr)>,
    /// The address was written as a range or a prefix (the kernel gets a minimum and a
    /// maximum register, NFTA_NAT_REG_ADDR_MAX): nft lists it as a prefix when it is one
    /// (`10.0.0.1-10.0.0.1` as `10.0.0.1/32`), else as `lo-hi`; a single address lists as
    /// itself. Only the listing depends on it.
    pub addr_range: bool,
    /// Port range, both ends inclusive (one port: both the same).
    pub ports: Option<(u16, u16)>,
    /// The ports were written as a range (`:80-80` lists as `:80-80`, `:80` as `:80`). Only
    /// the listing depends on it.
    pub port_range: bool,
    /// `to EXPR`: the target computed from the packet instead of `addr`/`ports` (both `None`
    /// then): an [`Expr::Map`] whose elements hold [`ElemData::Nat`] (an address range and
    /// maybe a port range), or an expression giving the address as a number (`dnat to numgen
    /// inc mod 2 offset 167772161`: 10.0.0.1 and 10.0.0.2).
    pub target: Option<Box<Expr>>,
    /// `snat ip prefix to ...` (NF_NAT_RANGE_NETMAP): the map's data is a prefix that the
    /// address is mapped into, keeping its host bits.
    pub prefix: bool,
    /// Flags.
    pub flags: NatFlags,
    /// Where the statement is.
    pub span: Span,
}

/// A relational expression `left op right`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Match {
    /// The expression read from the packet.
    pub left: Expr,
    /// The operator.
    pub op: RelOp,
    /// What it is compared with.
    pub right: Rhs,
    /// Where the match is.
    pub span: Span,
    /// Written, but not listed: it is the implicit dependency of the field right after it
    /// (`meta l4proto tcp tcp dport 22` lists as `tcp dport 22`, as nft 1.0.6 lists it). It
    /// still runs.
    pub implied: bool,
}

/// Relational operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RelOp {
    /// No operator written. For a bitmask type with a single value this is a flag test
    /// (`tcp flags syn` means `tcp flags & syn != 0`); otherwise it is `==`.
    Implicit,
    /// `==` / `eq`
    Eq,
    /// `!=` / `ne`
    Ne,
    /// `<` / `lt`
    Lt,
    /// `>` / `gt`
    Gt,
    /// `<=` / `le`
    Le,
    /// `>=` / `ge`
    Ge,
}

/// The right-hand side of a match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rhs {
    /// One key: a value, range or prefix per concatenated field (one part for a plain
    /// expression).
    Key(Vec<KeyPart>),
    /// A set: anonymous (`{ ... }`) or named (`@name`).
    Set(SetRef),
}

/// A reference to a set: an anonymous set written in place, or a named set of the same table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetRef {
    /// `{ a, b-c, d/24 }` or, for maps, `{ k : v, ... }`.
    Anonymous(Vec<SetElem>),
    /// `@name`.
    Named(String),
}

/// One part of a key (one field of a concatenation).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum KeyPart {
    /// An exact value.
    Value(Value),
    /// `low-high`, both inclusive.
    Range(Value, Value),
    /// `addr/len`: the value (already masked) and the prefix length in bits.
    Prefix(Value, u8),
}

/// A set element's key: one part per concatenated field, held in place up to two fields (an
/// element of a large set then allocates nothing of its own, and its memory is one slot of
/// its set's element list).
pub type ElemKey = smallvec::SmallVec<[KeyPart; 2]>;

/// A value's bytes: up to 16 (the widest data types, `ipv6_addr`, `ifname`, `ct label`) held
/// in place, so that a set element's key allocates nothing per field.
pub type Bytes = smallvec::SmallVec<[u8; 16]>;

/// A constant: big-endian bytes of its data type's width (e.g. 4 for `ipv4_addr`, 2 for
/// `inet_service`, 16 for `ifname`, 1 for a 3-bit `vlan pcp`). Sub-byte values are
/// right-aligned: `vlan id 100` is `[0x00, 0x64]`, `ip dscp cs1` is `[0x08]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Value {
    /// Data type that gives the bytes their meaning (and their printed form).
    pub dtype: DataType,
    /// Big-endian bytes, `dtype.width_bytes()` long. For `ifname` a NUL-padded name of 16 bytes.
    pub bytes: Bytes,
    /// `ifname` only: the name ended in `*` (a prefix match on the bytes before the `*`).
    pub wildcard: bool,
}

/// Data types, as nft names them (`nft describe`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DataType {
    /// An integer of the given width in bits (1..=128).
    Integer(u8),
    /// `ipv4_addr`
    Ipv4Addr,
    /// `ipv6_addr`
    Ipv6Addr,
    /// `ether_addr`
    EtherAddr,
    /// `ether_type`
    EtherType,
    /// `inet_proto`
    InetProto,
    /// `inet_service`
    InetService,
    /// `mark`
    Mark,
    /// `ifname`
    Ifname,
    /// `tcp_flag` (a bitmask)
    TcpFlag,
    /// `icmp_type`
    IcmpType,
    /// `icmp_code`
    IcmpCode,
    /// `icmpv6_type`
    Icmpv6Type,
    /// `icmpv6_code`
    Icmpv6Code,
    /// `dscp`
    Dscp,
    /// `nf_proto` (`ipv4`, `ipv6`)
    NfProto,
    /// `boolean` (for `exists` / `missing`)
    Boolean,
    /// `verdict` (map data of a verdict map)
    Verdict,
    /// `ct_state` (a bitmask: invalid 1, established 2, related 4, new 8, untracked 64; 32 bits)
    CtState,
    /// `ct_dir` (`original` 0, `reply` 1; 8 bits)
    CtDir,
    /// `ct_status` (a bitmask of IPS_* bits: expected 1, seen-reply 2, assured 4, confirmed 8,
    /// snat 16, dnat 32, dying 512; 32 bits)
    CtStatus,
    /// An integer of the given width in bits that nft 1.0.6 prints in hexadecimal (`comp
    /// flags`).
    Hex(u8),
    /// `ecn` (`not-ect` 0, `ect1` 1, `ect0` 2, `ce` 3; 2 bits)
    Ecn,
    /// `dccp_pkttype` (`request` 0 ... `syncack` 9; 4 bits)
    DccpPkttype,
    /// `igmp_type` (`membership-query` 0x11, ...; 8 bits)
    IgmpType,
    /// `mh_type` (mobility header types, `binding-refresh-request` 0 ...; 8 bits)
    MhType,
    /// `arp_op` (`request` 1, `reply` 2, ...; 16 bits)
    ArpOp,
    /// `iface_index` (`iif`, `oif`): a device, written and listed by name (`"lo"`); wasp
    /// keeps the name (16 NUL-padded bytes) and compares names, where the kernel compares the
    /// index it looked the name up to at load.
    IfaceIndex,
    /// `iface_type` (ARPHRD_*: `ether` 1, `ppp` 512, `loopback` 772, ...; 16 bits)
    IfaceType,
    /// `devgroup` (device group, named in `/etc/iproute2/group`; 32 bits)
    Devgroup,
    /// `tc_handle` (`major:minor` in hex, `root`, `none`; 32 bits)
    TcHandle,
    /// `uid` (a user, named in `/etc/passwd`; 32 bits)
    Uid,
    /// `gid` (a group, named in `/etc/group`; 32 bits)
    Gid,
    /// `fib_addrtype` (RTN_*: `unspec` 0, `unicast` 1, `local` 2, `broadcast` 3, `anycast` 4,
    /// `multicast` 5, `blackhole` 6, `unreachable` 7, `prohibit` 8; 32 bits, host order).
    FibAddrType,
    /// `pkt_type` (`host` 0, `broadcast` 1, `multicast` 2, `other` 3; 8 bits)
    PktType,
    /// `day` (`"Sunday"` 0 ... `"Saturday"` 6; 8 bits)
    Day,
    /// `hour` (seconds since midnight, written `"17:00"` or `"17:00:01"`; 32 bits)
    Hour,
    /// `meta time`'s type (ns since the Unix epoch, written `"2019-06-21 17:00:00"`; 64
    /// bits). nft 1.0.6 names it `time` too; wasp lists it as `date` in a set type.
    Time,
    /// `time`, a relative time in ms (`30s`, `1h2m`; `ct expiration` 32 bits, a set of `type
    /// time` 64 bits).
    TimeRel(u8),
    /// `realm` (a route realm, named in `/etc/iproute2/rt_realms`; 32 bits)
    Realm,
    /// `ct_event` (a bitmask of the kernel's IPCT_* event bits: `new` 1, `related` 2,
    /// `destroy` 4, `reply` 8, `assured` 16, `protoinfo` 32, `helper` 64, `mark` 128,
    /// `seqadj` 256, `secmark` 512, `label` 1024; 32 bits)
    CtEvent,
    /// `ct_label` (128 bits, one per label; a label is written as its bit number 0 to 127, or
    /// its name in `/etc/connlabel.conf`). The model's value has bit N as `1 << N` of the
    /// big-endian number (the kernel's register holds it as a little-endian bitmap).
    CtLabel,
}

/// Expressions that produce a value from the packet (or combine such values).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expr {
    /// A header field.
    Payload(PayloadField),
    /// `meta KEY` (or a bare key such as `iifname`, `mark`).
    Meta(MetaKey),
    /// `ct KEY` (nft_ct_get_eval): the packet's connection.
    Ct(CtKey),
    /// `exthdr NAME exists`: presence of an IPv6 extension header.
    ExthdrExists(Ip6ExtHdr),
    /// `ipsec in|out [spnum N] reqid|spi|ip saddr|...` (nft_xfrm): the packet's IPsec state.
    /// wasp has none, so it never matches, negated or not (the kernel's NFT_BREAK for a packet
    /// without a secpath).
    Ipsec(IpsecKey),
    /// `socket transparent|mark|wildcard` (nft_socket): the local socket the packet belongs
    /// to. wasp has no local sockets: never matches (the kernel's NFT_BREAK without one).
    Socket(SocketKey),
    /// `osf [ttl loose|skip] name|version` (nft_osf): the passive OS fingerprint of a TCP SYN.
    /// wasp has no fingerprint database: a SYN reads `"unknown"` (the kernel's answer when no
    /// fingerprint matches), any other packet ends the rule.
    Osf {
        /// `ttl loose` (1) or `ttl skip` (2); 0 when not written.
        ttl: u8,
        /// `version` rather than `name`.
        version: bool,
    },
    /// `fib saddr|daddr [. mark] [. iif|oif] oif|oifname|type` (nft_fib_ipv4 / nft_fib_ipv6):
    /// a lookup of the packet's source or destination address in the router's FIB (wasp's
    /// gateway: its routes, devices and addresses), see [`FibExpr`].
    Fib(FibExpr),
    /// `rt [ip|ip6] classid|nexthop|mtu|ipsec` (nft_rt): what the packet's route (its dst,
    /// known after routing) says, see [`RtKey`].
    Rt(RtKey),
    /// A raw payload expression `@ll|nh|th|ih,OFFSET,LENGTH` (offset and length in bits from
    /// the base; values in hexadecimal).
    Raw {
        /// The header the offset counts from.
        base: PayloadBase,
        /// Offset in bits.
        offset_bits: u16,
        /// Length in bits (1 to 128).
        len_bits: u16,
    },
    /// A TCP option or SCTP chunk field, or its presence (`tcp option maxseg size`, `sctp
    /// chunk data exists`; see [`crate::options`]).
    Opt(OptField),
    /// `a . b . c`
    Concat(Vec<Expr>),
    /// `expr & mask`, `expr | bits`, `expr ^ bits`.
    Binop {
        /// Operand read from the packet.
        expr: Box<Expr>,
        /// Operator.
        op: BinOp,
        /// Constant operand.
        value: Value,
    },
    /// A constant (right side of `meta mark set 0x10`).
    Const(Value),
    /// `numgen inc|random mod N [offset M]` (the kernel's nft_numgen): `inc` counts up by one
    /// per packet that reaches the expression (one counter per expression, shared by every
    /// worker), `random` draws a number; the result is `n % N + M` (`inc`) or
    /// `reciprocal_scale(random, N) + M` (`random`), 32 bits.
    Numgen {
        /// `random` rather than `inc`.
        random: bool,
        /// `mod N` (at least 1).
        modulus: u32,
        /// `offset M` (0 when not written).
        offset: u32,
    },
    /// `jhash EXPR mod N [seed S] [offset M]` (the kernel's nft_jhash_eval):
    /// `reciprocal_scale(jhash(data, len, seed), N) + M` over the bytes of `EXPR` as the
    /// kernel's registers hold them (each field of a concatenation padded to 4 bytes), 32 bits.
    Jhash {
        /// The expression hashed (a field or a concatenation).
        expr: Box<Expr>,
        /// `mod N` (at least 1).
        modulus: u32,
        /// `seed S` when written (nft lists it only then; the kernel uses 0 otherwise).
        seed: Option<u32>,
        /// `offset M` (0 when not written).
        offset: u32,
    },
    /// `symhash mod N [offset M]` (the kernel's nft_symhash_eval over `skb_get_hash_symmetric`):
    /// a hash of the flow that is the same in both directions, scaled to `0..N`, plus `M`.
    /// wasp's hash differs from the kernel's (see wasp-core's evaluator).
    Symhash {
        /// `mod N` (at least 1).
        modulus: u32,
        /// `offset M` (0 when not written).
        offset: u32,
    },
    /// `KEY map { k : v, ... }` or `KEY map @m`: the data of the map element holding the key
    /// (`meta mark set ip saddr map { 10.0.0.1 : 0x1 }`); a miss ends the rule (NFT_BREAK, as
    /// the kernel's `nft_lookup_eval` with a destination register).
    Map {
        /// The key expression.
        key: Box<Expr>,
        /// The map.
        map: SetRef,
        /// Type of the map's data.
        data: DataType,
    },
}

/// What a set statement does to its set (nft_dynset's operation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SetOp {
    /// `add`: insert the key unless it is there (NFT_DYNSET_OP_ADD).
    Add,
    /// `update`: insert it, or refresh its expiry (NFT_DYNSET_OP_UPDATE).
    Update,
    /// `delete`: remove it (NFT_DYNSET_OP_DELETE).
    Delete,
}

impl SetOp {
    /// The statement's word.
    pub fn word(self) -> &'static str {
        match self {
            SetOp::Add => "add",
            SetOp::Update => "update",
            SetOp::Delete => "delete",
        }
    }
}

/// `add|update|delete @set { KEY [timeout T] [STATEFUL ...] [: DATA] }`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetUpdate {
    /// What it does.
    pub op: SetOp,
    /// The named set (of the rule's table).
    pub set: String,
    /// The key, built from the packet.
    pub key: Expr,
    /// `timeout T` in ms: the expiry of an element the statement adds (and, for `update`,
    /// refreshes); `None` takes the set's `timeout`.
    pub timeout_ms: Option<u64>,
    /// The element's own stateful statements (`limit`, `counter`, `quota`): state per
    /// element, run for the packet on the element it found or added.
    pub stmts: Vec<Stmt>,
    /// `: DATA` for a map: the element's data, from the packet or a constant.
    pub data: Option<Expr>,
    /// Where the statement is.
    pub span: Span,
}

/// Bitwise operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BinOp {
    /// `&`
    And,
    /// `|`
    Or,
    /// `^`
    Xor,
    /// `<<` (the kernel's NFT_BITWISE_LSHIFT: bits shifted out of the field's width are lost).
    Lshift,
    /// `>>` (NFT_BITWISE_RSHIFT).
    Rshift,
}

impl BinOp {
    /// The operator as nft lists it.
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::And => "&",
            BinOp::Or => "|",
            BinOp::Xor => "^",
            BinOp::Lshift => "<<",
            BinOp::Rshift => ">>",
        }
    }

    /// nft's binding strength (`expr_binop_precedence`): shifts bind tightest (1), then `&`
    /// (2), `^` (3), `|` (4). An operand that binds less tightly than its operator is
    /// parenthesised in the listing: `(meta mark | 0x10) << 8`.
    pub fn precedence(self) -> u8 {
        match self {
            BinOp::Lshift | BinOp::Rshift => 1,
            BinOp::And => 2,
            BinOp::Xor => 3,
            BinOp::Or => 4,
        }
    }
}

/// A header field nftables knows by name: a row of a protocol's table in [`crate::proto`]
/// (see [`PayloadField::desc`] for where it sits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PayloadField {
    /// The protocol (`ip`, `tcp`, ...).
    pub proto: crate::proto::Proto,
    /// Index of the field in the protocol's table ([`crate::proto::ProtoDesc::fields`]).
    pub field: u8,
    /// Tag position for `vlan` fields (0 = outermost), in the order the rule names vlan
    /// headers; 0 for every other protocol.
    pub depth: u8,
}

/// What `ipsec` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IpsecKey {
    /// `out` rather than `in`.
    pub out: bool,
    /// `spnum N` (0 when not written, and then not listed).
    pub spnum: u8,
    /// The key.
    pub key: IpsecField,
}

/// The field of an [`IpsecKey`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IpsecField {
    /// `reqid` (32 bits).
    Reqid,
    /// `spi` (32 bits).
    Spi,
    /// `ip saddr` / `ip6 saddr` of the state.
    Saddr(Family),
    /// `ip daddr` / `ip6 daddr`.
    Daddr(Family),
}

/// A `fib` expression: its flags (the kernel's NFTA_FIB_F_*) and what it returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FibExpr {
    /// NFTA_FIB_F_* bits: [`FibExpr::SADDR`], [`FibExpr::DADDR`], [`FibExpr::MARK`],
    /// [`FibExpr::IIF`], [`FibExpr::OIF`], [`FibExpr::PRESENT`].
    pub flags: u32,
    /// What the lookup returns.
    pub result: FibResult,
}

impl FibExpr {
    /// Look the source address up (`saddr`).
    pub const SADDR: u32 = 1;
    /// Look the destination address up (`daddr`).
    pub const DADDR: u32 = 2;
    /// Use the packet's mark (`mark`; wasp's routes do not depend on it).
    pub const MARK: u32 = 4;
    /// Restrict to the input device (`iif`).
    pub const IIF: u32 = 8;
    /// Restrict to the output device (`oif`).
    pub const OIF: u32 = 16;
    /// Compared with `exists` / `missing`: the result is whether a device was found (1 byte).
    pub const PRESENT: u32 = 32;

    /// The words of the flags as nft lists them (`saddr . iif`): saddr, daddr, mark, iif, oif.
    pub fn flag_words(self) -> Vec<&'static str> {
        [
            (Self::SADDR, "saddr"),
            (Self::DADDR, "daddr"),
            (Self::MARK, "mark"),
            (Self::IIF, "iif"),
            (Self::OIF, "oif"),
        ]
        .iter()
        .filter(|(f, _)| self.flags & f != 0)
        .map(|(_, w)| *w)
        .collect()
    }

    /// The data type of the result: `iface_index`, `ifname`, `fib_addrtype`, or `boolean`
    /// with [`FibExpr::PRESENT`].
    pub fn dtype(self) -> DataType {
        if self.flags & Self::PRESENT != 0 {
            return DataType::Boolean;
        }
        match self.result {
            FibResult::Oif => DataType::IfaceIndex,
            FibResult::Oifname => DataType::Ifname,
            FibResult::Type => DataType::FibAddrType,
        }
    }
}

/// What a `fib` lookup returns (NFT_FIB_RESULT_*).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FibResult {
    /// `oif`: the device of the route (NFT_FIB_RESULT_OIF).
    Oif,
    /// `oifname`: its name (NFT_FIB_RESULT_OIFNAME).
    Oifname,
    /// `type`: the address type (NFT_FIB_RESULT_ADDRTYPE, `fib_addrtype`).
    Type,
}

impl FibResult {
    /// The word nft lists.
    pub fn name(self) -> &'static str {
        match self {
            FibResult::Oif => "oif",
            FibResult::Oifname => "oifname",
            FibResult::Type => "type",
        }
    }
}

/// What `rt` reads (NFT_RT_*).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RtKey {
    /// `classid` (NFT_RT_CLASSID): the route's realm, `realm`, 32 bits.
    Classid,
    /// `ip nexthop` (NFT_RT_NEXTHOP4): the IPv4 next hop.
    Nexthop4,
    /// `ip6 nexthop` (NFT_RT_NEXTHOP6): the IPv6 next hop.
    Nexthop6,
    /// `mtu` (NFT_RT_TCPMSS): the TCP MSS the route allows, 16 bits.
    Tcpmss,
    /// `ipsec` (NFT_RT_XFRM): whether the route is an IPsec transform, `boolean`.
    Ipsec,
}

impl RtKey {
    /// The data type of the value.
    pub fn dtype(self) -> DataType {
        match self {
            RtKey::Classid => DataType::Realm,
            RtKey::Nexthop4 => DataType::Ipv4Addr,
            RtKey::Nexthop6 => DataType::Ipv6Addr,
            RtKey::Tcpmss => DataType::Integer(16),
            RtKey::Ipsec => DataType::Boolean,
        }
    }

    /// The key as nft lists it (`rt ip nexthop`, `rt mtu`), without `rt `.
    pub fn name(self) -> &'static str {
        match self {
            RtKey::Classid => "classid",
            RtKey::Nexthop4 => "ip nexthop",
            RtKey::Nexthop6 => "ip6 nexthop",
            RtKey::Tcpmss => "mtu",
            RtKey::Ipsec => "ipsec",
        }
    }
}

/// What `socket` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SocketKey {
    /// `transparent` (1 bit).
    Transparent,
    /// `mark`.
    Mark,
    /// `wildcard` (1 bit).
    Wildcard,
}

/// Which type-length-value list an [`OptField`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OptHeader {
    /// TCP options (`tcp option`).
    TcpOption,
    /// SCTP chunks (`sctp chunk`).
    SctpChunk,
}

/// What an [`OptField`] reads of its option or chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OptSel {
    /// Whether it is there (`exists` / `missing`).
    Exists,
    /// A field: index into the option's row in [`crate::options`].
    Field(u8),
    /// Raw bits (`tcp option @KIND,OFFSET,LENGTH`), offset and length in bits.
    Raw {
        /// Offset in bits from the start of the option.
        offset_bits: u16,
        /// Length in bits.
        len_bits: u16,
    },
}

/// A TCP option or SCTP chunk, and what of it is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OptField {
    /// Which list.
    pub hdr: OptHeader,
    /// The option kind or chunk type.
    pub kind: u8,
    /// Index of its row in the list's table when it has a name (`sack1` and `sack` share a
    /// kind), `None` for an unnamed type.
    pub desc: Option<u8>,
    /// What is read.
    pub sel: OptSel,
}

/// Which header a payload offset counts from, as the kernel's `nft_payload_bases`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PayloadBase {
    /// The link-layer (MAC) header: offset 0 of the frame.
    Link,
    /// The network header (see `wasp_wire::PacketMeta::net_offset`).
    Network,
    /// The transport header (see `wasp_wire::PacketMeta::l4`).
    Transport,
    /// The IPv6 extension header with this next-header number, found by walking the header
    /// chain as the kernel's `ipv6_find_hdr` does (nft's `exthdr load ipv6`); a packet without
    /// it has no such field (the rule does not match, negated or not).
    Ip6Ext(u8),
    /// The inner header: after the transport header (`@ih`; the kernel's
    /// NFT_PAYLOAD_INNER_HEADER, for TCP and UDP only).
    Inner,
}

/// The implicit protocol dependency nft adds in front of a payload match
/// (e.g. `meta l4proto tcp` before `tcp dport`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dependency {
    /// `meta protocol` (netdev) / `meta nfproto` (inet) must be IPv4.
    Ipv4,
    /// Same for IPv6.
    Ipv6,
    /// `meta l4proto` must equal this protocol number.
    L4Proto(u8),
    /// The EtherType (or the previous vlan's type) must announce a VLAN tag at this depth.
    Vlan(u8),
    /// `meta protocol arp` (netdev, bridge): the frame is ARP.
    Arp,
    /// `icmp type N` / `icmpv6 type N` (the first byte of the transport header): a field that
    /// exists in one message type only (`icmp mtu`).
    IcmpType(u8),
}

/// Where a payload field lives: base, bit offset and bit length, data type and dependency.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldDesc {
    /// Base the offset counts from.
    pub base: PayloadBase,
    /// Offset in bits from the base.
    pub offset_bits: u16,
    /// Length in bits.
    pub len_bits: u16,
    /// Data type of the field's value.
    pub dtype: DataType,
    /// Implicit dependencies nft adds, outermost first (`icmp type`: IPv4, then `meta
    /// l4proto 1`).
    pub deps: &'static [Dependency],
}

/// `meta` keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MetaKey {
    /// `meta iifname`
    Iifname,
    /// `meta oifname`
    Oifname,
    /// `meta l4proto`
    L4proto,
    /// `meta nfproto`
    Nfproto,
    /// `meta protocol`
    Protocol,
    /// `meta len`
    Len,
    /// `meta mark`
    Mark,
    /// `meta nftrace`
    Nftrace,
    /// `meta priority` (skb->priority, a tc handle `major:minor`)
    Priority,
    /// `iif` (the input device, compared by name in wasp; see [`crate::meta_keys`])
    Iif,
    /// `oif` (the output device)
    Oif,
    /// `meta iiftype` (the input device's ARPHRD type)
    Iiftype,
    /// `meta oiftype`
    Oiftype,
    /// `iifgroup` (the input device's group)
    Iifgroup,
    /// `oifgroup`
    Oifgroup,
    /// `meta skuid` (the local socket's user: never matches in wasp)
    Skuid,
    /// `meta skgid`
    Skgid,
    /// `meta cgroup` (the local socket's cgroup: never matches in wasp)
    Cgroup,
    /// `meta cpu` (the CPU processing the packet: the worker's number in wasp)
    Cpu,
    /// `meta pkttype` (host, broadcast, multicast, other)
    Pkttype,
    /// `meta random` (a 32-bit pseudo-random number per packet)
    Random,
    /// `meta time` (ns since the Unix epoch)
    Time,
    /// `meta day` (day of the week, Sunday 0)
    Day,
    /// `meta hour` (seconds since midnight)
    Hour,
    /// `meta rtclassid` (the route's realm: never matches in wasp, which has no realms)
    Rtclassid,
    /// `meta ipsec` (also read as `meta secpath`): the packet went through an IPsec
    /// transformation (`secpath_exists`); wasp has no xfrm, so it is always `missing`
    Secpath,
    /// `meta sdif`: the VRF slave device the packet came in on; wasp has no VRFs, so it reads
    /// no device (the kernel's `inet_sdif` 0 outside a VRF)
    Sdif,
    /// `meta sdifname`: that device's name (`""` in wasp)
    Sdifname,
}

/// `ct` keys (the kernel's NFT_CT_*).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CtKey {
    /// `ct state` (`ct_state`). A packet without a connection reads `invalid`.
    State,
    /// `ct direction` (`ct_dir`).
    Direction,
    /// `ct status` (`ct_status`).
    Status,
    /// `ct mark` (`mark`).
    Mark,
    /// `ct expiration`: the time left before the entry times out (`time`, ms, 32 bits).
    Expiration,
    /// `ct helper`: the helper's name (wasp has no helpers: never matches).
    Helper,
    /// `ct l3proto` (`nf_proto`).
    L3proto,
    /// `ct protocol` (`inet_proto`; also written `ct original protocol`).
    Protocol,
    /// `ct id` (32 bits).
    Id,
    /// `ct [original|reply] zone` (16 bits).
    Zone(Option<CtDirection>),
    /// `ct [original|reply] bytes` (64 bits; both directions without one).
    Bytes(Option<CtDirection>),
    /// `ct [original|reply] packets`.
    Packets(Option<CtDirection>),
    /// `ct [original|reply] avgpkt`: bytes / packets.
    Avgpkt(Option<CtDirection>),
    /// `ct original|reply ip|ip6 saddr`.
    Saddr(CtDirection, Family),
    /// `ct original|reply ip|ip6 daddr`.
    Daddr(CtDirection, Family),
    /// `ct original|reply proto-src` (`inet_service`).
    ProtoSrc(CtDirection),
    /// `ct original|reply proto-dst`.
    ProtoDst(CtDirection),
    /// `ct label` (`ct_label`, 128 bits): the connection's labels.
    Label,
    /// `ct event` (`ct_event`): the events the connection reports; set only (`ct event set`).
    Event,
}

/// The direction a directional `ct` key reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CtDirection {
    /// `original`.
    Original,
    /// `reply`.
    Reply,
}

impl CtDirection {
    /// `original` or `reply`.
    pub fn name(self) -> &'static str {
        match self {
            CtDirection::Original => "original",
            CtDirection::Reply => "reply",
        }
    }
}

impl CtKey {
    /// The key's word (`state`, `saddr`, `proto-src`).
    pub fn word(self) -> &'static str {
        match self {
            CtKey::State => "state",
            CtKey::Direction => "direction",
            CtKey::Status => "status",
            CtKey::Mark => "mark",
            CtKey::Expiration => "expiration",
            CtKey::Helper => "helper",
            CtKey::L3proto => "l3proto",
            CtKey::Protocol => "protocol",
            CtKey::Id => "id",
            CtKey::Zone(_) => "zone",
            CtKey::Bytes(_) => "bytes",
            CtKey::Packets(_) => "packets",
            CtKey::Avgpkt(_) => "avgpkt",
            CtKey::Saddr(..) => "saddr",
            CtKey::Daddr(..) => "daddr",
            CtKey::ProtoSrc(_) => "proto-src",
            CtKey::ProtoDst(_) => "proto-dst",
            CtKey::Label => "label",
            CtKey::Event => "event",
        }
    }

    /// The direction the key reads, if it names one.
    pub fn dir(self) -> Option<CtDirection> {
        match self {
            CtKey::Zone(d) | CtKey::Bytes(d) | CtKey::Packets(d) | CtKey::Avgpkt(d) => d,
            CtKey::Saddr(d, _) | CtKey::Daddr(d, _) | CtKey::ProtoSrc(d) | CtKey::ProtoDst(d) => {
                Some(d)
            }
            _ => None,
        }
    }

    /// The key as nft lists it after `ct`: `state`, `original ip saddr`, `reply zone`.
    pub fn name(self) -> String {
        let fam = match self {
            CtKey::Saddr(_, f) | CtKey::Daddr(_, f) => Some(f.name()),
            _ => None,
        };
        match (self.dir(), fam) {
            (Some(d), Some(f)) => format!("{} {f} {}", d.name(), self.word()),
            (Some(d), None) => format!("{} {}", d.name(), self.word()),
            _ => self.word().to_string(),
        }
    }

    /// Data type of the key's value.
    pub fn dtype(self) -> DataType {
        match self {
            CtKey::State => DataType::CtState,
            CtKey::Direction => DataType::CtDir,
            CtKey::Status => DataType::CtStatus,
            CtKey::Mark => DataType::Mark,
            CtKey::Expiration => DataType::TimeRel(32),
            CtKey::Helper => DataType::Ifname,
            CtKey::L3proto => DataType::NfProto,
            CtKey::Protocol => DataType::InetProto,
            CtKey::Id => DataType::Integer(32),
            CtKey::Zone(_) => DataType::Integer(16),
            CtKey::Bytes(_) | CtKey::Packets(_) | CtKey::Avgpkt(_) => DataType::Integer(64),
            CtKey::Saddr(_, Family::Ip6) | CtKey::Daddr(_, Family::Ip6) => DataType::Ipv6Addr,
            CtKey::Saddr(..) | CtKey::Daddr(..) => DataType::Ipv4Addr,
            CtKey::ProtoSrc(_) | CtKey::ProtoDst(_) => DataType::InetService,
            CtKey::Label => DataType::CtLabel,
            CtKey::Event => DataType::CtEvent,
        }
    }
}

/// IPv6 extension headers for `exthdr NAME exists`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ip6ExtHdr {
    /// `hbh` (0)
    HopByHop,
    /// `rt` (43)
    Routing,
    /// `frag` (44)
    Fragment,
    /// `dst` (60)
    DestOpts,
    /// `mh` (135)
    Mobility,
}

/// Verdicts.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// `accept`
    Accept,
    /// `drop`
    Drop,
    /// `continue`
    Continue,
    /// `return`
    Return,
    /// `jump CHAIN`
    Jump(String),
    /// `goto CHAIN`
    Goto(String),
}

/// A named set or map declared in a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetDecl {
    /// Name.
    pub name: String,
    /// Kernel-style handle, from the table's handle counter.
    pub handle: u64,
    /// `true` for `map`, `false` for `set`.
    pub is_map: bool,
    /// Key type: one entry per concatenated field.
    pub key: Vec<DataType>,
    /// `typeof EXPR . EXPR` when the declaration used `typeof` (kept for printing).
    pub key_typeof: Option<Vec<Expr>>,
    /// `typeof ... : EXPR` of a map declared with `typeof` (kept for printing).
    pub data_typeof: Option<Expr>,
    /// Map data type (`type K : V`), the first field of concatenated data; `None` for a set.
    pub data: Option<DataType>,
    /// The further fields of concatenated map data (`type K : ipv4_addr . inet_service` has
    /// `data` `ipv4_addr` and `data_tail` `[inet_service]`); empty for data of one field. The
    /// elements of such a map hold [`ElemData::Nat`], one singleton part per field.
    pub data_tail: Vec<DataType>,
    /// Flags.
    pub flags: SetFlags,
    /// `timeout` in ms.
    pub timeout_ms: Option<u64>,
    /// `gc-interval` in ms.
    pub gc_interval_ms: Option<u64>,
    /// `size`.
    pub size: Option<u32>,
    /// `counter` (each element gets a counter).
    pub counter: bool,
    /// Elements as declared (after the transaction's add/delete/flush were applied): listed
    /// here, or held by the running program's compiled set ([`Elements`]).
    pub elements: Elements,
    /// `comment "..."`.
    pub comment: Option<String>,
    /// Where the set was declared.
    pub span: Span,
}

impl SetDecl {
    /// Whether nft merges the elements added to this set (`auto-merge` on a set of one
    /// interval field; nft accepts the flag on a concatenation and merges nothing there).
    pub fn merges_elements(&self) -> bool {
        self.flags.auto_merge && self.flags.interval && self.key.len() == 1 && !self.is_map
    }

    /// The map's data type as nft lists it after `type K : ` (`ipv4_addr . inet_service` for
    /// concatenated data); `None` for a set.
    pub fn data_type_text(&self) -> Option<String> {
        let first = self.data?;
        let mut names = vec![first.name()];
        names.extend(self.data_tail.iter().map(|d| d.name()));
        Some(names.join(" . "))
    }

    /// The declaration without its elements (what parsing an element of it needs; a copy that
    /// does not copy a large set).
    pub fn without_elements(&self) -> SetDecl {
        SetDecl {
            name: self.name.clone(),
            handle: self.handle,
            is_map: self.is_map,
            key: self.key.clone(),
            key_typeof: self.key_typeof.clone(),
            data_typeof: self.data_typeof.clone(),
            data: self.data,
            data_tail: self.data_tail.clone(),
            flags: self.flags,
            timeout_ms: self.timeout_ms,
            gc_interval_ms: self.gc_interval_ms,
            size: self.size,
            counter: self.counter,
            elements: Elements::default(),
            comment: self.comment.clone(),
            span: self.span,
        }
    }
}

impl DataType {
    /// The data type a set declaration's `type NAME` names (`ipv4_addr`, `time`).
    pub fn from_name(name: &str) -> Option<DataType> {
        use DataType as T;
        const NAMED: &[DataType] = &[
            T::Ipv4Addr,
            T::Ipv6Addr,
            T::EtherAddr,
            T::EtherType,
            T::InetProto,
            T::InetService,
            T::Mark,
            T::Ifname,
            T::TcpFlag,
            T::IcmpType,
            T::IcmpCode,
            T::Icmpv6Type,
            T::Icmpv6Code,
            T::Dscp,
            T::NfProto,
            T::Boolean,
            T::Verdict,
            T::CtState,
            T::CtDir,
            T::CtStatus,
            T::Ecn,
            T::DccpPkttype,
            T::IgmpType,
            T::MhType,
            T::ArpOp,
            T::IfaceIndex,
            T::IfaceType,
            T::Devgroup,
            T::TcHandle,
            T::Uid,
            T::Gid,
            T::PktType,
            T::FibAddrType,
            T::Day,
            T::Hour,
            T::Realm,
            T::TimeRel(64),
        ];
        NAMED.iter().copied().find(|t| t.name() == name)
    }
}

/// Set flags.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct SetFlags {
    /// `interval`
    pub interval: bool,
    /// `timeout`
    pub timeout: bool,
    /// `constant`
    pub constant: bool,
    /// `dynamic`
    pub dynamic: bool,
    /// `auto-merge` (single-field interval sets only): nft merges the elements it adds with
    /// the overlapping and adjacent ones of the set into one range each (nft's userspace; the
    /// kernel holds only the merged elements).
    pub auto_merge: bool,
}

/// One element of a set or map. What few elements carry (a timeout, an expiry, counts, a
/// comment) is kept apart ([`ElemExtra`]), so that the element of a large set of plain keys is
/// its key, its span and a few bytes.
#[derive(Debug, Clone)]
pub struct SetElem {
    /// Key, one part per concatenated field; empty for the catch-all element `*` (the kernel's
    /// NFT_SET_ELEM_CATCHALL: it holds every key no other element holds, see
    /// [`SetElem::is_catch_all`]).
    pub key: ElemKey,
    /// Map data: a value or a verdict.
    pub data: Option<ElemData>,
    /// `counter` on this element.
    pub counter: bool,
    /// Where the element is written.
    pub span: Span,
    /// Its timeout, expiry, counts and comment; `None` when it has none of them.
    pub extra: Option<Box<ElemExtra>>,
}

/// What few set elements carry ([`SetElem::extra`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ElemExtra {
    /// `timeout` in ms.
    pub timeout_ms: Option<u64>,
    /// `expires` in ms.
    pub expires_ms: Option<u64>,
    /// Packets its counter has counted (`counter packets N bytes M`; 0 without a counter).
    pub packets: u64,
    /// Bytes its counter has counted.
    pub bytes: u64,
    /// `comment "..."`.
    pub comment: Option<String>,
    /// Where its `counter` keyword is (for errors; `None` without one).
    pub counter_span: Option<Span>,
}

/// Elements are equal when every part is, an absent [`ElemExtra`] being the default one.
impl PartialEq for SetElem {
    fn eq(&self, other: &SetElem) -> bool {
        let none = ElemExtra::default();
        self.key == other.key
            && self.data == other.data
            && self.counter == other.counter
            && self.span == other.span
            && self.extra.as_deref().unwrap_or(&none) == other.extra.as_deref().unwrap_or(&none)
    }
}

impl Eq for SetElem {}

impl SetElem {
    /// An element with key `key` written at `span`, and nothing else (no data, timeout,
    /// counter or comment).
    pub fn new(key: impl Into<ElemKey>, span: Span) -> SetElem {
        SetElem {
            key: key.into(),
            data: None,
            counter: false,
            span,
            extra: None,
        }
    }

    /// `timeout` in ms.
    pub fn timeout_ms(&self) -> Option<u64> {
        self.extra.as_ref().and_then(|x| x.timeout_ms)
    }

    /// `expires` in ms.
    pub fn expires_ms(&self) -> Option<u64> {
        self.extra.as_ref().and_then(|x| x.expires_ms)
    }

    /// Packets its counter has counted.
    pub fn packets(&self) -> u64 {
        self.extra.as_ref().map_or(0, |x| x.packets)
    }

    /// Bytes its counter has counted.
    pub fn bytes(&self) -> u64 {
        self.extra.as_ref().map_or(0, |x| x.bytes)
    }

    /// `comment "..."`.
    pub fn comment(&self) -> Option<&str> {
        self.extra.as_ref().and_then(|x| x.comment.as_deref())
    }

    /// Where its `counter` keyword is.
    pub fn counter_span(&self) -> Option<Span> {
        self.extra.as_ref().and_then(|x| x.counter_span)
    }

    /// Its [`ElemExtra`] to change, made when it has none.
    pub fn extra_mut(&mut self) -> &mut ElemExtra {
        self.extra.get_or_insert_with(Default::default)
    }

    /// Set its counts (`counter packets N bytes M`; an element without counts keeps no
    /// [`ElemExtra`] for them).
    pub fn set_counts(&mut self, packets: u64, bytes: u64) {
        if packets != 0 || bytes != 0 || self.extra.is_some() {
            let x = self.extra_mut();
            x.packets = packets;
            x.bytes = bytes;
        }
    }

    /// The catch-all element `*` written at `span` (no data yet): in a set or map it holds
    /// every key that no other element holds (the kernel's `nft_set_catchall_lookup`, tried
    /// when the back-end's lookup misses), and nft lists it after the other elements.
    pub fn catch_all(span: Span) -> SetElem {
        SetElem::new(Vec::new(), span)
    }

    /// `true` for the catch-all element `*` (an empty key).
    pub fn is_catch_all(&self) -> bool {
        self.key.is_empty()
    }
}

/// Data of a map element.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ElemData {
    /// A value (for `type K : V` maps).
    Value(Value),
    /// A verdict (verdict maps).
    Verdict(Verdict),
    /// The name of a stateful object of the table (the data of `counter name KEY map { k :
    /// "NAME" }` and its `quota` and `limit` twins).
    Object(String),
    /// The data of a NAT map (`dnat to ip saddr map { 10.0.0.1 : 192.168.1.0/24 . 80-90 }`):
    /// the address (a value, range or prefix) and, when written, the port (a value or range);
    /// also the data of a named map of concatenated data (`type K : ipv4_addr .
    /// inet_service`), one singleton per field.
    Nat(Vec<KeyPart>),
}

impl DataType {
    /// Width of a value of this type in bits (e.g. 32 for `ipv4_addr`, 16 for `inet_service`,
    /// 128 for `ifname`), as nft's datatype table (`nft describe`) gives it.
    pub fn width_bits(self) -> u16 {
        match self {
            DataType::Integer(bits) | DataType::Hex(bits) | DataType::TimeRel(bits) => {
                u16::from(bits.max(1))
            }
            DataType::Ecn => 2,
            DataType::DccpPkttype => 4,
            DataType::IgmpType | DataType::MhType => 8,
            DataType::ArpOp | DataType::IfaceType => 16,
            DataType::IfaceIndex => 128,
            DataType::Devgroup
            | DataType::TcHandle
            | DataType::Uid
            | DataType::Gid
            | DataType::Hour
            | DataType::Realm
            | DataType::FibAddrType => 32,
            DataType::PktType | DataType::Day => 8,
            DataType::Time => 64,
            DataType::Ipv4Addr | DataType::Mark => 32,
            DataType::Ipv6Addr | DataType::Ifname => 128,
            DataType::EtherAddr => 48,
            DataType::EtherType | DataType::InetService => 16,
            DataType::InetProto
            | DataType::TcpFlag
            | DataType::IcmpType
            | DataType::IcmpCode
            | DataType::Icmpv6Type
            | DataType::Icmpv6Code
            | DataType::NfProto => 8,
            DataType::Dscp => 6,
            DataType::Boolean => 1,
            DataType::Verdict | DataType::CtState | DataType::CtStatus | DataType::CtEvent => 32,
            DataType::CtLabel => 128,
            DataType::CtDir => 8,
        }
    }

    /// Width of a [`Value`] of this type in bytes: `width_bits` rounded up.
    pub fn width_bytes(self) -> usize {
        usize::from(self.width_bits().div_ceil(8))
    }

    /// nft's name of the type (`nft describe`), as used in `type ipv4_addr . inet_service`.
    pub fn name(self) -> &'static str {
        match self {
            DataType::Integer(_) | DataType::Hex(_) => "integer",
            DataType::Ecn => "ecn",
            DataType::DccpPkttype => "dccp_pkttype",
            DataType::IgmpType => "igmp_type",
            DataType::MhType => "mh_type",
            DataType::ArpOp => "arp_op",
            DataType::IfaceIndex => "iface_index",
            DataType::IfaceType => "iface_type",
            DataType::Devgroup => "devgroup",
            DataType::TcHandle => "tc_handle",
            DataType::Uid => "uid",
            DataType::Gid => "gid",
            DataType::PktType => "pkt_type",
            DataType::FibAddrType => "fib_addrtype",
            DataType::Day => "day",
            DataType::Hour => "hour",
            DataType::Time => "date",
            DataType::TimeRel(_) => "time",
            DataType::Realm => "realm",
            DataType::Ipv4Addr => "ipv4_addr",
            DataType::Ipv6Addr => "ipv6_addr",
            DataType::EtherAddr => "ether_addr",
            DataType::EtherType => "ether_type",
            DataType::InetProto => "inet_proto",
            DataType::InetService => "inet_service",
            DataType::Mark => "mark",
            DataType::Ifname => "ifname",
            DataType::TcpFlag => "tcp_flag",
            DataType::IcmpType => "icmp_type",
            DataType::IcmpCode => "icmp_code",
            DataType::Icmpv6Type => "icmpv6_type",
            DataType::Icmpv6Code => "icmpv6_code",
            DataType::Dscp => "dscp",
            DataType::NfProto => "nf_proto",
            DataType::Boolean => "boolean",
            DataType::Verdict => "verdict",
            DataType::CtState => "ct_state",
            DataType::CtDir => "ct_dir",
            DataType::CtStatus => "ct_status",
            DataType::CtEvent => "ct_event",
            DataType::CtLabel => "ct_label",
        }
    }

    /// `true` for types nft keeps in host byte order (`mark`, `ifname`, meta integers): the
    /// model still stores them big-endian. (The printer sorts single `mark` values by number,
    /// as `nft list ruleset` does, and concatenations holding one as a little-endian key.)
    pub fn host_order(self) -> bool {
        matches!(
            self,
            DataType::Mark
                | DataType::Ifname
                | DataType::IfaceIndex
                | DataType::Devgroup
                | DataType::TcHandle
                | DataType::Uid
                | DataType::Gid
                | DataType::Hour
                | DataType::Time
                | DataType::Realm
                | DataType::IfaceType
                | DataType::FibAddrType
        )
    }
}

impl MetaKey {
    /// Data type of the key's value, as nft's meta template table (see
    /// [`crate::meta_keys::META_KEYS`]).
    pub fn dtype(self) -> DataType {
        crate::meta_keys::row(self).dtype
    }
}

impl Ip6ExtHdr {
    /// The IPv6 next-header number of the extension header (0, 43, 44, 60, 135), which the
    /// kernel's `ipv6_find_hdr` looks for (`exthdr load ipv6 1b @ 43 + 0 present`).
    pub fn nexthdr(self) -> u8 {
        match self {
            Ip6ExtHdr::HopByHop => 0,
            Ip6ExtHdr::Routing => 43,
            Ip6ExtHdr::Fragment => 44,
            Ip6ExtHdr::DestOpts => 60,
            Ip6ExtHdr::Mobility => 135,
        }
    }
}

impl Expr {
    /// Data type of the value the expression produces (the type its right-hand side is
    /// parsed as). A concatenation has no single type: see [`Expr::key_types`].
    pub fn dtype(&self) -> DataType {
        match self {
            Expr::Payload(p) => p.desc().dtype,
            Expr::Meta(k) => k.dtype(),
            Expr::Ct(k) => k.dtype(),
            Expr::ExthdrExists(_) => DataType::Boolean,
            Expr::Opt(o) => o.position().2,
            Expr::Ipsec(k) => match k.key {
                IpsecField::Reqid | IpsecField::Spi => DataType::Integer(32),
                IpsecField::Saddr(Family::Ip6) | IpsecField::Daddr(Family::Ip6) => {
                    DataType::Ipv6Addr
                }
                _ => DataType::Ipv4Addr,
            },
            Expr::Socket(SocketKey::Mark) => DataType::Mark,
            Expr::Socket(_) => DataType::Integer(1),
            Expr::Osf { .. } => DataType::Ifname,
            Expr::Fib(f) => f.dtype(),
            Expr::Rt(k) => k.dtype(),
            Expr::Raw { len_bits, .. } => DataType::Hex((*len_bits).clamp(1, 128) as u8),
            Expr::Concat(parts) => parts.first().map_or(DataType::Integer(8), Expr::dtype),
            Expr::Binop { expr, .. } => expr.dtype(),
            Expr::Const(v) => v.dtype,
            Expr::Map { data, .. } => *data,
            Expr::Numgen { .. } | Expr::Jhash { .. } | Expr::Symhash { .. } => {
                DataType::Integer(32)
            }
        }
    }

    /// The key types: one per concatenated field (one for a plain expression).
    pub fn key_types(&self) -> Vec<DataType> {
        match self {
            Expr::Concat(parts) => parts.iter().map(Expr::dtype).collect(),
            other => vec![other.dtype()],
        }
    }
}

impl Rule {
    /// The elements of the anonymous sets and maps written in the rule (`ip saddr { a, b }`,
    /// `vmap { k : v }`, `meta mark set KEY map { k : v }`, `ct mark set KEY map { k : v }`),
    /// in statement order: the order in
    /// which the kernel creates them (each takes a handle before the rule's own) and in which
    /// the compiler meets them, so the `nth` anonymous set of a rule names the same one on
    /// both sides.
    pub fn anonymous_sets_mut(&mut self) -> impl Iterator<Item = &mut Vec<SetElem>> {
        self.stmts.iter_mut().filter_map(|s| match s {
            Stmt::Match(Match {
                right: Rhs::Set(SetRef::Anonymous(elems)),
                ..
            })
            | Stmt::VerdictMap {
                map: SetRef::Anonymous(elems),
                ..
            }
            | Stmt::ObjectMap {
                map: SetRef::Anonymous(elems),
                ..
            } => Some(elems),
            Stmt::MetaSet { value, .. } | Stmt::CtSet { value, .. } => value.anonymous_map_mut(),
            Stmt::Nat(NatStmt {
                target: Some(value),
                ..
            }) => value.anonymous_map_mut(),
            _ => None,
        })
    }
}

impl Expr {
    /// The first `Some` that `f` gives for this expression or one inside it (the fields of
    /// a concatenation, the operand of a bitwise operation, a map's or a hash's key).
    pub fn find_map<T>(&self, f: &dyn Fn(&Expr) -> Option<T>) -> Option<T> {
        f(self).or_else(|| match self {
            Expr::Concat(parts) => parts.iter().find_map(|p| p.find_map(f)),
            Expr::Binop { expr, .. } | Expr::Jhash { expr, .. } => expr.find_map(f),
            Expr::Map { key, .. } => key.find_map(f),
            _ => None,
        })
    }
}

impl Stmt {
    /// The expressions a statement reads from the packet (a match's left side, a map's key,
    /// the value a statement sets, a set statement's key, a NAT target).
    pub fn exprs(&self) -> Vec<&Expr> {
        match self {
            Stmt::Match(m) => vec![&m.left],
            Stmt::VerdictMap { key, .. } | Stmt::ObjectMap { key, .. } => vec![key],
            Stmt::MetaSet { value, .. } | Stmt::CtSet { value, .. } => vec![value],
            Stmt::PayloadSet { target, value, .. } => vec![target, value],
            Stmt::SetUpdate(u) => vec![&u.key],
            Stmt::Nat(NatStmt {
                target: Some(t), ..
            }) => vec![t],
            _ => Vec::new(),
        }
    }
}

impl Expr {
    /// The elements of the anonymous map a statement's value expression looks up (`KEY map {
    /// k : v }`; nft's grammar has a map only at the top of a value).
    pub fn anonymous_map_mut(&mut self) -> Option<&mut Vec<SetElem>> {
        match self {
            Expr::Map {
                map: SetRef::Anonymous(elems),
                ..
            } => Some(elems),
            _ => None,
        }
    }
}

#[cfg(test)]
mod source_tests {
    use super::SourceFile;

    #[test]
    fn line_gives_what_str_lines_gives() {
        for text in [
            "",
            "a",
            "a\n",
            "a\nb",
            "a\r\nb\r\n",
            "\n\nx\n",
            "table t {\n\tchain c {\n\t}\n}\n",
            "one\r\ntwo\nthree",
            "é\nß\n",
        ] {
            let f = SourceFile::new(0, "t.nft".into(), text.to_string(), None);
            for n in 0..6u32 {
                let want = n.checked_sub(1).and_then(|i| text.lines().nth(i as usize));
                assert_eq!(f.line(n).as_deref(), want, "{text:?} line {n}");
            }
        }
    }

    #[test]
    fn a_packed_text_reads_back_as_it_was_and_small_texts_stay_as_read() {
        let text: String = (0..20_000)
            .map(|i| {
                format!(
                    "\t\t10.{}.{}.0/24 . {}-{},\r\n",
                    i >> 8,
                    i & 0xff,
                    i % 50,
                    100 + i % 50
                )
            })
            .collect();
        assert!(text.len() >= super::PACK_MIN);
        let plain = SourceFile::new(3, "big.nft".into(), text.clone(), None);
        let mut packed = plain.clone();
        packed.pack();
        assert_ne!(packed, plain);
        assert_eq!(packed.text(), text);
        for n in [0, 1, 2, 7_777, 20_000, 20_001] {
            assert_eq!(packed.line(n), plain.line(n), "line {n}");
        }
        let mut small = SourceFile::new(4, "s.nft".into(), "table ip t {}\n".into(), None);
        small.pack();
        assert_eq!(
            small,
            SourceFile::new(4, "s.nft".into(), "table ip t {}\n".into(), None)
        );
    }
}
