//! The typed ruleset model: what the parser produces, the printer prints and the evaluator
//! compiles. It follows nftables' own objects (table, chain, rule, set, expression, statement).
//!
//! Values are stored as big-endian byte strings of their field's width (see [`Value`]), typed by
//! the [`DataType`] of the expression they are compared with, exactly as nft types a right-hand
//! side by its left-hand side.

use std::path::PathBuf;

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

/// One source file that contributed to a ruleset (the main file and each `include`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFile {
    /// Path as given (the main file) or as resolved (includes).
    pub path: PathBuf,
    /// Full text, kept so that later errors (compile time) can show the offending line.
    pub text: String,
}

/// A whole ruleset: what `nft list ruleset` shows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ruleset {
    /// Tables in the order they were first declared.
    pub tables: Vec<Table>,
    /// Source files, for error messages. `sources[0]` is the main file.
    pub sources: Vec<SourceFile>,
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
    /// `comment "..."`.
    pub comment: Option<String>,
    /// Where the table was first declared.
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
    /// `log [prefix "..."] [level ...]`.
    Log {
        /// `prefix "..."`.
        prefix: Option<String>,
        /// `level emerg|alert|crit|err|warn|notice|info|debug`.
        level: Option<String>,
    },
    /// `meta KEY set VALUE` (e.g. `meta mark set 0x10`, `meta nftrace set 1`).
    MetaSet {
        /// Which meta key.
        key: MetaKey,
        /// The value expression (a constant, or e.g. `meta mark | 0x1`).
        value: Expr,
        /// Where the statement is.
        span: Span,
    },
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
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyPart {
    /// An exact value.
    Value(Value),
    /// `low-high`, both inclusive.
    Range(Value, Value),
    /// `addr/len`: the value (already masked) and the prefix length in bits.
    Prefix(Value, u8),
}

/// A constant: big-endian bytes of its data type's width (e.g. 4 for `ipv4_addr`, 2 for
/// `inet_service`, 16 for `ifname`, 1 for a 3-bit `vlan pcp`). Sub-byte values are
/// right-aligned: `vlan id 100` is `[0x00, 0x64]`, `ip dscp cs1` is `[0x08]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Value {
    /// Data type that gives the bytes their meaning (and their printed form).
    pub dtype: DataType,
    /// Big-endian bytes, `dtype.width_bytes()` long. For `ifname` a NUL-padded name of 16 bytes.
    pub bytes: Vec<u8>,
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
}

/// Expressions that produce a value from the packet (or combine such values).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expr {
    /// A header field.
    Payload(PayloadField),
    /// `meta KEY` (or a bare key such as `iifname`, `mark`).
    Meta(MetaKey),
    /// `exthdr NAME exists`: presence of an IPv6 extension header.
    ExthdrExists(Ip6ExtHdr),
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
}

/// A header field nftables knows by name. See [`PayloadField::desc`] for where it sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PayloadField {
    /// `ether daddr`
    EtherDaddr,
    /// `ether saddr`
    EtherSaddr,
    /// `ether type`
    EtherType,
    /// `vlan id` of the tag at `depth` (0 = outermost), in the order the rule names vlan headers.
    VlanId {
        /// Tag position, 0 = outermost.
        depth: u8,
    },
    /// `vlan pcp`
    VlanPcp {
        /// Tag position, 0 = outermost.
        depth: u8,
    },
    /// `vlan cfi` / `vlan dei`
    VlanCfi {
        /// Tag position, 0 = outermost.
        depth: u8,
    },
    /// `vlan type`: the EtherType after the tag.
    VlanType {
        /// Tag position, 0 = outermost.
        depth: u8,
    },
    /// `ip saddr`
    IpSaddr,
    /// `ip daddr`
    IpDaddr,
    /// `ip protocol`
    IpProtocol,
    /// `ip ttl`
    IpTtl,
    /// `ip length`
    IpLength,
    /// `ip dscp`
    IpDscp,
    /// `ip version`
    IpVersion,
    /// `ip ihl`
    IpHdrLength,
    /// `ip id`
    IpId,
    /// `ip6 saddr`
    Ip6Saddr,
    /// `ip6 daddr`
    Ip6Daddr,
    /// `ip6 nexthdr`
    Ip6Nexthdr,
    /// `ip6 hoplimit`
    Ip6Hoplimit,
    /// `ip6 length` (payload length)
    Ip6Length,
    /// `ip6 flowlabel`
    Ip6Flowlabel,
    /// `tcp sport`
    TcpSport,
    /// `tcp dport`
    TcpDport,
    /// `tcp flags`
    TcpFlags,
    /// `udp sport`
    UdpSport,
    /// `udp dport`
    UdpDport,
    /// `udp length`
    UdpLength,
    /// `icmp type`
    IcmpType,
    /// `icmp code`
    IcmpCode,
    /// `icmpv6 type`
    Icmpv6Type,
    /// `icmpv6 code`
    Icmpv6Code,
    /// `th sport` (any transport header with ports)
    ThSport,
    /// `th dport`
    ThDport,
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
}

/// The implicit protocol dependency nft adds in front of a payload match
/// (e.g. `meta l4proto tcp` before `tcp dport`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dependency {
    /// None needed (link-layer fields).
    None,
    /// `meta protocol` (netdev) / `meta nfproto` (inet) must be IPv4.
    Ipv4,
    /// Same for IPv6.
    Ipv6,
    /// `meta l4proto` must equal this protocol number.
    L4Proto(u8),
    /// `meta l4proto { tcp, udp, udplite, sctp, dccp }` (for `th`).
    L4Ports,
    /// The EtherType (or the previous vlan's type) must announce a VLAN tag at this depth.
    Vlan(u8),
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
    /// Implicit dependency nft adds.
    pub dependency: Dependency,
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
    /// Map data type (`type K : V`); `None` for a set.
    pub data: Option<DataType>,
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
    /// Elements as declared (after the transaction's add/delete/flush were applied).
    pub elements: Vec<SetElem>,
    /// `comment "..."`.
    pub comment: Option<String>,
    /// Where the set was declared.
    pub span: Span,
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
}

/// One element of a set or map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetElem {
    /// Key, one part per concatenated field.
    pub key: Vec<KeyPart>,
    /// Map data: a value or a verdict.
    pub data: Option<ElemData>,
    /// `timeout` in ms.
    pub timeout_ms: Option<u64>,
    /// `expires` in ms.
    pub expires_ms: Option<u64>,
    /// `counter` on this element.
    pub counter: bool,
    /// `comment "..."`.
    pub comment: Option<String>,
    /// Where the element is written.
    pub span: Span,
}

/// Data of a map element.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ElemData {
    /// A value (for `type K : V` maps).
    Value(Value),
    /// A verdict (verdict maps).
    Verdict(Verdict),
}
