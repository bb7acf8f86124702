//! The `log` statement: `log [prefix STRING] [group N [snaplen N] [queue-threshold N]]
//! [level LEVEL] [flags FLAGS]...`, as nft 1.0.6 reads it and the kernel's nft_log checks it.

use super::{PResult, Parser};
use crate::lexer::Tok;
use crate::model::{LogFlags, Span, Stmt};

/// Longest `log prefix` the kernel takes, in bytes (NF_LOG_PREFIXLEN 128 with the NUL).
const LOG_PREFIX_MAX: usize = 127;

/// Log levels nft accepts.
const LOG_LEVELS: &[&str] = &[
    "emerg", "alert", "crit", "err", "warn", "notice", "info", "debug", "audit",
];

impl Parser<'_> {
    /// `log ...` (the `log` word not yet taken), starting at `start`.
    pub(super) fn log_stmt(&mut self, start: Span) -> PResult<Stmt> {
        self.advance();
        let mut log = crate::model::LogStmt::default();
        loop {
            if self.eat_word("prefix")? {
                let pspan = self.peek_span()?;
                // nft takes an unquoted word too (`log prefix aaaa-aaa`).
                let p = match self.peek_tok()? {
                    Some(Tok::Str(p) | Tok::Word(p)) => {
                        self.advance();
                        p
                    }
                    _ => return self.expected("a quoted log prefix"),
                };
                // The kernel's NF_LOG_PREFIXLEN is 128 bytes with the final NUL: nft_log_init
                // answers ERANGE for a longer one.
                if p.len() > LOG_PREFIX_MAX {
                    return Err(self.st.error(
                        pspan,
                        format!(
                            "log prefix is {} bytes long, the kernel takes at most {LOG_PREFIX_MAX} (nft: Numerical result out of range)",
                            p.len()
                        ),
                    ));
                }
                log.prefix = Some(p);
            } else if self.eat_word("level")? {
                match self.peek_tok()? {
                    Some(Tok::Word(l)) if LOG_LEVELS.contains(&l.as_str()) => {
                        self.advance();
                        // `warn` is the default and nft does not list it.
                        log.level = (l != "warn").then_some(l);
                    }
                    _ => {
                        return self.expected(
                            "a log level (`emerg`, `alert`, `crit`, `err`, `warn`, `notice`, `info`, `debug`, `audit`)",
                        );
                    }
                }
            } else if self.eat_word("group")? {
                log.group = Some(self.log_number(u64::from(u16::MAX))? as u16);
            } else if self.eat_word("snaplen")? {
                log.snaplen = Some(self.log_number(u64::from(u32::MAX))? as u32);
            } else if self.eat_word("queue-threshold")? {
                log.queue_threshold = Some(self.log_number(u64::from(u16::MAX))? as u16);
            } else if self.eat_word("flags")? {
                log.flags.0 |= self.log_flags()?;
            } else {
                break;
            }
        }
        if log.level.as_deref() == Some("audit")
            && (log.prefix.is_some() || log.group.is_some() || log.flags.0 != 0)
        {
            // nft 1.0.6: an audit log takes no prefix, group or other option.
            return Err(self
                .st
                .error(start, "log level audit doesn't support any further options"));
        }
        // `snaplen` and `queue-threshold` belong to a group: with a level nft 1.0.6 refuses
        // them as it refuses a group.
        let grouped = log.group.is_some() || log.snaplen.is_some() || log.queue_threshold.is_some();
        if grouped && log.level.is_some() {
            // A group (nfnetlink_log) has no level.
            return Err(self
                .st
                .error(start, "level and group are mutually exclusive"));
        }
        if log.group.is_some() && log.flags.0 != 0 {
            return Err(self
                .st
                .error(start, "flags and group are mutually exclusive"));
        }
        if log.group.is_none() {
            // Without a group nft sends neither (and the listing has neither).
            log.snaplen = None;
            log.queue_threshold = None;
        }
        Ok(Stmt::Log(log))
    }

    fn log_number(&mut self, max: u64) -> PResult<u64> {
        let span = self.peek_span()?;
        let n = self.number_u64()?;
        if n > max {
            return Err(self
                .st
                .error(span, format!("value {n} exceeds valid range 0-{max}")));
        }
        Ok(n)
    }

    /// After `flags`: `all`, `skuid`, `ether`, `ip options`, `tcp sequence,options`.
    fn log_flags(&mut self) -> PResult<u8> {
        let word = |p: &mut Self| -> PResult<Option<String>> {
            Ok(match p.peek_tok()? {
                Some(Tok::Word(w)) => {
                    p.advance();
                    Some(w)
                }
                _ => None,
            })
        };
        let what = "log flags (`all`, `skuid`, `ether`, `ip options`, `tcp sequence,options`)";
        let first = match word(self)? {
            Some(w) => w,
            None => return self.expected(what),
        };
        Ok(match first.as_str() {
            "all" => LogFlags::ALL,
            "skuid" => LogFlags::UID,
            "ether" => LogFlags::MACDECODE,
            "ip" => {
                if !self.eat_word("options")? {
                    return self.expected("`options` after `ip`");
                }
                LogFlags::IPOPT
            }
            "tcp" => {
                let mut bits = 0;
                loop {
                    match self.peek_tok()? {
                        Some(Tok::Word(w)) if w == "sequence" => bits |= LogFlags::TCPSEQ,
                        Some(Tok::Word(w)) if w == "options" => bits |= LogFlags::TCPOPT,
                        _ => return self.expected("`sequence` or `options` after `tcp`"),
                    }
                    self.advance();
                    if !self.eat_punct(",")? {
                        break;
                    }
                }
                bits
            }
            _ => return self.expected(what),
        })
    }
}
