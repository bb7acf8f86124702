//! The nftables ruleset language as wasp reads and prints it.
//!
//! - [`model`]: the typed objects (tables, chains, rules, sets, expressions, statements).
//! - [`parse_file`] / [`parse_str`] / [`parse_bytes`]: nft syntax (with `define`, `include`, comments) into the model,
//!   with kernel-style handles assigned.
//! - [`print_ruleset`]: the model back in the form `nft list ruleset` prints.
//! - [`json_in`]: rulesets and batches in libnftables' JSON schema (`nft -j -f`), translated
//!   into nft commands and parsed as text.
//! - [`Error`]: every error names file:line:col, shows the line and says what was expected
//!   (a JSON ruleset's: the path of the JSON value).
#![forbid(unsafe_code)]

pub mod datatypes;
mod elements;
pub mod error;
pub mod json_in;
pub mod keywords;
pub mod lexer;
pub mod meta_keys;
pub mod model;
pub mod options;
mod parser;
mod print;
pub mod proto;
mod services;
pub mod system_names;

pub use error::Error;
pub use model::Ruleset;
pub use parser::batch::ElementTxn;
pub use parser::setcheck::{Bounds, ElementOp, SetBackend, SetOracle, SetShadows};
pub use print::options::PrintOptions;

use std::path::Path;

/// Parse the ruleset file at `path` (and every file it includes; relative include paths are
/// resolved against the including file's folder).
///
/// # Errors
/// [`Error`] with file:line:col for a syntax or meaning error, or an I/O error reading a file.
///
/// The file is UTF-8 text; bytes that are not UTF-8 are accepted in comments only (elsewhere
/// they are an error at their line and column).
pub fn parse_file(path: &Path) -> Result<Ruleset, Error> {
    let bytes = std::fs::read(path).map_err(|e| Error::Io {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    parser::parse(&bytes, path)
}

/// Parse the bytes of a ruleset file; `name` is the file name used in errors, includes
/// resolve against the current directory.
///
/// # Errors
/// As [`parse_file`] (a byte that is not UTF-8 outside a comment is an error at its place).
pub fn parse_bytes(bytes: &[u8], name: &str) -> Result<Ruleset, Error> {
    parser::parse(bytes, Path::new(name))
}

/// Parse ruleset text; `name` is the file name used in errors, includes resolve against the
/// current directory.
///
/// # Errors
/// As [`parse_file`].
pub fn parse_str(text: &str, name: &str) -> Result<Ruleset, Error> {
    parser::parse(text.as_bytes(), Path::new(name))
}

/// Print `ruleset` as `nft list ruleset` prints it (with `handles`, as `nft -a list ruleset`).
pub fn print_ruleset(ruleset: &Ruleset, handles: bool) -> String {
    print::ruleset(ruleset, handles)
}

/// The key of a set element as `nft list` prints it (e.g. `10.0.0.0/8 . 22-80`), without its
/// counter, timeout or data.
pub fn element_key_text(e: &model::SetElem) -> String {
    print::key_text(&e.key)
}

/// Apply the commands of a batch file (`add`/`create`/`insert`/`delete`/`flush` commands and
/// `table` blocks, as `nft -f` reads them; `flush ruleset` first makes it a whole ruleset) to
/// a copy of the running ruleset `base`, as one transaction: the new ruleset, or the first
/// error with file:line:col (`name` is the file name used in errors) and `base` untouched.
///
/// New objects get handles after the highest handle each table holds (the kernel counts on
/// from handles of objects deleted since; the model does not remember those). The batch's
/// text is appended to [`Ruleset::sources`].
///
/// # Errors
/// As [`parse_str`], and the kernel's refusals (an unknown table, chain or set, a rule
/// handle that does not exist, an element that exists for `create`, ...).
pub fn apply_batch(base: &Ruleset, text: &str, name: &str) -> Result<Ruleset, Error> {
    parser::batch::apply(
        base,
        text.as_bytes(),
        Path::new(name),
        &mut SetShadows::default(),
    )
}

/// [`apply_batch`], checking elements against the sets' kernel back-ends kept in `shadows`
/// from the batches before (built from the model when missing), and leaving there the new
/// ruleset's. On an error `shadows` is emptied.
///
/// # Errors
/// As [`apply_batch`].
pub fn apply_batch_with(
    base: &Ruleset,
    text: &str,
    name: &str,
    shadows: &mut SetShadows,
) -> Result<Ruleset, Error> {
    parser::batch::apply(base, text.as_bytes(), Path::new(name), shadows)
}

/// [`apply_batch_with`], and the (table handle, rule handle) of each rule that an `insert
/// rule` placed, in order: what nft's echo and monitor call `insert rule` rather than `add
/// rule` (the model does not keep how a rule came).
///
/// # Errors
/// As [`apply_batch`].
pub fn apply_batch_noting_inserts(
    base: &Ruleset,
    text: &str,
    name: &str,
    shadows: &mut SetShadows,
) -> Result<(Ruleset, Vec<(u64, u64)>), Error> {
    parser::batch::apply_noting(base, text.as_bytes(), Path::new(name), shadows)
}

/// Apply a batch of element commands (`add`/`create`/`delete`/`destroy element`, `flush
/// set`, with `define` and `include`) to `ruleset` in place, checking them as [`apply_batch`]
/// does against the sets' kernel back-ends kept in `shadows`. Nothing is copied but the
/// elements that change: a one-element command on a set of a million elements costs about
/// as much as on a set of ten (plus a scan for the element a `delete` removes, and for the
/// elements an add to an `auto-merge` set meets).
///
/// Returns `Ok(None)`, with `ruleset` as it was, when the batch holds any other command (the
/// caller then uses [`apply_batch_with`]); else the applied batch, to keep
/// ([`ElementTxn::commit`]) or take back ([`ElementTxn::rollback`]).
///
/// # Errors
/// As [`apply_batch`]; `ruleset` is then as it was.
pub fn apply_elements<'r>(
    ruleset: &'r mut Ruleset,
    shadows: &'r mut SetShadows,
    text: &str,
    name: &str,
) -> Result<Option<ElementTxn<'r>>, Error> {
    parser::batch::apply_elements(ruleset, shadows, None, text.as_bytes(), Path::new(name))
}

