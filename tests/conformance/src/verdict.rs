//! The per-packet decision, in the form `wasp replay --verdicts` writes:
//! `<index> <accept|drop> <table> <chain> <rule handle or "policy">`, or
//! `<index> accept - - -` when no base chain saw the packet.

use std::fmt;

use crate::error::{Error, Result};

/// The final verdict of a packet at the ingress hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The packet goes on (NF_ACCEPT from every base chain that ran).
    Accept,
    /// The packet is dropped (NF_DROP from a rule or a policy).
    Drop,
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Verdict::Accept => "accept",
            Verdict::Drop => "drop",
        })
    }
}

/// What decided: a rule (by its kernel handle) or a base chain's policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The rule with this handle (handles are numbered per table, as `nft -a` shows them).
    Rule(u64),
    /// The chain's policy.
    Policy,
}

/// Where a decision was taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    /// Table name.
    pub table: String,
    /// Chain name (a regular chain when one of its rules decided).
    pub chain: String,
    /// Rule handle or policy.
    pub source: Source,
}

/// A packet's decision: for drop, the rule or policy that dropped it; for accept, the rule or
/// policy that accepted it in the last base chain that ran (`place` is `None` when no base
/// chain saw the packet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// The final verdict.
    pub verdict: Verdict,
    /// Where it was taken.
    pub place: Option<Place>,
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.place {
            None => write!(f, "{} - - -", self.verdict),
            Some(p) => {
                write!(f, "{} {} {} ", self.verdict, p.table, p.chain)?;
                match p.source {
                    Source::Rule(h) => write!(f, "{h}"),
                    Source::Policy => f.write_str("policy"),
                }
            }
        }
    }
}

/// Parses one verdict line (`<index> <decision>`) into its index (from 1) and decision.
///
/// # Errors
/// [`Error::VerdictLine`] when the line has not five fields of the expected kinds.
pub fn parse_line(line: &str) -> Result<(usize, Decision)> {
    let bad = |detail: &str| Error::VerdictLine {
        line: line.to_string(),
        detail: detail.to_string(),
    };
    let f: Vec<&str> = line.split_whitespace().collect();
    let [index, verdict, table, chain, source] = f[..] else {
        return Err(bad("expected 5 fields"));
    };
    let index: usize = index.parse().map_err(|_| bad("index is not a number"))?;
    let verdict = match verdict {
        "accept" => Verdict::Accept,
        "drop" => Verdict::Drop,
        _ => return Err(bad("verdict is not accept or drop")),
    };
    let place = if (table, chain, source) == ("-", "-", "-") {
        None
    } else {
        let source = if source == "policy" {
            Source::Policy
        } else {
            Source::Rule(
                source
                    .parse()
                    .map_err(|_| bad("last field is not a handle or \"policy\""))?,
            )
        };
        Some(Place {
            table: table.to_string(),
            chain: chain.to_string(),
            source,
        })
    };
    Ok((index, Decision { verdict, place }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        for line in ["1 drop t b 5", "2 accept t a policy", "3 accept - - -"] {
            let (i, d) = parse_line(line).unwrap();
            assert_eq!(format!("{i} {d}"), line);
        }
        let (_, d) = parse_line("7 drop filter in 12").unwrap();
        assert_eq!(d.verdict, Verdict::Drop);
        assert_eq!(d.place.unwrap().source, Source::Rule(12));
    }

    #[test]
    fn rejects_bad_lines() {
        assert!(parse_line("1 drop t b").is_err());
        assert!(parse_line("x drop t b 1").is_err());
        assert!(parse_line("1 reject t b 1").is_err());
        assert!(parse_line("1 drop t b rule").is_err());
    }
}
