//! Errors of the ruleset language, for the person who wrote the ruleset.

use std::fmt;
use std::path::PathBuf;

use crate::model::{Ruleset, Span};

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
    /// A syntax or meaning error at a place in a file.
    #[error("{0}")]
    At(Located),
}

/// An error at a place in a source file. Displays as:
///
/// ```text
/// rules.nft:3:12: error: expected a port number or service name, found "htps"
///     tcp dport htps accept
///               ^^^^
/// ```
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
}

impl fmt::Display for Located {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{}:{}:{}: error: {}",
            self.path.display(),
            self.line,
            self.col,
            self.message
        )?;
        writeln!(f, "    {}", self.line_text)?;
        let pad: String = self
            .line_text
            .chars()
            .take(self.col.saturating_sub(1) as usize)
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        write!(f, "    {}{}", pad, "^".repeat(self.len.max(1) as usize))
    }
}

impl Error {
    /// An error at `span` of a file of `ruleset` (used by later stages, such as the compiler,
    /// that hold a parsed ruleset).
    pub fn at(ruleset: &Ruleset, span: Span, message: impl Into<String>) -> Self {
        let (path, line_text) = match ruleset.sources.get(span.file as usize) {
            Some(src) => (
                src.path.clone(),
                src.text
                    .lines()
                    .nth(span.line.saturating_sub(1) as usize)
                    .unwrap_or("")
                    .to_string(),
            ),
            None => (PathBuf::from("<ruleset>"), String::new()),
        };
        Error::At(Located {
            path,
            line: span.line,
            col: span.col,
            len: span.len.max(1),
            line_text,
            message: message.into(),
        })
    }
}
