//! The nftables ruleset language as wasp reads and prints it.
//!
//! - [`model`]: the typed objects (tables, chains, rules, sets, expressions, statements).
//! - [`parse_file`] / [`parse_str`] / [`parse_bytes`]: nft syntax (with `define`, `include`, comments) into the model,
//!   with kernel-style handles assigned.
//! - [`print_ruleset`]: the model back in the form `nft list ruleset` prints.
//! - [`Error`]: every error names file:line:col, shows the line and says what was expected.
#![forbid(unsafe_code)]

pub mod datatypes;
pub mod error;
pub mod lexer;
pub mod model;
mod parser;
mod print;
mod services;

pub use error::Error;
pub use model::Ruleset;

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
