//! Tokens of nft syntax.
//!
//! nft's own scanner decides what a run of characters is from context (an IPv6 address, a
//! MAC address, a range `1-5`, a name such as `nd-neighbor-solicit`). This lexer keeps such runs
//! whole as [`Tok::Word`]s; the parser gives them a meaning from the data type of the
//! expression they are compared with.

use crate::model::{FileId, Span};

/// One token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tok {
    /// A run of letters, digits and `_ . : / * -` (names, numbers, addresses, ranges).
    Word(String),
    /// `"..."` (the text between the quotes).
    Str(String),
    /// `$name`
    Var(String),
    /// `@name`
    SetRef(String),
    /// A punctuation sign: `{ } ( ) [ ] , ; = == != < > <= >= & | ^ . ! + -` (`[ ]` hold an
    /// IPv6 address before a port: `dnat ip6 to [2001:db8::1]:80`).
    Punct(&'static str),
    /// End of a line (a statement separator).
    Newline,
}

/// A token and where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    /// The token.
    pub tok: Tok,
    /// Its place.
    pub span: Span,
}

impl Tok {
    /// The token as it reads in a message: `` `accept` ``, `"eth0"`, `end of line`.
    pub fn describe(&self) -> String {
        match self {
            Tok::Word(w) => format!("`{w}`"),
            Tok::Str(s) => format!("\"{s}\""),
            Tok::Var(v) => format!("`${v}`"),
            Tok::SetRef(s) => format!("`@{s}`"),
            Tok::Punct(p) => format!("`{p}`"),
            Tok::Newline => "end of line".to_string(),
        }
    }
}

/// A lexing error: position and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LexError {
    /// Where.
    pub span: Span,
    /// What.
    pub message: String,
}

fn is_word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '/' | '*' | '-')
}

