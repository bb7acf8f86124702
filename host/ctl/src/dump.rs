//! Rule dumps: `dump rules` (full) and `dump rules --brief`, streamed with bounded memory.
//!
//! **Full**: one [`Reply::Rule`] line per rule (family, table, chain, handle, packets, bytes and
//! the rule in nft syntax).
//!
//! **Brief** (tc's "terse dump": only what identifies a rule and what changes): each chain is
//! announced once by a [`Reply::Chain`] line (`{"chain":{"id":N,"family":..,"table":..,
//! "name":..}}`) before the first record that refers to it; then one record per rule:
//! - JSON encoding: one line per rule, the array `[chain, handle, packets, bytes, flags]`
//!   (integers, no spaces), formatted by hand;
//! - binary encoding: frames of up to [`RECORDS_PER_FRAME`] records, each frame a line
//!   `{"bin":N}` followed by exactly `N` bytes (`N` a multiple of [`RECORD_BYTES`]); a record
//!   is 32 bytes, little-endian: `chain: u32, flags: u32, handle: u64, packets: u64,
//!   bytes: u64` ([`Record`]).
//!
//! `flags`: bit 0 ([`FLAG_COUNTER`]) set when the rule has a counter (without one, packets and
//! bytes are 0 and mean nothing); other bits are 0 (reserved).
//!
//! The writer keeps one frame (32 KiB) and the sink's buffer: memory stays bounded for any
//! number of rules.

use std::io;

use wasp_ruleset::Ruleset;
use wasp_ruleset::model::{Rule, Stmt};

use crate::proto::{BriefEncoding, ChainInfo, DumpMode, Reply, RuleInfo};
use crate::server::ReplySink;

/// Bytes of one binary brief record.
pub const RECORD_BYTES: usize = 32;

/// Records per binary frame (a frame is at most `RECORD_BYTES * RECORDS_PER_FRAME` bytes).
pub const RECORDS_PER_FRAME: usize = 1024;

/// Record flag: the rule has a counter.
pub const FLAG_COUNTER: u32 = 1;

/// One rule of a brief dump.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Record {
    /// The chain's id, as its [`Reply::Chain`] line announced it.
    pub chain: u32,
    /// [`FLAG_COUNTER`], other bits 0.
    pub flags: u32,
    /// The rule's handle.
    pub handle: u64,
    /// Packets its counter counted.
    pub packets: u64,
    /// Bytes its counter counted.
    pub bytes: u64,
}

impl Record {
    /// The 32-byte little-endian form.
    pub fn encode(&self) -> [u8; RECORD_BYTES] {
        let mut b = [0u8; RECORD_BYTES];
        b[0..4].copy_from_slice(&self.chain.to_le_bytes());
        b[4..8].copy_from_slice(&self.flags.to_le_bytes());
        b[8..16].copy_from_slice(&self.handle.to_le_bytes());
        b[16..24].copy_from_slice(&self.packets.to_le_bytes());
        b[24..32].copy_from_slice(&self.bytes.to_le_bytes());
        b
    }

    /// Read a record from its 32-byte form (`None` when `b` is shorter).
    pub fn decode(b: &[u8]) -> Option<Record> {
        let b: &[u8; RECORD_BYTES] = b.get(..RECORD_BYTES)?.try_into().ok()?;
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u64_at = |i: usize| {
            let mut x = [0u8; 8];
            x.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(x)
        };
        Some(Record {
            chain: u32_at(0),
            flags: u32_at(4),
            handle: u64_at(8),
            packets: u64_at(16),
            bytes: u64_at(24),
        })
    }

    /// The JSON-encoding line (without newline): `[chain,handle,packets,bytes,flags]`.
    pub fn write_json(&self, out: &mut Vec<u8>) {
        out.push(b'[');
        push_u64(out, u64::from(self.chain));
        out.push(b',');
        push_u64(out, self.handle);
        out.push(b',');
        push_u64(out, self.packets);
        out.push(b',');
        push_u64(out, self.bytes);
        out.push(b',');
        push_u64(out, u64::from(self.flags));
        out.push(b']');
    }

