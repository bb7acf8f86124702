//! Recursive-descent parser for nft syntax, producing a [`Ruleset`] with kernel-style handles.
//!
//! The parser works as `nft -f` does: each top-level command (a `table` block, `add rule`,
//! `add element`, `flush ruleset`, ...) is read and then applied to the ruleset in order. A
//! `table` block is applied the way nft expands it into its batch (new chains first, then new
//! sets, then the rules chain by chain, each anonymous set just before its rule), which is the
//! order in which the kernel hands out handles (see [`handles`]).

pub(crate) mod batch;
pub(crate) mod chain;
mod commands;
mod compute;
mod ct_obj;
mod declarations;
mod dynset;
mod expr;
mod fwd;
mod handles;
mod log;
mod merge;
pub(crate) mod nat;
mod plugin;
mod reject;
mod rule;
mod set_decl;
pub(crate) mod setcheck;
mod stateful;
mod unsupported;
pub(crate) mod value;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::error::Error;
use crate::lexer::{self, Tok, Token};
use crate::model::{FileId, Ruleset, SourceFile, Span, Table};

/// Most `$variable` expansions one parse may do, counted in tokens (guards against a define
/// that uses itself, and against defines that double in size at each level).
const MAX_EXPANSIONS: usize = 1_000_000;

/// Deepest nesting of `{ ... }` (nested sets, from variables or written out) and of bitwise
/// operations (`meta mark & 1 | 2 ...`) one expression may have. nft's bison parser gives
/// up at 10000 stack entries ("memory exhausted"); wasp stops much earlier, before the
/// recursion can exhaust a thread's stack, as no real ruleset nests this deep.
pub(crate) const MAX_NESTING: usize = 64;

/// Deepest chain of `include`s: the main file and 15 included files, as nft 1.0.6
/// (`MAX_INCLUDE_DEPTH` 16: "Include nested too deeply, max 16 levels").
const MAX_INCLUDE_DEPTH: usize = 16;

/// Parse state shared by a file and the files it includes.
pub(crate) struct State {
    /// Source files read so far.
    pub sources: Vec<SourceFile>,
    /// `define NAME = ...`: the tokens of each value.
    pub defines: HashMap<String, Vec<Token>>,
    /// Canonical paths of the files being parsed (include loop detection).
    pub include_stack: Vec<PathBuf>,
    /// Tables built so far.
    pub tables: Vec<Table>,
    /// Next handle of each table (parallel to `tables`).
    pub next_handle: Vec<u64>,
    /// Last table handle given (per netns in the kernel, never reset by `flush ruleset`).
    pub table_handle: u64,
    /// Expansions done.
    pub expansions: usize,
    /// Each named set's kernel back-end as the transaction has built it (acceptance checks).
    pub shadows: HashMap<setcheck::ShadowKey, setcheck::Shadow>,
    /// The running program element commands are checked against, in an element batch
    /// ([`crate::apply_elements_against`]).
    pub oracle: Option<Box<dyn setcheck::SetOracle>>,
    /// Tables (family, name) that hold a NAT or `flow add` statement: only their rules need
    /// the kernel's hook validation (an entry of a deleted table only costs a check).
    pub hook_bound: std::collections::HashSet<(crate::model::Family, String)>,
    /// Element commands applied so far, with their undo ([`crate::apply_elements`] only).
    pub element_log: Option<setcheck::ElementLog>,
    /// Only element commands are taken: any other command stops the batch
    /// ([`State::not_elements`] set).
    pub elements_only: bool,
    /// The batch held a command other than an element command (under `elements_only`).
    pub not_elements: bool,
    /// (table handle, rule handle) of each rule an `insert rule` placed, in order.
    pub inserted: Vec<(u64, u64)>,
}

impl State {
    fn new() -> Self {
        State {
            sources: Vec::new(),
            defines: HashMap::new(),
            include_stack: Vec::new(),
            tables: Vec::new(),
            next_handle: Vec::new(),
            table_handle: 0,
            expansions: 0,
            shadows: HashMap::new(),
            oracle: None,
            hook_bound: std::collections::HashSet::new(),
            element_log: None,
            elements_only: false,
            not_elements: false,
            inserted: Vec::new(),
        }
    }

