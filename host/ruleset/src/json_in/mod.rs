//! Rulesets and batches in libnftables' JSON schema (`nft -j -f FILE.json`, `man
//! libnftables-json`), read by translating them into nft's text syntax.
//!
//! Contract: [`translate`] turns `{"nftables": [ COMMAND, ... ]}` into one line of nft
//! commands per JSON command (`{"add": {"rule": ...}}` into `add rule ...`, a bare object
//! such as `{"table": ...}` into `add table ...`, `{"metainfo": ...}` into nothing), and the
//! text parser then gives the batch its meaning, with every check it makes. So a JSON batch
//! means exactly what the text it translates into means, and is accepted or refused as that
//! text is. [`Translation::relocate`] turns an error of the text parser (or of a later stage
//! that cites the generated text) back into the JSON command, and the statement of a rule,
//! it came from: `rules.json: nftables[3].add.rule.expr[1]: error: ...`, with the generated
//! command and a caret under the place. A document that is not JSON, or not the schema, is
//! refused with its place (line and column, or the path of the value) before anything is
//! parsed; nothing is applied.
//!
//! Commands: `add`, `create`, `insert`, `replace`, `delete`, `destroy`, `flush` of `table`,
//! `chain`, `rule`, `set`, `map`, `element`, `flowtable`, `counter`, `quota`, `limit`, `ct
//! helper`, `ct timeout`, `ct expectation` (`flush ruleset` too); `list`, `reset` and
//! `rename` are refused (they are no part of a batch in wasp). Objects take the properties of
//! `nft -j list ruleset`'s output (`handle` of an added object is ignored, as nft ignores
//! it), so a listing fed back in is a ruleset.
//!
//! Why text and not the `nftables` crate's types: version 0.6.3 of the crate could not read
//! 125 of the 1675 rules of nftables' own JSON test files (`tests/py/*/*.t.json`: `last`,
//! `reset`, dynamic `map` statements, `meta hour` strings, `sctp chunk ... exists`, flag
//! strings where it wants lists, ...), so the schema is walked here as `serde_json::Value`.

mod expr;
mod objects;
mod stmt;

use std::fmt;
use std::path::PathBuf;

use serde_json::Value as Json;

use crate::error::Error;

/// The JSON schema version nft 1.0.6 writes and reads (`json_schema_version` of
/// `metainfo`); a document that asks for a newer one is refused, as nft refuses it.
pub const JSON_SCHEMA_VERSION: u64 = 1;

/// An error in a JSON ruleset. Displays as
///
/// ```text
/// rules.json: nftables[2].add.rule.expr[0]: error: expected a port number or service name, found `htps`
///     add rule inet t c tcp dport htps accept
///                                 ^^^^
/// ```
///
/// or, for a document that is not JSON, `rules.json:4:7: error: invalid JSON: ...`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonError {
    /// The file as the user named it.
    pub path: PathBuf,
    /// 1-based line and column in the JSON text (syntax errors only).
    pub line_col: Option<(u32, u32)>,
    /// Where in the document: `nftables[3].add.rule.expr[1]` (empty for syntax errors).
    pub pointer: String,
    /// What went wrong and what was expected.
    pub message: String,
    /// The nft command made of the JSON command, the 1-based column and the length of the
    /// marked part (errors found by the text parser).
    pub command: Option<(String, u32, u32)>,
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path.display())?;
        if let Some((line, col)) = self.line_col {
            write!(f, ":{line}:{col}")?;
        }
        if !self.pointer.is_empty() {
            write!(f, ": {}", self.pointer)?;
        }
        write!(f, ": error: {}", self.message)?;
        if let Some((text, col, len)) = &self.command {
            let pad: String = text
                .chars()
                .take((*col as usize).saturating_sub(1))
                .map(|c| if c == '\t' { '\t' } else { ' ' })
                .collect();
            write!(
                f,
                "\n    {text}\n    {pad}{}",
                "^".repeat((*len as usize).max(1))
            )?;
        }
        Ok(())
    }
}

/// A fault found while walking the document: where (a path such as
/// `nftables[3].add.rule.expr[1]`) and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fault {
    pub pointer: String,
    pub message: String,
}

/// A fault at `pointer`.
pub(crate) fn fault<T>(pointer: &str, message: impl Into<String>) -> Result<T, Fault> {
    Err(Fault {
        pointer: pointer.to_string(),
        message: message.into(),
    })
}

/// Where one generated line came from.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Origin {
    /// `nftables[N].add.rule` (the command's path down to its object).
    pointer: String,
    /// For a rule: the 1-based column where each statement of `expr` starts in the line.
    stmt_cols: Vec<u32>,
}

/// A JSON document translated into nft commands, one line per command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Translation {
    /// The nft commands, one a line (`add table inet t`, `add rule inet t c tcp dport 22
    /// accept`), to be parsed by [`crate::parse_str`] or applied by [`crate::apply_batch`]
    /// under the JSON file's name.
    pub text: String,
    /// The JSON file's name (errors cite it).
    pub name: String,
    /// Per line of `text` (the same order): the JSON command it came from.
    origins: Vec<Origin>,
}

