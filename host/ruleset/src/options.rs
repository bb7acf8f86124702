//! TCP options and SCTP chunks: type-length-value lists after a transport header, one table
//! each (the option or chunk type, its name and its fields, offsets in bits from the start of
//! the option or chunk). The parser, the printer and wasp-core's compiler read these tables.
//!
//! The kernel finds them the way `nft_exthdr_tcp_eval` and `nft_exthdr_sctp_eval` do: the
//! first option (chunk) of the type, walking from the end of the fixed header; a field of a
//! missing one fails to load (the rule stops), `exists`/`missing` read 1 or 0, and a packet of
//! another transport protocol stops the rule either way. nft 1.0.6 adds no dependency in front
//! (the kernel's expression checks the protocol).

use crate::model::{DataType, OptField, OptHeader, OptSel};
use crate::proto::FieldRow;

/// One option or chunk type.
#[derive(Debug, Clone, Copy)]
pub struct OptDesc {
    /// The name nft lists (`maxseg`, `sack1`, `init-ack`).
    pub name: &'static str,
    /// The type number (TCP option kind, SCTP chunk type).
    pub kind: u8,
    /// The fields, offsets from the start of the option or chunk.
    pub fields: &'static [FieldRow],
}

const fn f(name: &'static str, offset_bits: u16, len_bits: u16) -> FieldRow {
    FieldRow {
        name,
        offset_bits,
        len_bits,
        dtype: DataType::Integer(len_bits as u8),
        deps: &[],
        types: &[],
    }
}

const LEN: FieldRow = f("length", 8, 8);

/// TCP options (`tcp option NAME FIELD`), nft 1.0.6's `tcpopt.c`. `sack1`..`sack3` are the
/// second to fourth block of the `sack` option (kind 5).
pub static TCP_OPTIONS: &[OptDesc] = &[
    OptDesc {
        name: "eol",
        kind: 0,
        fields: &[],
    },
    OptDesc {
        name: "nop",
        kind: 1,
        fields: &[],
    },
    OptDesc {
        name: "maxseg",
        kind: 2,
        fields: &[LEN, f("size", 16, 16)],
    },
    OptDesc {
        name: "window",
        kind: 3,
        fields: &[LEN, f("count", 16, 8)],
    },
    OptDesc {
        name: "sack-perm",
        kind: 4,
        fields: &[LEN],
    },
    OptDesc {
        name: "sack",
        kind: 5,
        fields: &[LEN, f("left", 16, 32), f("right", 48, 32)],
    },
    OptDesc {
        name: "sack1",
        kind: 5,
        fields: &[LEN, f("left", 80, 32), f("right", 112, 32)],
    },
    OptDesc {
        name: "sack2",
        kind: 5,
        fields: &[LEN, f("left", 144, 32), f("right", 176, 32)],
    },
    OptDesc {
        name: "sack3",
        kind: 5,
        fields: &[LEN, f("left", 208, 32), f("right", 240, 32)],
    },
    OptDesc {
        name: "timestamp",
        kind: 8,
        fields: &[LEN, f("tsval", 16, 32), f("tsecr", 48, 32)],
    },
    OptDesc {
        name: "md5sig",
        kind: 19,
        fields: &[LEN],
    },
    OptDesc {
        name: "mptcp",
        kind: 30,
        fields: &[LEN, f("subtype", 16, 4)],
    },
    OptDesc {
        name: "fastopen",
        kind: 34,
        fields: &[LEN],
    },
];

/// Other names nft reads for TCP options: (alias, listed name).
pub const TCP_ALIASES: &[(&str, &str)] = &[("sack0", "sack"), ("sack-permitted", "sack-perm")];

const CH: [FieldRow; 3] = [f("type", 0, 8), f("flags", 8, 8), f("length", 16, 16)];

/// SCTP chunks (`sctp chunk NAME FIELD`), nft 1.0.6's `sctp_chunk.c`.
pub static SCTP_CHUNKS: &[OptDesc] = &[
    OptDesc {
        name: "data",
        kind: 0,
        fields: &[
            CH[0],
            CH[1],
            CH[2],
            f("tsn", 32, 32),
            f("stream", 64, 16),
            f("ssn", 80, 16),
            f("ppid", 96, 32),
        ],
    },
    OptDesc {
        name: "init",
        kind: 1,
        fields: &INIT,
    },
    OptDesc {
        name: "init-ack",
        kind: 2,
        fields: &INIT,
    },
    OptDesc {
        name: "sack",
        kind: 3,
        fields: &[
            CH[0],
            CH[1],
            CH[2],
            f("cum-tsn-ack", 32, 32),
            f("a-rwnd", 64, 32),
            f("num-gap-ack-blocks", 96, 16),
            f("num-dup-tsns", 112, 16),
        ],
    },
    OptDesc {
        name: "heartbeat",
        kind: 4,
        fields: &CH,
    },
    OptDesc {
        name: "heartbeat-ack",
        kind: 5,
        fields: &CH,
    },
    OptDesc {
        name: "abort",
        kind: 6,
        fields: &CH,
    },
    OptDesc {
        name: "shutdown",
        kind: 7,
        fields: &[CH[0], CH[1], CH[2], f("cum-tsn-ack", 32, 32)],
    },
    OptDesc {
        name: "shutdown-ack",
        kind: 8,
        fields: &CH,
    },
    OptDesc {
        name: "error",
        kind: 9,
        fields: &CH,
    },
    OptDesc {
        name: "cookie-echo",
        kind: 10,
        fields: &CH,
    },
    OptDesc {
        name: "cookie-ack",
        kind: 11,
        fields: &CH,
    },
    OptDesc {
        name: "ecne",
        kind: 12,
        fields: &[CH[0], CH[1], CH[2], f("lowest-tsn", 32, 32)],
    },
    OptDesc {
        name: "cwr",
        kind: 13,
        fields: &[CH[0], CH[1], CH[2], f("lowest-tsn", 32, 32)],
    },
    OptDesc {
        name: "shutdown-complete",
        kind: 14,
        fields: &CH,
    },
    OptDesc {
        name: "asconf-ack",
        kind: 128,
        fields: &[CH[0], CH[1], CH[2], f("seqno", 32, 32)],
    },
    OptDesc {
        name: "forward-tsn",
        kind: 192,
        fields: &[CH[0], CH[1], CH[2], f("new-cum-tsn", 32, 32)],
    },
    OptDesc {
        name: "asconf",
        kind: 193,
        fields: &[CH[0], CH[1], CH[2], f("seqno", 32, 32)],
    },
];

