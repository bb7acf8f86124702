//! Plugins (a wasp extension of the nft grammar): `plugin NAME { path "FILE"; }` or
//! `plugin NAME;` in a table, and `NAME ARG... [fallback drop]` in its rules.
//!
//! The extension adds one table item and one statement; both start with words nft does not
//! use there (`plugin`, and a name the table declared), so every nft ruleset reads as before.

use super::expr::{HEADERS, is_bare_meta};
use super::{PResult, Parser};
use crate::error::Error;
use crate::lexer::Tok;
use crate::model::{PluginDecl, PluginUse, Span, Stmt};

/// Words that end a plugin use's arguments (besides the end of the rule and another plugin
/// use): verdicts and the statements that may follow a use in a rule.
const STOP_WORDS: &[&str] = &[
    "accept", "drop", "continue", "return", "jump", "goto", "counter", "log", "comment",
];

/// Names a plugin may not take: the words a rule already gives a meaning to (verdicts,
/// `log`, `comment`, expression heads) and `fallback`. `counter` is allowed: a table that
/// declares `plugin counter` has its `counter` statements served by the plugin.
fn reserved(name: &str) -> bool {
    STOP_WORDS.contains(&name) && name != "counter"
        || name == "fallback"
        || name == "plugin"
        || HEADERS.contains(&name)
        || is_bare_meta(name)
}

/// Edit distance of two short names (for "did you mean").
fn distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != cb))
                .min(prev[j + 1] + 1)
                .min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