    /// Parse a JSON-encoding line `[chain,handle,packets,bytes,flags]` (no spaces, as
    /// [`Record::write_json`] writes it). `None` for anything else.
    pub fn parse_json(line: &[u8]) -> Option<Record> {
        let inner = line.strip_prefix(b"[")?.strip_suffix(b"]")?;
        let mut it = inner.split(|&b| b == b',');
        let mut next = || parse_u64(it.next()?);
        let chain = u32::try_from(next()?).ok()?;
        let handle = next()?;
        let packets = next()?;
        let bytes = next()?;
        let flags = u32::try_from(next()?).ok()?;
        if it.next().is_some() {
            return None;
        }
        Some(Record {
            chain,
            flags,
            handle,
            packets,
            bytes,
        })
    }
}

/// Decimal digits of 00..99, two bytes each (the usual two-digits-at-a-time formatter).
const DIGITS: &[u8; 200] = b"0001020304050607080910111213141516171819\
2021222324252627282930313233343536373839\
4041424344454647484950515253545556575859\
6061626364656667686970717273747576777879\
8081828384858687888990919293949596979899";

/// Append `v` in decimal to `out`.
pub fn push_u64(out: &mut Vec<u8>, mut v: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    while v >= 100 {
        let d = (v % 100) as usize * 2;
        v /= 100;
        i -= 2;
        buf[i..i + 2].copy_from_slice(&DIGITS[d..d + 2]);
    }
    if v >= 10 {
        let d = v as usize * 2;
        i -= 2;
        buf[i..i + 2].copy_from_slice(&DIGITS[d..d + 2]);
    } else {
        i -= 1;
        buf[i] = b'0' + v as u8;
    }
    out.extend_from_slice(&buf[i..]);
}

/// A decimal `u64` (digits only, no sign, no leading `+`; at most 20 digits, no overflow).
pub fn parse_u64(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    let mut v: u64 = 0;
    for &c in s {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(d))?;
    }
    Some(v)
}

/// Writes a brief dump to a sink: chains announced once, records as JSON lines or binary
/// frames. Call [`BriefWriter::finish`] at the end (it sends the last frame).
pub struct BriefWriter<'s> {
    sink: &'s mut dyn ReplySink,
    encoding: BriefEncoding,
    frame: Vec<u8>,
    line: Vec<u8>,
    next_chain: u32,
    rules: u64,
}

impl<'s> BriefWriter<'s> {
    /// A writer over `sink`.
    pub fn new(sink: &'s mut dyn ReplySink, encoding: BriefEncoding) -> Self {
        BriefWriter {
            sink,
            encoding,
            frame: Vec::with_capacity(RECORD_BYTES * RECORDS_PER_FRAME),
            line: Vec::with_capacity(128),
            next_chain: 0,
            rules: 0,
        }
    }

    /// Announce a chain; the returned id goes into the records of its rules.
    ///
    /// # Errors
    /// The client has gone.
    pub fn chain(&mut self, family: &str, table: &str, name: &str) -> io::Result<u32> {
        self.flush_frame()?;
        let id = self.next_chain;
        self.next_chain += 1;
        self.sink.send(&Reply::Chain(ChainInfo {
            id,
            family: family.to_string(),
            table: table.to_string(),
            name: name.to_string(),
        }))?;
        Ok(id)
    }

    /// One rule.
    ///
    /// # Errors
    /// The client has gone.
    pub fn rule(&mut self, r: &Record) -> io::Result<()> {
        self.rules += 1;
        match self.encoding {
            BriefEncoding::Json => {
                self.line.clear();
                r.write_json(&mut self.line);
                self.sink.send_json_line(&self.line)
            }
            BriefEncoding::Binary => {
                self.frame.extend_from_slice(&r.encode());
                if self.frame.len() >= RECORD_BYTES * RECORDS_PER_FRAME {
                    self.flush_frame()?;
                }
                Ok(())
            }
        }
    }

    fn flush_frame(&mut self) -> io::Result<()> {
        if !self.frame.is_empty() {
            self.sink.send_binary(&self.frame)?;
            self.frame.clear();
        }
        Ok(())
    }

    /// Send what is pending; returns the number of rules written.
    ///
    /// # Errors
    /// The client has gone.
    pub fn finish(mut self) -> io::Result<u64> {
        self.flush_frame()?;
        Ok(self.rules)
    }
}