    /// An error at `span` with the source line.
    pub fn error(&self, span: Span, message: impl Into<String>) -> Error {
        Error::At(Box::new(crate::error::located(
            &self.sources,
            span,
            message.into(),
        )))
    }

    /// "FILE:LINE:COL" of `span`, for notes.
    pub fn place(&self, span: Span) -> String {
        let path = crate::model::source_in(&self.sources, span.file)
            .map_or_else(|| "<ruleset>".to_string(), |s| s.path.display().to_string());
        format!("{path}:{}:{}", span.line, span.col)
    }
}

/// A cursor over one file's tokens, expanding `$variables` as it goes.
pub(crate) struct Parser<'s> {
    toks: Vec<Token>,
    pos: usize,
    /// Tokens of expanded variables, to be read before `toks[pos]` (last = next).
    pending: Vec<Token>,
    /// Span of the end of the file (for "found end of file").
    eof: Span,
    /// Span of the token consumed last (the end of what was just read).
    last: Span,
    file: FileId,
    /// Folder that relative includes resolve against.
    dir: PathBuf,
    pub(crate) st: &'s mut State,
    /// References made by the rules read since the last block was applied.
    pub(crate) refs: Vec<handles::Ref>,
    /// `{` levels open in the set being read (see [`MAX_NESTING`]).
    pub(crate) nesting: usize,
    /// Names of the plugins the rules being read may use: those of their table (declared
    /// before, or anywhere in the table block being read).
    pub(crate) plugins: Vec<String>,
    /// The sets declared in the table block being read (not in the table yet), without their
    /// elements: what a set statement's `: DATA` is read as, and whether it counts.
    pub(crate) block_sets: Vec<crate::model::SetDecl>,
    /// The further fields of the data of the named map whose elements are being read
    /// ([`crate::model::SetDecl::data_tail`]): each element's data is then concatenated.
    pub(crate) data_tail: Vec<crate::model::DataType>,
    /// Reading the elements of a NAT map (`dnat to KEY map { k : DATA }`): the data is an
    /// address (value, range or prefix) and maybe `. PORT` ([`crate::model::ElemData::Nat`]).
    pub(crate) nat_map: bool,
    /// Map elements may come without their data (`delete element` of a map: the kernel keys
    /// it by the key alone).
    pub(crate) data_optional: bool,
}

pub(crate) type PResult<T> = Result<T, Error>;

impl<'s> Parser<'s> {
    /// The next token (after expanding variables), without consuming it.
    pub fn peek(&mut self) -> PResult<Option<&Token>> {
        loop {
            let next = match self.pending.last() {
                Some(t) => t,
                None => match self.toks.get(self.pos) {
                    Some(t) => t,
                    None => return Ok(None),
                },
            };
            if let Tok::Var(name) = &next.tok {
                let (name, span) = (name.clone(), next.span);
                self.advance();
                let Some(value) = self.st.defines.get(&name) else {
                    return Err(self.st.error(span, format!("unknown variable `${name}`")));
                };
                self.st.expansions += value.len() + 1;
                if self.st.expansions > MAX_EXPANSIONS {
                    return Err(self
                        .st
                        .error(span, format!("variable `${name}` expands without end")));
                }
                self.pending.extend(value.iter().rev().cloned());
                continue;
            }
            break;
        }
        Ok(self.pending.last().or_else(|| self.toks.get(self.pos)))
    }

    fn advance(&mut self) {
        match self.pending.pop() {
            Some(t) => self.last = t.span,
            None => {
                if let Some(t) = self.toks.get(self.pos) {
                    self.last = t.span;
                }
                self.pos += 1;
            }
        }
    }

    /// Span of the token consumed last.
    pub(crate) fn last_span(&self) -> Span {
        self.last
    }

