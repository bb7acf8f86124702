//! The `--verdicts` file: one line per input packet,
//! `<index> <accept|drop> <table> <chain> <rule handle|policy>`, index counting from 1 across
//! all inputs in order; `<index> accept - - -` for a packet that no base chain saw. A packet
//! that entered on another device than the default input device (a multi-interface pcapng,
//! see [`crate::replay`](mod@crate::replay)) gets ` iif "DEV"` at the end of its line.

use std::io::{self, Write};

use wasp_core::{FinalVerdict, Outcome};

use crate::names::Names;

/// Format one verdict line (without its newline).
pub fn verdict_line(index: u64, outcome: &Outcome, names: &Names) -> String {
    let mut line = String::new();
    write_line(&mut line, index, outcome, names, None);
    line
}

/// Append the verdict line of packet `index` that entered on `iif` to `out` (without its
/// newline): [`verdict_line`], then ` iif "DEV"` when `iif` is given. What the `--verdicts`
/// file holds, and the comment of the packet's frames in a pcapng output.
pub fn write_line(
    out: &mut String,
    index: u64,
    outcome: &Outcome,
    names: &Names,
    iif: Option<&str>,
) {
    use std::fmt::Write as _;
    let verdict = match outcome.verdict {
        FinalVerdict::Accept => "accept",
        FinalVerdict::Drop => "drop",
    };
    let _ = match outcome.decision {
        None => write!(out, "{index} {verdict} - - -"),
        Some(d) => {
            let _ = write!(
                out,
                "{index} {verdict} {} {} ",
                names.table(d.table),
                names.chain(d.table, d.chain)
            );
            match d.rule {
                Some(h) => write!(out, "{h}"),
                None => write!(out, "policy"),
            }
        }
    };
    if let Some(dev) = iif {
        let _ = write!(out, " iif \"{dev}\"");
    }
}

/// Writes verdict lines to any [`Write`] (a file, or a `Vec<u8>` in tests).
#[derive(Debug)]
pub struct VerdictWriter<W: Write> {
    out: W,
    lines: u64,
}

impl<W: Write> VerdictWriter<W> {
    /// Wrap `out`.
    pub fn new(out: W) -> Self {
        VerdictWriter { out, lines: 0 }
    }

    /// Write the line of packet `index` (counted from 1).
    ///
    /// # Errors
    /// The writer's I/O error.
    pub fn write(&mut self, index: u64, outcome: &Outcome, names: &Names) -> io::Result<()> {
        self.write_on(index, outcome, names, None)
    }

    /// Write the line of packet `index` (counted from 1) that entered on device `iif`: the
    /// line gets ` iif "DEV"` at its end when `iif` is given (a packet of a multi-interface
    /// pcapng that entered on another device than the default input device).
    ///
    /// # Errors
    /// The writer's I/O error.
    pub fn write_on(
        &mut self,
        index: u64,
        outcome: &Outcome,
        names: &Names,
        iif: Option<&str>,
    ) -> io::Result<()> {
        let mut line = String::new();
        write_line(&mut line, index, outcome, names, iif);
        self.write_line(&line)
    }

    /// Write one line made by [`write_line`] (the newline is added).
    ///
    /// # Errors
    /// The writer's I/O error.
    pub fn write_line(&mut self, line: &str) -> io::Result<()> {
        self.lines += 1;
        writeln!(self.out, "{line}")
    }

    /// Lines written so far.
    pub fn lines(&self) -> u64 {
        self.lines
    }

    /// Flush and return the inner writer.
    ///
    /// # Errors
    /// The writer's I/O error.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasp_core::Decision;
    use wasp_ruleset::Ruleset;
    use wasp_ruleset::model::{Chain, Family, Span, Table};

    fn names() -> Names {
        let chain = |name: &str| Chain {
            name: name.to_string(),
            handle: 1,
            base: None,
            rules: Vec::new(),
            comment: None,
            span: Span::default(),
        };
        Names::new(&Ruleset {
            table_handle: 0,
            tables: vec![Table {
                next_handle: 0,
                family: Family::Netdev,
                name: "office".to_string(),
                handle: 1,
                chains: vec![chain("ingress"), chain("guest")],
                sets: Vec::new(),
                plugins: Vec::new(),
                counters: Vec::new(),
                quotas: Vec::new(),
                limits: Vec::new(),
                ct_objects: Vec::new(),
                flowtables: Vec::new(),
                comment: None,
                span: Span::default(),
            }],
            sources: Vec::new(),
        })
    }

    #[test]
    fn lines_for_rule_policy_and_unseen() {
        let n = names();
        let mut w = VerdictWriter::new(Vec::new());
        let rule = Outcome {
            verdict: FinalVerdict::Drop,
            decision: Some(Decision {
                table: 0,
                chain: 1,
                rule: Some(17),
            }),
            mark: 0,
            fwd: None,
            dup: 0,
            reject: None,
        };
        let policy = Outcome {
            verdict: FinalVerdict::Accept,
            decision: Some(Decision {
                table: 0,
                chain: 0,
                rule: None,
            }),
            mark: 0,
            fwd: None,
            dup: 0,
            reject: None,
        };
        let unseen = Outcome {
            verdict: FinalVerdict::Accept,
            decision: None,
            mark: 0,
            fwd: None,
            dup: 0,
            reject: None,
        };
        w.write(1, &rule, &n).unwrap();
        w.write(2, &policy, &n).unwrap();
        w.write(3, &unseen, &n).unwrap();
        assert_eq!(w.lines(), 3);
        let text = String::from_utf8(w.finish().unwrap()).unwrap();
        assert_eq!(
            text,
            "1 drop office guest 17\n2 accept office ingress policy\n3 accept - - -\n"
        );
    }
}