/// The packets and bytes of a rule's first `counter` statement, if it has one.
pub fn rule_counter(r: &Rule) -> Option<(u64, u64)> {
    r.stmts.iter().find_map(|s| match s {
        Stmt::Counter { packets, bytes } => Some((*packets, *bytes)),
        _ => None,
    })
}

/// One rule of a full dump: its [`Reply::Rule`] line.
///
/// # Errors
/// The client has gone.
pub fn full_rule(
    sink: &mut dyn ReplySink,
    family: &str,
    table: &str,
    chain: &str,
    r: &Rule,
) -> io::Result<()> {
    let (packets, bytes) = rule_counter(r).unwrap_or((0, 0));
    sink.send(&Reply::Rule(RuleInfo {
        family: family.to_string(),
        table: table.to_string(),
        chain: chain.to_string(),
        handle: r.handle,
        packets,
        bytes,
        text: crate::listing::rule_text(r, false),
    }))
}

/// Dump every rule of `ruleset` (its counters as the model holds them: the daemon writes the
/// live counts into the snapshot it dumps) to `sink`, in table, chain and rule order.
/// Returns the number of rules.
///
/// # Errors
/// The client has gone.
pub fn dump_ruleset(
    ruleset: &Ruleset,
    mode: DumpMode,
    encoding: BriefEncoding,
    sink: &mut dyn ReplySink,
) -> io::Result<u64> {
    match mode {
        DumpMode::Full => {
            let mut n = 0;
            for t in &ruleset.tables {
                for c in &t.chains {
                    for r in &c.rules {
                        full_rule(sink, t.family.name(), &t.name, &c.name, r)?;
                        n += 1;
                    }
                }
            }
            Ok(n)
        }
        DumpMode::Brief => {
            let mut w = BriefWriter::new(sink, encoding);
            for t in &ruleset.tables {
                for c in &t.chains {
                    if c.rules.is_empty() {
                        continue;
                    }
                    let id = w.chain(t.family.name(), &t.name, &c.name)?;
                    for r in &c.rules {
                        let counter = rule_counter(r);
                        let (packets, bytes) = counter.unwrap_or((0, 0));
                        w.rule(&Record {
                            chain: id,
                            flags: if counter.is_some() { FLAG_COUNTER } else { 0 },
                            handle: r.handle,
                            packets,
                            bytes,
                        })?;
                    }
                }
            }
            w.finish()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers() {
        for v in [
            0u64,
            7,
            10,
            99,
            100,
            12345,
            1_000_000,
            u64::from(u32::MAX),
            u64::MAX,
        ] {
            let mut out = Vec::new();
            push_u64(&mut out, v);
            assert_eq!(out, v.to_string().as_bytes());
            assert_eq!(parse_u64(&out), Some(v));
        }
        assert_eq!(parse_u64(b""), None);
        assert_eq!(parse_u64(b"-1"), None);
        assert_eq!(parse_u64(b"18446744073709551616"), None);
        assert_eq!(parse_u64(b"1 "), None);
    }

    #[test]
    fn record_forms() {
        let r = Record {
            chain: 3,
            flags: FLAG_COUNTER,
            handle: 0x0102_0304_0506_0708,
            packets: 42,
            bytes: u64::MAX,
        };
        let b = r.encode();
        assert_eq!(&b[0..4], &[3, 0, 0, 0]);
        assert_eq!(&b[4..8], &[1, 0, 0, 0]);
        assert_eq!(&b[8..16], &[8, 7, 6, 5, 4, 3, 2, 1]);
        assert_eq!(&b[24..32], &[0xff; 8]);
        assert_eq!(Record::decode(&b), Some(r));
        assert_eq!(Record::decode(&b[..31]), None);
        let mut line = Vec::new();
        r.write_json(&mut line);
        assert_eq!(
            String::from_utf8(line.clone()).unwrap(),
            "[3,72623859790382856,42,18446744073709551615,1]"
        );
        // It is JSON, too.
        let v: serde_json::Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(v[2], 42);
        assert_eq!(Record::parse_json(&line), Some(r));
        assert_eq!(Record::parse_json(b"[1,2,3,4]"), None);
        assert_eq!(Record::parse_json(b"[1,2,3,4,5,6]"), None);
        assert_eq!(Record::parse_json(b"{\"ok\":null}"), None);
    }
}