/// Translate a JSON document (`{"nftables": [...]}`) into nft commands.
///
/// # Errors
/// [`Error::Json`] when `text` is not JSON, not an object holding an `nftables` array, or a
/// command or object that the schema does not have or that lacks a property it needs
/// (pointer and message say which).
pub fn translate(text: &str, name: &str) -> Result<Translation, Error> {
    let doc: Json = serde_json::from_str(text).map_err(|e| {
        Error::Json(Box::new(JsonError {
            path: PathBuf::from(name),
            line_col: Some((e.line() as u32, e.column() as u32)),
            pointer: String::new(),
            message: format!("invalid JSON: {e}"),
            command: None,
        }))
        .strip_json_position()
    })?;
    let as_error = |f: Fault| {
        Error::Json(Box::new(JsonError {
            path: PathBuf::from(name),
            line_col: None,
            pointer: f.pointer,
            message: f.message,
            command: None,
        }))
    };
    let commands = match &doc {
        Json::Object(o) => match o.get("nftables") {
            Some(Json::Array(a)) if o.len() == 1 => a,
            Some(Json::Array(_)) => {
                let extra = o.keys().find(|k| *k != "nftables").cloned();
                return Err(as_error(Fault {
                    pointer: extra.unwrap_or_default(),
                    message: "unknown property: the document is `{\"nftables\": [...]}`".into(),
                }));
            }
            Some(_) => {
                return Err(as_error(Fault {
                    pointer: "nftables".into(),
                    message: "expected an array of commands".into(),
                }));
            }
            None => {
                return Err(as_error(Fault {
                    pointer: String::new(),
                    message:
                        "expected an object with an `nftables` array (`{\"nftables\": [...]}`)"
                            .into(),
                }));
            }
        },
        _ => {
            return Err(as_error(Fault {
                pointer: String::new(),
                message: "expected an object with an `nftables` array (`{\"nftables\": [...]}`)"
                    .into(),
            }));
        }
    };
    let mut out = Translation {
        text: String::new(),
        name: name.to_string(),
        origins: Vec::new(),
    };
    for (i, c) in commands.iter().enumerate() {
        let at = format!("nftables[{i}]");
        if let Some(line) = objects::command(c, &at).map_err(as_error)? {
            out.text.push_str(&line.text);
            out.text.push('\n');
            out.origins.push(Origin {
                pointer: line.pointer,
                stmt_cols: line.stmt_cols,
            });
        }
    }
    Ok(out)
}

impl Error {
    /// serde_json's message ends with " at line L column C", which the error shows already.
    fn strip_json_position(mut self) -> Self {
        if let Error::Json(j) = &mut self
            && let Some(at) = j.message.rfind(" at line ")
        {
            j.message.truncate(at);
        }
        self
    }
}

impl Translation {
    /// The error `err`, found in the generated text, told in the JSON document's terms: the
    /// command (and the rule's statement) it came from, the generated command with the
    /// place marked. Errors of other files (`include`d ones cannot occur: JSON has none)
    /// and I/O errors are returned as they are.
    pub fn relocate(&self, err: Error) -> Error {
        let Error::At(l) = &err else {
            return err;
        };
        if l.path.as_os_str() != self.name.as_str() || !l.included_from.is_empty() {
            return err;
        }
        let Some(origin) = self.origins.get((l.line as usize).wrapping_sub(1)) else {
            return err;
        };
        let mut pointer = origin.pointer.clone();
        if let Some(k) = origin.stmt_cols.iter().rposition(|&c| c <= l.col) {
            pointer.push_str(&format!(".expr[{k}]"));
        }
        let mut message = l.message.clone();
        for n in &l.notes {
            message.push_str(&format!(" ({n})"));
        }
        Error::Json(Box::new(JsonError {
            path: l.path.clone(),
            line_col: None,
            pointer,
            message,
            command: Some((l.line_text.clone(), l.col, l.len)),
        }))
    }
}

/// Parse a JSON ruleset document as [`crate::parse_str`] parses text: `name` is the file
/// name errors cite.
///
/// # Errors
/// As [`translate`], and the text parser's errors told in the document's terms
/// ([`Translation::relocate`]).
pub fn parse_str(text: &str, name: &str) -> Result<crate::Ruleset, Error> {
    let t = translate(text, name)?;
    crate::parse_str(&t.text, name).map_err(|e| t.relocate(e))
}

/// Apply a JSON batch to a copy of `base` as [`crate::apply_batch_with`] applies text.
///
/// # Errors
/// As [`parse_str`]; `base` is untouched and `shadows` emptied.
pub fn apply_batch_with(
    base: &crate::Ruleset,
    text: &str,
    name: &str,
    shadows: &mut crate::SetShadows,
) -> Result<crate::Ruleset, Error> {
    let t = translate(text, name)?;
    crate::apply_batch_with(base, &t.text, name, shadows).map_err(|e| t.relocate(e))
}

#[cfg(test)]
mod tests;