impl Parser<'_> {
    /// The plugin names rules of table `ti` may use while its block (whose `{` was just read)
    /// is parsed: those declared before, and every `plugin NAME` item of the block (a rule may
    /// come before the declaration, as a rule may name a set declared further down).
    pub(super) fn plugins_in_block(&self, ti: usize) -> Vec<String> {
        let mut names: Vec<String> = self.st.tables[ti]
            .plugins
            .iter()
            .map(|p| p.name.clone())
            .collect();
        let mut depth = 1usize;
        let mut item_start = true;
        let mut i = self.pos;
        while let Some(t) = self.toks.get(i) {
            match &t.tok {
                Tok::Punct("{") => depth += 1,
                Tok::Punct("}") => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                Tok::Word(w) if depth == 1 && item_start && w == "plugin" => {
                    if let Some(Tok::Word(n) | Tok::Str(n)) = self.toks.get(i + 1).map(|t| &t.tok)
                        && !names.contains(n)
                    {
                        names.push(n.clone());
                    }
                }
                _ => {}
            }
            item_start = matches!(
                t.tok,
                Tok::Newline | Tok::Punct(";") | Tok::Punct("{") | Tok::Punct("}")
            );
            i += 1;
        }
        names
    }

    /// `plugin NAME { path "FILE"; }` or `plugin NAME` (after `plugin`), declared in table
    /// `ti`; `span` is the `plugin` keyword.
    pub(super) fn plugin_decl(&mut self, ti: usize, span: Span) -> PResult<()> {
        let (name, nspan) = self.word_name("a plugin name")?;
        let whole = Span {
            len: span.through(nspan).len,
            ..span
        };
        if reserved(&name) {
            return Err(self.st.error(
                nspan,
                format!("`{name}` cannot name a plugin: rules already give it a meaning"),
            ));
        }
        let mut path = None;
        let open = self.peek_span()?;
        if self.eat_punct("{")? {
            loop {
                self.skip_separators()?;
                let ispan = self.peek_span()?;
                match self.peek_tok()? {
                    Some(Tok::Punct("}")) => {
                        self.advance();
                        break;
                    }
                    Some(Tok::Word(w)) if w == "path" => {
                        self.advance();
                        if path.is_some() {
                            return Err(self
                                .st
                                .error(ispan, format!("plugin `{name}` has its `path` already")));
                        }
                        let (p, pspan) = self.string("a quoted path after `path`")?;
                        if p.is_empty() {
                            return Err(self.st.error(pspan, "the plugin path is empty"));
                        }
                        path = Some(p);
                    }
                    None => return self.unclosed("`path` or `}`", open),
                    _ => return self.expected("`path` or `}`"),
                }
                match self.peek_tok()? {
                    Some(Tok::Newline) | Some(Tok::Punct(";")) | Some(Tok::Punct("}")) => {}
                    _ => return self.expected("a newline, `;` or `}`"),
                }
            }
            if path.is_none() {
                return Err(self.st.error(
                    whole,
                    format!(
                        "plugin `{name}` needs a `path` (`path \"{name}.wasm\"` for a file next to the ruleset, or write `plugin {name}` for a bundled plugin)"
                    ),
                ));
            }
        }
        // Declared again the same way (a ruleset file applied twice): nothing to do, as for a
        // set or chain declared again.
        let table = &self.st.tables[ti];
        if let Some(prev) = table.plugins.iter().find(|p| p.name == name) {
            if prev.path == path {
                return Ok(());
            }
            let note = format!("note: first declared here: {}", self.st.place(prev.span));
            return Err(self
                .st
                .error(
                    nspan,
                    format!(
                        "plugin `{name}` is already declared in table `{} {}` with another path",
                        table.family.name(),
                        table.name
                    ),
                )
                .with_note(note));
        }
        self.st.tables[ti].plugins.push(PluginDecl {
            name,
            path,
            span: whole,
        });
        Ok(())
    }

    /// `true` when the next word is the name of a plugin the rule may use.
    pub(super) fn at_plugin(&mut self) -> PResult<bool> {
        Ok(match self.peek_tok()? {
            Some(Tok::Word(w)) => self.plugins.contains(&w),
            _ => false,
        })
    }

    /// A plugin use: the name (next) and its arguments.
    pub(super) fn plugin_use(&mut self) -> PResult<Stmt> {
        let (name, span) = match self.next()? {
            Some(t) => match t.tok {
                Tok::Word(w) => (w, t.span),
                _ => return Err(self.st.error(t.span, "expected a plugin name")),
            },
            None => return self.expected("a plugin name"),
        };
        let mut args = Vec::new();
        let mut fallback_drop = false;
        let mut last = span;
        let mut depth = 0usize;
        let mut open = span;
        loop {
            let Some(t) = self.peek()?.cloned() else {
                if depth > 0 {
                    return self.unclosed("`}`", open);
                }
                break;
            };
            let text = match &t.tok {
                Tok::Newline if depth > 0 => {
                    self.advance();
                    continue;
                }
                Tok::Newline | Tok::Punct(";") | Tok::Punct("}") if depth == 0 => break,
                Tok::Word(w)
                    if depth == 0
                        && (STOP_WORDS.contains(&w.as_str()) || self.plugins.contains(w)) =>
                {
                    break;
                }
                Tok::Word(w) if depth == 0 && w == "fallback" => {
                    self.advance();
                    let dspan = self.peek_span()?;
                    if !self.eat_word("drop")? {
                        return self.expected("`drop` after `fallback`");
                    }
                    fallback_drop = true;
                    last = dspan;
                    continue;
                }
                Tok::Punct("{") => {
                    if depth == 0 {
                        open = t.span;
                    }
                    depth += 1;
                    "{".to_string()
                }
                Tok::Punct("}") => {
                    depth -= 1;
                    "}".to_string()
                }
                Tok::Word(w) => w.clone(),
                Tok::Str(s) => format!("\"{s}\""),
                Tok::Var(v) => format!("${v}"),
                Tok::SetRef(s) => format!("@{s}"),
                Tok::Punct(p) => (*p).to_string(),
                Tok::Newline => unreachable!("handled above"),
            };
            self.advance();
            args.push(text);
            last = t.span;
        }
        let len = span.through(last).len;
        Ok(Stmt::Plugin(PluginUse {
            name,
            args,
            fallback_drop,
            span: Span { len, ..span },
        }))
    }

    /// The error for a word that starts no statement, when it looks like the use of a plugin
    /// the table did not declare: another table declares it, it is close to a name this table
    /// declares, or arguments follow it. `None` when it looks like something else (a lone
    /// misspelt verdict), for the caller's "expected ..." message. With `near` only the first
    /// two cases are looked at (words nft knows are checked between the two calls); with
    /// `nft_word` (a word nft knows) only the first.
    pub(super) fn unknown_plugin(
        &mut self,
        word: &str,
        span: Span,
        near: bool,
    ) -> PResult<Option<Error>> {
        self.unknown_plugin_in(word, span, near, false)
    }

    /// [`Parser::unknown_plugin`] with `nft_word`.
    pub(super) fn unknown_plugin_in(
        &mut self,
        word: &str,
        span: Span,
        near: bool,
        nft_word: bool,
    ) -> PResult<Option<Error>> {
        let elsewhere = self
            .st
            .tables
            .iter()
            .find(|t| t.plugins.iter().any(|p| p.name == word))
            .map(|t| {
                (
                    format!("{} {}", t.family.name(), t.name),
                    t.plugins.iter().find(|p| p.name == word).map(|p| p.span),
                )
            });
        if let Some((table, decl)) = elsewhere {
            let mut e = self.st.error(
                span,
                format!(
                    "unknown plugin `{word}`: plugins are declared per table, and table `{table}` declares it, not this one (add `plugin {word} {{ path \"...\"; }}` to this table)"
                ),
            );
            if let Some(d) = decl {
                e = e.with_note(format!("note: declared here: {}", self.st.place(d)));
            }
            return Ok(Some(e));
        }
        if nft_word {
            return Ok(None);
        }
        let close = self
            .plugins
            .iter()
            .filter(|p| distance(p, word) <= 2)
            .min_by_key(|p| distance(p, word))
            .cloned();
        if let Some(c) = close {
            return Ok(Some(self.st.error(
                span,
                format!("unknown plugin `{word}` (did you mean `{c}`?)"),
            )));
        }
        if near {
            return Ok(None);
        }
        // Arguments after the word: a use of a plugin nobody declared.
        let save = (self.pos, self.pending.clone());
        self.advance();
        let args_follow = !matches!(
            self.peek_tok()?,
            None | Some(Tok::Newline) | Some(Tok::Punct(";")) | Some(Tok::Punct("}"))
        );
        (self.pos, self.pending) = save;
        if !args_follow {
            return Ok(None);
        }
        let declared = if self.plugins.is_empty() {
            "this table declares no plugin".to_string()
        } else {
            let names: Vec<String> = self.plugins.iter().map(|p| format!("`{p}`")).collect();
            format!("this table declares {}", names.join(", "))
        };
        Ok(Some(self.st.error(
            span,
            format!(
                "unknown plugin `{word}` (declare it in the table: `plugin {word} {{ path \"{word}.wasm\"; }}`; {declared})"
            ),
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::distance;

    #[test]
    fn edit_distance() {
        assert_eq!(distance("geneve", "genev"), 1);
        assert_eq!(distance("geneve", "gneeve"), 2);
        assert_eq!(distance("ab", "ba"), 2);
        assert_eq!(distance("", "abc"), 3);
    }
}