    /// Consume and return the next token.
    pub fn next(&mut self) -> PResult<Option<Token>> {
        let t = self.peek()?.cloned();
        if t.is_some() {
            self.advance();
        }
        Ok(t)
    }

    /// The next token's kind, cloned (`None` at the end of the file).
    pub fn peek_tok(&mut self) -> PResult<Option<Tok>> {
        Ok(self.peek()?.map(|t| t.tok.clone()))
    }

    /// Span of the next token (the end of the file when there is none).
    pub fn peek_span(&mut self) -> PResult<Span> {
        let eof = self.eof;
        Ok(self.peek()?.map_or(eof, |t| t.span))
    }

    /// `true` when the next token is the `:` between a map element's key and its data (or
    /// between a map's key and data types). A word that starts with it (`:drop` in `80
    /// :drop`, which nft reads as two tokens) is split first; `::1` stays an address.
    pub fn at_colon(&mut self) -> PResult<bool> {
        let split = match self.peek()? {
            Some(Token {
                tok: Tok::Word(w),
                span,
            }) if w.len() > 1 && w.starts_with(':') && !w.starts_with("::") => {
                Some((w[1..].to_string(), *span))
            }
            _ => None,
        };
        if let Some((rest, span)) = split {
            self.advance();
            self.pending.push(Token {
                tok: Tok::Word(rest),
                span: Span {
                    col: span.col + 1,
                    len: span.len.saturating_sub(1).max(1),
                    ..span
                },
            });
            self.pending.push(Token {
                tok: Tok::Word(":".into()),
                span: Span { len: 1, ..span },
            });
        }
        self.at_word(":")
    }

    /// `true` when the next token is the word `w`.
    pub fn at_word(&mut self, w: &str) -> PResult<bool> {
        Ok(matches!(self.peek()?, Some(Token { tok: Tok::Word(x), .. }) if x == w))
    }

    /// `true` when the next token is the punctuation `p`.
    pub fn at_punct(&mut self, p: &str) -> PResult<bool> {
        Ok(matches!(self.peek()?, Some(Token { tok: Tok::Punct(x), .. }) if *x == p))
    }

    /// Consume the word `w` if it is next.
    pub fn eat_word(&mut self, w: &str) -> PResult<bool> {
        let yes = self.at_word(w)?;
        if yes {
            self.advance();
        }
        Ok(yes)
    }

    /// Consume the punctuation `p` if it is next.
    pub fn eat_punct(&mut self, p: &str) -> PResult<bool> {
        let yes = self.at_punct(p)?;
        if yes {
            self.advance();
        }
        Ok(yes)
    }

    /// An error at the next token: "expected WHAT, found TOKEN".
    pub fn expected<T>(&mut self, what: &str) -> PResult<T> {
        let (span, found) = match self.peek()? {
            Some(t) => (t.span, t.tok.describe()),
            None => (self.eof, "end of file".to_string()),
        };
        Err(self
            .st
            .error(span, format!("expected {what}, found {found}")))
    }

    /// "expected WHAT, found end of file" with a note on where the block `open` began.
    pub fn unclosed<T>(&mut self, what: &str, open: Span) -> PResult<T> {
        let note = format!("note: the block opened here: {}", self.st.place(open));
        self.expected::<T>(what).map_err(|e| e.with_note(note))
    }

    /// Consume the punctuation `p` or fail with "expected `p`".
    pub fn expect_punct(&mut self, p: &str) -> PResult<Span> {
        let span = self.peek_span()?;
        if self.eat_punct(p)? {
            Ok(span)
        } else {
            self.expected(&format!("`{p}`"))
        }
    }

    /// Consume the word `w` or fail.
    pub fn expect_word(&mut self, w: &str) -> PResult<Span> {
        let span = self.peek_span()?;
        if self.eat_word(w)? {
            Ok(span)
        } else {
            self.expected(&format!("`{w}`"))
        }
    }