/// Split `text` (file `file`) into tokens. Comments (`#` to the end of the line) and
/// backslash-newline continuations are dropped.
///
/// # Errors
/// An unterminated string or a character nft does not know.
pub fn lex(text: &str, file: FileId) -> Result<Vec<Token>, LexError> {
    let mut out = Vec::with_capacity(text.len() / 4);
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    let mut line = 1u32;
    let mut line_start = 0usize;
    let span = |line: u32, line_start: usize, start: usize, end: usize| Span {
        file,
        line,
        col: (start - line_start + 1) as u32,
        len: (end - start).max(1) as u32,
    };
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\n' => {
                out.push(Token {
                    tok: Tok::Newline,
                    span: span(line, line_start, i, i + 1),
                });
                i += 1;
                line += 1;
                line_start = i;
            }
            ' ' | '\t' | '\r' => i += 1,
            '#' => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            '\\' if chars.get(i + 1) == Some(&'\n') => {
                i += 2;
                line += 1;
                line_start = i;
            }
            '"' => {
                let start = i;
                i += 1;
                let mut s = String::new();
                loop {
                    match chars.get(i) {
                        None | Some('\n') => {
                            return Err(LexError {
                                span: span(line, line_start, start, i),
                                message: "unterminated string: expected a closing `\"`".into(),
                            });
                        }
                        Some('"') => {
                            i += 1;
                            break;
                        }
                        Some(&ch) => {
                            s.push(ch);
                            i += 1;
                        }
                    }
                }
                out.push(Token {
                    tok: Tok::Str(s),
                    span: span(line, line_start, start, i),
                });
            }
            '$' | '@' => {
                let start = i;
                i += 1;
                let name_start = i;
                while i < chars.len()
                    && (chars[i].is_ascii_alphanumeric() || matches!(chars[i], '_' | '-' | '.'))
                {
                    i += 1;
                }
                // A trailing `.` belongs to a concatenation, not to the name.
                while i > name_start && chars[i - 1] == '.' {
                    i -= 1;
                }
                let name: String = chars[name_start..i].iter().collect();
                if name.is_empty() {
                    return Err(LexError {
                        span: span(line, line_start, start, i + 1),
                        message: format!("expected a name after `{c}`"),
                    });
                }
                out.push(Token {
                    tok: if c == '$' {
                        Tok::Var(name)
                    } else {
                        Tok::SetRef(name)
                    },
                    span: span(line, line_start, start, i),
                });
            }
            _ => {
                let start = i;
                let two: String = chars[i..chars.len().min(i + 2)].iter().collect();
                let punct2 = ["==", "!=", "<=", ">=", "<<", ">>"]
                    .into_iter()
                    .find(|p| *p == two);
                if let Some(p) = punct2 {
                    i += 2;
                    out.push(Token {
                        tok: Tok::Punct(p),
                        span: span(line, line_start, start, i),
                    });
                    continue;
                }
                // A `.` or `-` alone (between spaces) is an operator, not part of a word.
                let alone = |j: usize| chars.get(j).is_none_or(|c| !is_word_char(*c));
                if (c == '.' || c == '-') && alone(i + 1) && (i == 0 || alone(i - 1)) {
                    i += 1;
                    let p = if c == '.' { "." } else { "-" };
                    out.push(Token {
                        tok: Tok::Punct(p),
                        span: span(line, line_start, start, i),
                    });
                    continue;
                }
                if is_word_char(c) {
                    while i < chars.len() && is_word_char(chars[i]) {
                        i += 1;
                    }
                    // A word ending in one `:` or `.` (`22: accept`, `10.0.0.2. 80`) is the
                    // word, then that separator, as nft's scanner reads them; `fe80::` keeps
                    // its colons.
                    let end = match chars[start..i] {
                        [.., a, b] if matches!(b, ':' | '.') && a != b => i - 1,
                        _ => i,
                    };
                    out.push(Token {
                        tok: Tok::Word(chars[start..end].iter().collect()),
                        span: span(line, line_start, start, end),
                    });
                    if end < i {
                        out.push(Token {
                            tok: if chars[end] == ':' {
                                Tok::Word(":".into())
                            } else {
                                Tok::Punct(".")
                            },
                            span: span(line, line_start, end, i),
                        });
                    }
                    continue;
                }
                let p = match c {
                    '{' => "{",
                    '}' => "}",
                    '(' => "(",
                    ')' => ")",
                    ',' => ",",
                    ';' => ";",
                    '=' => "=",
                    '<' => "<",
                    '>' => ">",
                    '&' => "&",
                    '|' => "|",
                    '^' => "^",
                    '!' => "!",
                    '+' => "+",
                    '[' => "[",
                    ']' => "]",
                    _ => {
                        return Err(LexError {
                            span: span(line, line_start, start, start + 1),
                            message: format!("unexpected character `{c}`"),
                        });
                    }
                };
                i += 1;
                out.push(Token {
                    tok: Tok::Punct(p),
                    span: span(line, line_start, start, i),
                });
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<Tok> {
        lex(text, 0).unwrap().into_iter().map(|t| t.tok).collect()
    }

    #[test]
    fn addresses_ranges_and_concat_stay_apart() {
        assert_eq!(
            words("ip saddr . tcp dport { 10.0.0.1 . 22, fe80::1-fe80::5 }"),
            vec![
                Tok::Word("ip".into()),
                Tok::Word("saddr".into()),
                Tok::Punct("."),
                Tok::Word("tcp".into()),
                Tok::Word("dport".into()),
                Tok::Punct("{"),
                Tok::Word("10.0.0.1".into()),
                Tok::Punct("."),
                Tok::Word("22".into()),
                Tok::Punct(","),
                Tok::Word("fe80::1-fe80::5".into()),
                Tok::Punct("}"),
            ]
        );
    }

    #[test]
    fn a_trailing_colon_or_dot_is_its_own_token() {
        assert_eq!(
            words("{ 22: accept, 10.0.0.2. 80, fe80:: }"),
            vec![
                Tok::Punct("{"),
                Tok::Word("22".into()),
                Tok::Word(":".into()),
                Tok::Word("accept".into()),
                Tok::Punct(","),
                Tok::Word("10.0.0.2".into()),
                Tok::Punct("."),
                Tok::Word("80".into()),
                Tok::Punct(","),
                Tok::Word("fe80::".into()),
                Tok::Punct("}"),
            ]
        );
    }

    #[test]
    fn comments_strings_vars_and_positions() {
        let toks = lex("define x = \"eth0\" # c\n  iifname $x @s != 1", 0).unwrap();
        assert_eq!(toks[3].tok, Tok::Str("eth0".into()));
        assert_eq!(toks[4].tok, Tok::Newline);
        assert_eq!(toks[6].tok, Tok::Var("x".into()));
        assert_eq!(
            (toks[6].span.line, toks[6].span.col, toks[6].span.len),
            (2, 11, 2)
        );
        assert_eq!(toks[7].tok, Tok::SetRef("s".into()));
        assert_eq!(toks[8].tok, Tok::Punct("!="));
        assert_eq!(words("filter - 5")[1], Tok::Punct("-"));
        assert_eq!(words("-300"), vec![Tok::Word("-300".into())]);
        assert!(lex("\"abc", 0).is_err());
    }
}