const INIT: [FieldRow; 8] = [
    CH[0],
    CH[1],
    CH[2],
    f("init-tag", 32, 32),
    f("a-rwnd", 64, 32),
    f("num-outbound-streams", 96, 16),
    f("num-inbound-streams", 112, 16),
    f("initial-tsn", 128, 32),
];

impl OptHeader {
    /// The table of this header's options or chunks.
    pub fn table(self) -> &'static [OptDesc] {
        match self {
            OptHeader::TcpOption => TCP_OPTIONS,
            OptHeader::SctpChunk => SCTP_CHUNKS,
        }
    }

    /// The words in front of the name: `tcp option`, `sctp chunk`.
    pub fn keyword(self) -> &'static str {
        match self {
            OptHeader::TcpOption => "tcp option",
            OptHeader::SctpChunk => "sctp chunk",
        }
    }

    /// The transport protocol number the list belongs to (6, 132).
    pub fn l4proto(self) -> u8 {
        match self {
            OptHeader::TcpOption => 6,
            OptHeader::SctpChunk => 132,
        }
    }

    /// Index of the option or chunk named `name` (aliases too).
    pub fn by_name(self, name: &str) -> Option<usize> {
        let name = match self {
            OptHeader::TcpOption => TCP_ALIASES
                .iter()
                .find(|(a, _)| *a == name)
                .map_or(name, |(_, n)| n),
            OptHeader::SctpChunk => name,
        };
        self.table().iter().position(|d| d.name == name)
    }
}

impl OptField {
    /// The option's or chunk's row, when it has a name (`None` for a type written as a
    /// number that has none).
    pub fn desc(&self) -> Option<&'static OptDesc> {
        self.hdr.table().get(usize::from(self.desc?))
    }

    /// Where the value is: offset and length in bits from the start of the option or chunk,
    /// and its data type; `exists`/`missing` is one bit, `boolean`.
    pub fn position(&self) -> (u16, u16, DataType) {
        match self.sel {
            OptSel::Exists => (0, 1, DataType::Boolean),
            OptSel::Field(i) => self
                .desc()
                .and_then(|d| d.fields.get(usize::from(i)))
                .map_or((0, 8, DataType::Integer(8)), |r| {
                    (r.offset_bits, r.len_bits, r.dtype)
                }),
            OptSel::Raw {
                offset_bits,
                len_bits,
            } => (
                offset_bits,
                len_bits,
                DataType::Integer(len_bits.clamp(1, 128) as u8),
            ),
        }
    }

    /// As nft lists it: `tcp option maxseg size`, `tcp option 6`, `tcp option @255,8,8`,
    /// `sctp chunk init flags`.
    pub fn text(&self) -> String {
        let kw = self.hdr.keyword();
        match self.sel {
            OptSel::Raw {
                offset_bits,
                len_bits,
            } => format!("{kw} @{},{offset_bits},{len_bits}", self.kind),
            OptSel::Exists => match self.desc() {
                Some(d) => format!("{kw} {}", d.name),
                None => format!("{kw} {}", self.kind),
            },
            OptSel::Field(i) => {
                let d = self.desc();
                let field = d
                    .and_then(|d| d.fields.get(usize::from(i)))
                    .map_or("?", |r| r.name);
                format!("{kw} {} {field}", d.map_or("?", |d| d.name))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_match_nft_bytecode() {
        // `tcp option sack1 left 1`: exthdr load tcpopt 4b @ 5 + 10.
        let i = OptHeader::TcpOption.by_name("sack1").unwrap();
        let d = &TCP_OPTIONS[i];
        assert_eq!((d.kind, d.fields[1].offset_bits / 8), (5, 10));
        // `tcp option timestamp tsecr`: 4b @ 8 + 6.
        let d = &TCP_OPTIONS[OptHeader::TcpOption.by_name("timestamp").unwrap()];
        assert_eq!(d.fields[2].offset_bits / 8, 6);
        assert_eq!(
            OptHeader::TcpOption.by_name("sack0"),
            OptHeader::TcpOption.by_name("sack")
        );
        // `sctp chunk init flags 23`: exthdr load 1b @ 1 + 1.
        let d = &SCTP_CHUNKS[OptHeader::SctpChunk.by_name("init").unwrap()];
        assert_eq!((d.kind, d.fields[1].offset_bits / 8), (1, 1));
    }
}