    /// A name (identifier): a word or a quoted string.
    pub fn name(&mut self, what: &str) -> PResult<(String, Span)> {
        if let Some(Token {
            tok: Tok::Word(w),
            span,
        }) = self.peek()?.cloned()
            && crate::keywords::is_keyword(&w)
        {
            return Err(self.st.error(
                span,
                format!(
                    "expected {what}, found `{w}`, a word of the nft language (nft: syntax error, unexpected {w}, expecting string)"
                ),
            ));
        }
        self.word_name(what)
    }

    /// [`Parser::name`] without the keyword check: names of wasp's own (plugins) and words
    /// that are not names (table flags).
    pub fn word_name(&mut self, what: &str) -> PResult<(String, Span)> {
        match self.peek()?.cloned() {
            Some(Token {
                tok: Tok::Word(w),
                span,
            }) if w
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_') =>
            {
                self.advance();
                Ok((w, span))
            }
            Some(Token {
                tok: Tok::Str(s),
                span,
            }) => {
                self.advance();
                Ok((s, span))
            }
            _ => self.expected(what),
        }
    }

    /// A quoted string.
    pub fn string(&mut self, what: &str) -> PResult<(String, Span)> {
        match self.peek()?.cloned() {
            Some(Token {
                tok: Tok::Str(s),
                span,
            }) => {
                self.advance();
                Ok((s, span))
            }
            _ => self.expected(what),
        }
    }

    /// Skip newlines and `;`.
    pub fn skip_separators(&mut self) -> PResult<()> {
        while matches!(self.peek_tok()?, Some(Tok::Newline) | Some(Tok::Punct(";"))) {
            self.advance();
        }
        Ok(())
    }

    /// Skip newlines only (inside `{ ... }` lists).
    pub fn skip_newlines(&mut self) -> PResult<()> {
        while matches!(self.peek_tok()?, Some(Tok::Newline)) {
            self.advance();
        }
        Ok(())
    }

    /// Require the end of a statement: a newline, `;` or the end of the file.
    pub fn end_of_statement(&mut self) -> PResult<()> {
        match self.peek_tok()? {
            None | Some(Tok::Newline) | Some(Tok::Punct(";")) => Ok(()),
            _ => self.expected("a newline or `;`"),
        }
    }

    /// The top level of a file.
    fn parse_file_body(&mut self) -> PResult<()> {
        loop {
            self.skip_separators()?;
            if self.peek()?.is_none() {
                return Ok(());
            }
            self.command()?;
            self.end_of_statement()?;
        }
    }

    /// `include "FILE"` (`at`: the `include` word, where nft's "In file included from" points).
    fn include(&mut self, at: Span) -> PResult<()> {
        let (name, span) = self.string("a quoted file name after `include`")?;
        let path = if Path::new(&name).is_absolute() {
            PathBuf::from(&name)
        } else {
            self.dir.join(&name)
        };
        let mut files: Vec<PathBuf> = Vec::new();
        if name.contains('*') {
            // A glob in the last component, as nft allows: every match, in name order.
            let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
            let pattern = path
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default();
            if let Ok(rd) = std::fs::read_dir(&dir) {
                for e in rd.flatten() {
                    let f = e.file_name().to_string_lossy().into_owned();
                    if glob_match(&pattern, &f) && !f.starts_with('.') {
                        files.push(e.path());
                    }
                }
            }
            files.sort();
        } else {
            files.push(path);
        }
        if self.st.include_stack.len() >= MAX_INCLUDE_DEPTH {
            return Err(self.st.error(
                span,
                format!("Include nested too deeply, max {MAX_INCLUDE_DEPTH} levels"),
            ));
        }
        for path in files {
            let canon = std::fs::canonicalize(&path).map_err(|e| {
                self.st
                    .error(span, format!("cannot include \"{}\": {e}", path.display()))
            })?;
            if self.st.include_stack.contains(&canon) {
                return Err(self.st.error(
                    span,
                    format!("include loop: \"{}\" is already being read", path.display()),
                ));
            }
            let bytes = std::fs::read(&path).map_err(|e| {
                self.st
                    .error(span, format!("cannot include \"{}\": {e}", path.display()))
            })?;
            parse_source(self.st, path, canon, &bytes, Some(at))?;
        }
        Ok(())
    }

