//! Errors of the ruleset language, for the person who wrote the ruleset.

use std::fmt;
use std::path::PathBuf;

use crate::model::{Ruleset, SourceFile, Span, source_in};

/// A ruleset that cannot be read, parsed or given a meaning.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A file could not be read (the main file or an include).
    #[error("{path}: {message}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        message: String,
    },
    /// A syntax or meaning error at a place in a file (boxed: it is large, and results of the
    /// parser's functions carry it).
    #[error("{0}")]
    At(Box<Located>),
    /// An error in a JSON ruleset (`nft -j -f`): the file and the path of the JSON value
    /// (`nftables[3].add.rule.expr[1]`), or line and column for a document that is not JSON
    /// (see [`crate::json_in`]).
    #[error("{0}")]
    Json(Box<crate::json_in::JsonError>),
}

/// An error at a place in a source file. Displays as:
///
/// ```text
/// rules.nft:3:12: error: expected a port number or service name, found "htps"
///     tcp dport htps accept
///               ^^^^
/// ```
///
/// For a file read through `include`, nft's "In file included from FILE:LINE:COL:" lines come
/// first; notes (such as where an unclosed block opened) follow. A long line is cut around
/// the column, long quoted tokens in the message are shortened, and control characters are
/// shown escaped (`\0`, `\x01`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    /// File as the user named it.
    pub path: PathBuf,
    /// 1-based line.
    pub line: u32,
    /// 1-based column (characters).
    pub col: u32,
    /// Length of the marked part (characters, at least 1).
    pub len: u32,
    /// The source line, without its newline.
    pub line_text: String,
    /// What went wrong and what was expected.
    pub message: String,
    /// The `include` statements that led to this file, innermost first: (file, line, col).
    pub included_from: Vec<(PathBuf, u32, u32)>,
    /// Lines shown after the marked source line, e.g. "the block opened here: FILE:L:C".
    pub notes: Vec<String>,
}

/// Longest source line shown whole; a longer one is cut to a window around the column.
const LINE_SHOWN: usize = 120;
/// Characters shown before the column in a cut line.
const BEFORE_COL: usize = 50;
/// Longest `quoted` or "quoted" part of a message shown whole.
const QUOTED_SHOWN: usize = 60;

/// `c` as shown in an error: control characters (but tab) escaped.
fn visible(c: char) -> String {
    match c {
        '\0' => "\\0".to_string(),
        '\r' => "\\r".to_string(),
        '\n' => "\\n".to_string(),
        '\t' => "\t".to_string(),
        c if c.is_control() => format!("\\x{:02x}", u32::from(c)),
        c => c.to_string(),
    }
}

/// `message` with control characters escaped and every `quoted` or "quoted" part longer than
/// [`QUOTED_SHOWN`] characters cut to its start and `...`.
fn shorten_message(message: &str) -> String {
    let chars: Vec<char> = message.chars().collect();
    let mut out = String::with_capacity(message.len().min(4096));
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if (c == '`' || c == '"')
            && let Some(end) = chars[i + 1..].iter().position(|&d| d == c)
        {
            // The quoted part whole (its closing quote is no opening one), or cut when long.
            out.push(c);
            let shown = if end > QUOTED_SHOWN {
                QUOTED_SHOWN - 20
            } else {
                end
            };
            chars[i + 1..i + 1 + shown]
                .iter()
                .for_each(|&d| out.push_str(&visible(d)));
            if end > QUOTED_SHOWN {
                out.push_str(&format!("... ({end} characters)"));
            }
            out.push(c);
            i += end + 2;
            continue;
        }
        out.push_str(&visible(c));
        i += 1;
    }
    out
}

impl fmt::Display for Located {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (path, line, col)) in self.included_from.iter().enumerate() {
            let lead = if i == 0 {
                "In file included from"
            } else {
                "                 from"
            };
            writeln!(f, "{lead} {}:{line}:{col}:", path.display())?;
        }
        writeln!(
            f,
            "{}:{}:{}: error: {}",
            self.path.display(),
            self.line,
            self.col,
            shorten_message(&self.message)
        )?;
        let chars: Vec<char> = self.line_text.chars().collect();
        let col = (self.col.max(1) - 1) as usize;
        let (start, end) = if chars.len() > LINE_SHOWN {
            let start = col.saturating_sub(BEFORE_COL).min(chars.len());
            (start, (start + LINE_SHOWN).min(chars.len()))
        } else {
            (0, chars.len())
        };
        let mut shown = String::new();
        let mut pad = String::new();
        if start > 0 {
            shown.push_str("...");
            pad.push_str("   ");
        }
        for (i, &c) in chars[start..end].iter().enumerate() {
            let v = visible(c);
            if start + i < col {
                pad.extend(v.chars().map(|c| if c == '\t' { '\t' } else { ' ' }));
            }
            shown.push_str(&v);
        }
        if end < chars.len() {
            shown.push_str("...");
        }
        let marks = (self.len.max(1) as usize).min(end.saturating_sub(col).max(1));
        writeln!(f, "    {shown}")?;
        write!(f, "    {pad}{}", "^".repeat(marks))?;
        for n in &self.notes {
            write!(f, "\n{n}")?;
        }
        Ok(())
    }
}

impl Error {
    /// An error at `span` of a file of `ruleset` (used by later stages, such as the compiler,
    /// that hold a parsed ruleset).
    pub fn at(ruleset: &Ruleset, span: Span, message: impl Into<String>) -> Self {
        Error::At(Box::new(located(&ruleset.sources, span, message.into())))
    }

    /// The same error with `note` shown after the source line.
    #[must_use]
    pub fn with_note(mut self, note: impl Into<String>) -> Self {
        if let Error::At(l) = &mut self {
            l.notes.push(note.into());
        }
        self
    }
}

/// The include statements that led to the file of `span`, innermost first.
pub(crate) fn included_from(sources: &[SourceFile], span: Span) -> Vec<(PathBuf, u32, u32)> {
    let mut out = Vec::new();
    let mut at = source_in(sources, span.file).and_then(|s| s.included_from);
    // Each file is included from an earlier one, so this ends; the bound guards the rest.
    while let Some(site) = at
        && out.len() < sources.len()
    {
        let Some(src) = source_in(sources, site.file) else {
            break;
        };
        out.push((src.path.clone(), site.line, site.col));
        at = src.included_from;
    }
    out
}

/// A [`Located`] error at `span` of one of `sources`.
pub(crate) fn located(sources: &[SourceFile], span: Span, message: String) -> Located {
    let (path, line_text) = match source_in(sources, span.file) {
        Some(src) => (src.path.clone(), src.line(span.line).unwrap_or_default()),
        None => (PathBuf::from("<ruleset>"), String::new()),
    };
    Located {
        path,
        line: span.line,
        col: span.col,
        len: span.len.max(1),
        line_text,
        message,
        included_from: included_from(sources, span),
        notes: Vec::new(),
    }
}