/// [`apply_elements`], checking the elements of the sets that `oracle` (the running program
/// compiled from `ruleset`) holds against it instead of a view of their own: no second copy
/// of a large set's elements is built or kept for the checks. Sets it does not hold are
/// checked against views in `shadows`, as [`apply_elements`] does.
///
/// # Errors
/// As [`apply_elements`].
pub fn apply_elements_against<'r>(
    ruleset: &'r mut Ruleset,
    shadows: &'r mut SetShadows,
    oracle: Box<dyn SetOracle>,
    text: &str,
    name: &str,
) -> Result<Option<ElementTxn<'r>>, Error> {
    parser::batch::apply_elements(
        ruleset,
        shadows,
        Some(oracle),
        text.as_bytes(),
        Path::new(name),
    )
}

/// Print `ruleset` with nft's output flags (`-a`, `-s`, `-t`), as `nft list ruleset` does.
pub fn print_ruleset_with(ruleset: &Ruleset, opts: &PrintOptions) -> String {
    let mut out = String::new();
    for t in &ruleset.tables {
        print::options::table(&mut out, t, opts);
    }
    out
}

/// One table as `nft list table` prints it (`table FAMILY NAME { ... }` and a newline).
pub fn print_table(table: &model::Table, opts: &PrintOptions) -> String {
    let mut out = String::new();
    print::options::table(&mut out, table, opts);
    out
}

/// A named set or map as it appears inside its table (one tab in, ending with `\t}\n`).
pub fn print_set(set: &model::SetDecl, opts: &PrintOptions) -> String {
    let mut out = String::new();
    print::options::set(&mut out, set, opts);
    out
}

/// A flowtable as it appears inside its table (one tab in, ending with `\t}\n`), as
/// `nft list flowtable` prints it inside its table.
pub fn print_flowtable(flowtable: &model::FlowtableDecl, opts: &PrintOptions) -> String {
    let mut out = String::new();
    print::options::flowtable(&mut out, flowtable, opts);
    out
}

/// A counter object as it appears inside its table (one tab in).
pub fn print_counter(counter: &model::CounterObj, opts: &PrintOptions) -> String {
    let mut out = String::new();
    print::options::counter(&mut out, counter, opts);
    out
}

/// A quota object as it appears inside its table (one tab in).
pub fn print_quota(quota: &model::QuotaObj, opts: &PrintOptions) -> String {
    let mut out = String::new();
    print::options::quota(&mut out, quota, opts);
    out
}

/// A limit object as it appears inside its table (one tab in).
pub fn print_limit(limit: &model::LimitObj, opts: &PrintOptions) -> String {
    let mut out = String::new();
    print::options::limit(&mut out, limit, opts);
    out
}

/// A chain as it appears inside its table (one tab in), with its rules when `rules`
/// (`nft list chains` prints chains without rules).
pub fn print_chain(
    family: model::Family,
    chain: &model::Chain,
    opts: &PrintOptions,
    rules: bool,
) -> String {
    let mut out = String::new();
    print::options::chain(&mut out, family, chain, opts, rules);
    out
}

/// One rule as nft lists it, without its handle (`ip saddr 10.0.0.1 counter packets 1 bytes
/// 60 drop`; `counter` alone when `opts.stateless`).
pub fn print_rule(rule: &model::Rule, opts: &PrintOptions) -> String {
    print::options::rule(rule, opts)
}

/// A set element as nft lists it (key, counter, timeout, expiry, comment, data).
pub fn print_element(e: &model::SetElem, opts: &PrintOptions) -> String {
    print::options::element(e, opts)
}

/// Set elements in the order nft lists them (sorted by key as `nft list` sorts them;
/// a concatenation with ranges in insertion order), ranges that are prefixes as prefixes.
/// `interval`: the set has the `interval` flag. Takes a named set's elements
/// (`&set.elements`) or borrowed ones (`slice.iter().map(Cow::Borrowed)`).
pub fn listed_elements<'a>(
    elems: impl IntoIterator<Item = std::borrow::Cow<'a, model::SetElem>>,
    interval: bool,
) -> Vec<model::SetElem> {
    print::sorted_elements(elems, interval)
}

/// A key part in the form nft lists it: a range that covers a prefix (of an address or mark)
/// as the prefix, a one-value range and a full-length prefix as the value.
pub fn listed_part(p: &model::KeyPart) -> model::KeyPart {
    print::normalize_part(p)
}

/// An expression as nft lists it (`ip saddr`, `tcp dport . ip daddr`).
pub fn print_expr(e: &model::Expr) -> String {
    print::expr(e)
}

/// A statement as nft lists it (`ip dscp set cs1`, `counter packets 0 bytes 0`).
pub fn print_stmt(s: &model::Stmt) -> String {
    print::stmt(s)
}