    /// `define NAME = VALUE` (`redefine`: `NAME` may be defined already).
    /// `undefine NAME`.
    fn undefine(&mut self) -> PResult<()> {
        let (name, _) = self.name("a variable name after `undefine`")?;
        self.st.defines.remove(&name);
        Ok(())
    }

    fn define(&mut self, redefine: bool) -> PResult<()> {
        let (name, nspan) = self.name("a variable name after `define`")?;
        if !redefine && self.st.defines.contains_key(&name) {
            return Err(self.st.error(
                nspan,
                format!("redefinition of symbol '{name}' (use `redefine`)"),
            ));
        }
        self.expect_punct("=")?;
        let mut value = Vec::new();
        let mut depth = 0usize;
        // The raw tokens up to the end of the line (braces may span lines).
        while let Some(t) = self.pending.last().or_else(|| self.toks.get(self.pos)) {
            let t = t.clone();
            let after_open = matches!(
                value.last(),
                Some(Token {
                    tok: Tok::Punct("{"),
                    ..
                })
            );
            match &t.tok {
                Tok::Newline | Tok::Punct(";") if depth == 0 => break,
                Tok::Punct("}") if after_open => {
                    // nft: "syntax error, unexpected '}'" (its grammar has no empty set).
                    return Err(self.st.error(
                        t.span,
                        "expected a set element (nft has no empty `{ }`), found `}`",
                    ));
                }
                Tok::Punct("{") => depth += 1,
                Tok::Punct("}") => depth = depth.saturating_sub(1),
                Tok::Var(v) if !self.st.defines.contains_key(v) => {
                    return Err(self.st.error(t.span, format!("unknown variable `${v}`")));
                }
                _ => {}
            }
            self.advance();
            if !matches!(t.tok, Tok::Newline) {
                value.push(t);
            }
        }
        if value.is_empty() {
            return self.expected("a value after `=`");
        }
        // Expand variables now, as nft binds them at definition time.
        let mut expanded = Vec::with_capacity(value.len());
        for t in value {
            match &t.tok {
                Tok::Var(v) => {
                    let inner = &self.st.defines[v];
                    self.st.expansions += inner.len() + 1;
                    if self.st.expansions > MAX_EXPANSIONS {
                        return Err(self
                            .st
                            .error(t.span, format!("variable `${v}` expands without end")));
                    }
                    expanded.extend(inner.iter().cloned());
                }
                _ => expanded.push(t),
            }
        }
        self.st.defines.insert(name, expanded);
        Ok(())
    }
}

/// `*` and `?` matching of a file name (linear backtracking over the last `*`, so a pattern
/// such as `a*a*a*b` cannot take exponential time).
fn glob_match(pattern: &str, name: &str) -> bool {
    let (p, n) = (pattern.as_bytes(), name.as_bytes());
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        match p.get(pi) {
            Some(b'*') => {
                star = Some((pi, ni));
                pi += 1;
            }
            Some(&c) if c == b'?' || c == n[ni] => {
                pi += 1;
                ni += 1;
            }
            _ => match star {
                Some((sp, sn)) => {
                    pi = sp + 1;
                    ni = sn + 1;
                    star = Some((sp, sn + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

/// A byte that is not UTF-8, where the lexer will see it (as U+FFFD).
struct BadByte {
    line: u32,
    col: u32,
    byte: u8,
}

/// `bytes` as text, each invalid UTF-8 sequence replaced by U+FFFD (as
/// `String::from_utf8_lossy`), with the place of each (line and column as the lexer counts
/// them).
fn decode(bytes: &[u8]) -> (String, Vec<BadByte>) {
    let mut text = String::with_capacity(bytes.len());
    let mut bad = Vec::new();
    let (mut line, mut col) = (1u32, 1u32);
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            if c == '\n' {
                line += 1;
                col = 1;
            } else {
                col += 1;
            }
        }
        text.push_str(chunk.valid());
        if let Some(&byte) = chunk.invalid().first() {
            bad.push(BadByte { line, col, byte });
            text.push(char::REPLACEMENT_CHARACTER);
            col += 1;
        }
    }
    (text, bad)
}

/// The error for a byte that is not UTF-8 outside a comment.
fn bad_byte_message(b: &BadByte, what: &str) -> String {
    format!(
        "byte 0x{:02X}{what} is not UTF-8: wasp reads a ruleset as UTF-8 text (other bytes may appear only in comments)",
        b.byte
    )
}

fn parse_source(
    st: &mut State,
    path: PathBuf,
    canon: PathBuf,
    bytes: &[u8],
    included_from: Option<Span>,
) -> PResult<()> {
    // After the files read before (a batch's: after the running ruleset's, some of which
    // may have been dropped).
    let file: FileId = st.sources.last().map_or(0, |s| s.id + 1);
    let (text, bad) = decode(bytes);
    let toks = lexer::lex(&text, file);
    let lines = text.lines().count().max(1) as u32;
    let last_len = text.lines().last().map_or(0, |l| l.chars().count()) as u32;
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    st.sources
        .push(SourceFile::new(file, path, text, included_from));
    let toks = toks.map_err(|e| {
        match bad
            .iter()
            .find(|b| (b.line, b.col) == (e.span.line, e.span.col))
        {
            Some(b) => st.error(e.span, bad_byte_message(b, "")),
            None => st.error(e.span, e.message),
        }
    })?;
    // Bytes that are not UTF-8 are fine in comments (the lexer skips them) but not in strings.
    for b in &bad {
        let in_string = toks.iter().any(|t| {
            matches!(t.tok, Tok::Str(_))
                && t.span.line == b.line
                && (t.span.col..t.span.col + t.span.len).contains(&b.col)
        });
        if in_string {
            let span = Span {
                file,
                line: b.line,
                col: b.col,
                len: 1,
            };
            return Err(st.error(span, bad_byte_message(b, " in a string")));
        }
    }
    st.include_stack.push(canon);
    let mut p = Parser {
        toks,
        pos: 0,
        pending: Vec::new(),
        eof: Span {
            file,
            line: lines,
            col: last_len + 1,
            len: 1,
        },
        last: Span {
            file,
            line: 1,
            col: 1,
            len: 0,
        },
        file,
        dir,
        st,
        refs: Vec::new(),
        nesting: 0,
        nat_map: false,
        data_optional: false,
        plugins: Vec::new(),
        block_sets: Vec::new(),
        data_tail: Vec::new(),
    };
    let _ = p.file;
    let r = p.parse_file_body();
    st.include_stack.pop();
    r
}

/// Parse the file contents `bytes` named `path`; includes resolve against its folder.
pub(crate) fn parse(bytes: &[u8], path: &Path) -> Result<Ruleset, Error> {
    let mut st = State::new();
    let canon = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    parse_source(&mut st, path.to_path_buf(), canon, bytes, None)?;
    for (t, next) in st.tables.iter_mut().zip(&st.next_handle) {
        t.next_handle = *next;
        // The elements were pushed one by one: give back the room doubling left.
        for s in &mut t.sets {
            s.elements.shrink_to_fit();
        }
    }
    Ok(Ruleset {
        tables: st.tables,
        sources: st.sources,
        table_handle: st.table_handle,
    })
}

#[cfg(test)]
mod tests {
    use super::glob_match;

    #[test]
    fn glob() {
        assert!(glob_match("*.nft", "a.nft"));
        assert!(glob_match("a?c*", "abc"));
        assert!(glob_match("*a*b", "xxaxxb"));
        assert!(!glob_match("*.nft", "a.nf"));
        assert!(!glob_match("a?c", "ac"));
        // Exponential for a naive backtracking matcher (about 2^40 steps).
        let name = "a".repeat(200);
        assert!(!glob_match(&format!("{}b", "a*".repeat(40)), &name));
    }
}
