//! Capture files in and out: pcap (microsecond and nanosecond magic numbers, either byte order)
//! and pcapng, read whole into memory and walked frame by frame; pcap written for the results.
//!
//! Only Ethernet captures are read (link type 1, `LINKTYPE_ETHERNET`); any other link type is
//! refused with an error that names it. Every fault names the file and the byte offset of the
//! record or block where it was found, and the frames before it stay usable: [`Frames`] yields
//! them one by one and the fault last.

use std::borrow::Cow;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapParser, PcapWriter};
use pcap_file::pcapng::{Block, PcapNgParser};
use pcap_file::{DataLink, Endianness, PcapError};

/// `LINKTYPE_ETHERNET`, the only link type wasp reads.
pub const LINKTYPE_ETHERNET: u32 = 1;

/// Largest captured length accepted for one record, in bytes (libpcap's `MAXIMUM_SNAPLEN`).
/// A record header claiming more is treated as corruption.
pub const MAX_RECORD_BYTES: u32 = 262_144;

/// Length of the pcap global header, in bytes.
const PCAP_HEADER_BYTES: usize = 24;
/// Length of a pcap record header, in bytes.
const PCAP_RECORD_HEADER_BYTES: usize = 16;
/// First four bytes of a pcapng file (the section header block type).
const PCAPNG_MAGIC: [u8; 4] = [0x0a, 0x0d, 0x0d, 0x0a];
/// pcap magic numbers as they appear in the file (big-endian reading of the first four bytes).
const PCAP_MAGICS: [u32; 4] = [0xa1b2_c3d4, 0xd4c3_b2a1, 0xa1b2_3c4d, 0x4d3c_b2a1];

/// A capture file that cannot be read, or that stops being a capture part way through.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CaptureError {
    /// The file could not be read or written.
    #[error("{path}: {message}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        message: String,
    },
    /// The file starts with neither a pcap nor a pcapng magic number.
    #[error(
        "{path}: not a capture file: byte offset 0 holds {found}, not a pcap or pcapng magic number"
    )]
    NotACapture {
        /// The file.
        path: PathBuf,
        /// The first bytes, in hex.
        found: String,
    },
    /// The file ends inside a header, record or block.
    #[error("{path}: truncated at byte offset {offset}: {what}")]
    Truncated {
        /// The file.
        path: PathBuf,
        /// Byte offset of the incomplete header, record or block.
        offset: u64,
        /// What was being read and how many bytes were missing.
        what: String,
    },
    /// A header, record or block holds an impossible value.
    #[error("{path}: corrupt at byte offset {offset}: {what}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// Byte offset of the bad header, record or block.
        offset: u64,
        /// What is wrong.
        what: String,
    },
    /// The capture's link type is not Ethernet.
    #[error(
        "{path}: link type {linktype} at byte offset {offset} is not Ethernet (1); wasp reads Ethernet captures only"
    )]
    LinkType {
        /// The file.
        path: PathBuf,
        /// Byte offset of the header or interface block that declares the link type.
        offset: u64,
        /// The link type found.
        linktype: u32,
    },
}

impl CaptureError {
    /// The file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            CaptureError::Io { path, .. }
            | CaptureError::NotACapture { path, .. }
            | CaptureError::Truncated { path, .. }
            | CaptureError::Corrupt { path, .. }
            | CaptureError::LinkType { path, .. } => path,
        }
    }
}

/// Container format of a capture file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// Classic pcap (libpcap's format).
    Pcap,
    /// pcapng.
    PcapNg,
}

impl Format {
    /// `pcap` or `pcapng`.
    pub fn name(self) -> &'static str {
        match self {
            Format::Pcap => "pcap",
            Format::PcapNg => "pcapng",
        }
    }
}

/// Resolution of a capture's timestamps (what the output pcap keeps).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TsResolution {
    /// Microseconds (pcap magic 0xa1b2c3d4, pcapng `if_tsresol` 6, the default).
    Micro,
    /// Nanoseconds or finer.
    Nano,
}

/// One frame of a capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame<'a> {
    /// Capture timestamp, nanoseconds since the Unix epoch.
    pub ts_ns: u64,
    /// The captured bytes (Ethernet header first).
    pub data: &'a [u8],
    /// Length of the frame on the wire, in bytes (at least `data.len()` in a sane capture).
    pub orig_len: u32,
    /// Byte offset of the frame's record or block in the file.
    pub offset: u64,
    /// Resolution of this frame's timestamp in the file.
    pub resolution: TsResolution,
    /// The device the frame was captured on: the `if_name` option of its pcapng interface
    /// (pcapng spec, Interface Description Block option 2, as `dumpcap -i trunk0 -i lan0`
    /// writes it), borrowed from the file. `None` in a classic pcap, for a simple packet
    /// block's interface without a name, and for an empty name.
    pub interface: Option<&'a str>,
}

/// A capture file held in memory.
#[derive(Debug, Clone)]
pub struct Capture {
    path: PathBuf,
    bytes: Vec<u8>,
}

impl Capture {
    /// Read the file at `path`.
    ///
    /// # Errors
    /// [`CaptureError::Io`] when it cannot be read.
    pub fn open(path: &Path) -> Result<Self, CaptureError> {
        let bytes = std::fs::read(path).map_err(|e| CaptureError::Io {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        Ok(Capture::from_bytes(path, bytes))
    }

    /// A capture from bytes already in memory; `path` names it in errors.
    pub fn from_bytes(path: &Path, bytes: Vec<u8>) -> Self {
        Capture {
            path: path.to_path_buf(),
            bytes,
        }
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Size of the file in bytes.
    pub fn len_bytes(&self) -> u64 {
        self.bytes.len() as u64
    }

    /// Start walking the frames: checks the file header (magic number, link type).
    ///
    /// # Errors
    /// [`CaptureError::NotACapture`], [`CaptureError::Truncated`] (a file shorter than its
    /// header), [`CaptureError::LinkType`] or [`CaptureError::Corrupt`].
    pub fn frames(&self) -> Result<Frames<'_>, CaptureError> {
        Frames::new(&self.path, &self.bytes)
    }
}

/// One pcapng interface: what its packets need to be read.
#[derive(Debug, Clone, Copy)]
struct Interface<'a> {
    /// `if_name`, when the block has a non-empty one.
    name: Option<&'a str>,
    linktype: u32,
    /// `if_tsresol`: bit 7 clear = 10^-n seconds, set = 2^-n seconds.
    tsresol: u8,
    /// `if_tsoffset`, seconds.
    tsoffset_s: u64,
    /// Captured-length limit (0 = none), used for simple packet blocks.
    snaplen: u32,
}

enum Reader<'a> {
    Pcap {
        parser: PcapParser,
        resolution: TsResolution,
    },
    PcapNg {
        parser: PcapNgParser,
        interfaces: Vec<Interface<'a>>,
    },
}

/// Iterator over the frames of a [`Capture`]: `Ok(frame)` for each frame in file order, then
/// at most one `Err` for a fault, after which it ends.
pub struct Frames<'a> {
    path: &'a Path,
    bytes: &'a [u8],
    pos: usize,
    reader: Reader<'a>,
    format: Format,
    done: bool,
}

impl std::fmt::Debug for Frames<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Frames")
            .field("path", &self.path)
            .field("pos", &self.pos)
            .field("format", &self.format)
            .finish_non_exhaustive()
    }
}

impl<'a> Frames<'a> {
    fn new(path: &'a Path, bytes: &'a [u8]) -> Result<Self, CaptureError> {
        if bytes.len() < 4 {
            return Err(CaptureError::NotACapture {
                path: path.to_path_buf(),
                found: if bytes.is_empty() {
                    "nothing (the file is empty)".to_string()
                } else {
                    hex(bytes)
                },
            });
        }
        let magic = [bytes[0], bytes[1], bytes[2], bytes[3]];
        if magic == PCAPNG_MAGIC {
            return Self::new_pcapng(path, bytes);
        }
        if PCAP_MAGICS.contains(&u32::from_be_bytes(magic)) {
            return Self::new_pcap(path, bytes);
        }
        Err(CaptureError::NotACapture {
            path: path.to_path_buf(),
            found: hex(&bytes[..4]),
        })
    }

    fn new_pcap(path: &'a Path, bytes: &'a [u8]) -> Result<Self, CaptureError> {
        if bytes.len() < PCAP_HEADER_BYTES {
            return Err(CaptureError::Truncated {
                path: path.to_path_buf(),
                offset: 0,
                what: format!(
                    "pcap file header needs {PCAP_HEADER_BYTES} bytes, the file has {}",
                    bytes.len()
                ),
            });
        }
        let (_, parser) = PcapParser::new(bytes).map_err(|e| CaptureError::Corrupt {
            path: path.to_path_buf(),
            offset: 0,
            what: format!("pcap file header: {e}"),
        })?;
        let header: PcapHeader = parser.header();
        // The link-type field's upper bits may carry FCS information (pcap spec, "LinkType and
        // additional information"): the link type itself is the low 16 bits.
        let raw = [bytes[20], bytes[21], bytes[22], bytes[23]];
        let field = match header.endianness {
            Endianness::Big => u32::from_be_bytes(raw),
            Endianness::Little => u32::from_le_bytes(raw),
        };
        let linktype = field & 0xffff;
        if linktype != LINKTYPE_ETHERNET {
            return Err(CaptureError::LinkType {
                path: path.to_path_buf(),
                offset: 20,
                linktype,
            });
        }
        let resolution = match header.ts_resolution {
            pcap_file::TsResolution::MicroSecond => TsResolution::Micro,
            pcap_file::TsResolution::NanoSecond => TsResolution::Nano,
        };
        Ok(Frames {
            path,
            bytes,
            pos: PCAP_HEADER_BYTES,
            reader: Reader::Pcap { parser, resolution },
            format: Format::Pcap,
            done: false,
        })
    }

    fn new_pcapng(path: &'a Path, bytes: &'a [u8]) -> Result<Self, CaptureError> {
        let (rest, parser) = PcapNgParser::new(bytes).map_err(|e| match e {
            PcapError::IncompleteBuffer => CaptureError::Truncated {
                path: path.to_path_buf(),
                offset: 0,
                what: "pcapng section header block is cut off".to_string(),
            },
            other => CaptureError::Corrupt {
                path: path.to_path_buf(),
                offset: 0,
                what: format!("pcapng section header block: {other}"),
            },
        })?;
        Ok(Frames {
            path,
            bytes,
            pos: bytes.len() - rest.len(),
            reader: Reader::PcapNg {
                parser,
                interfaces: Vec::new(),
            },
            format: Format::PcapNg,
            done: false,
        })
    }

    /// The container format.
    pub fn format(&self) -> Format {
        self.format
    }

    /// Byte offset of the next record or block (bytes consumed so far).
    pub fn offset(&self) -> u64 {
        self.pos as u64
    }

    /// Refuse a pcapng interface whose link type is not Ethernet (the block at `offset` uses it).
    fn ethernet(&self, iface: Interface<'_>, offset: u64) -> Result<(), CaptureError> {
        if iface.linktype == LINKTYPE_ETHERNET {
            return Ok(());
        }
        Err(CaptureError::LinkType {
            path: self.path.to_path_buf(),
            offset,
            linktype: iface.linktype,
        })
    }

    fn fail(&mut self, err: CaptureError) -> Option<Result<Frame<'a>, CaptureError>> {
        self.done = true;
        Some(Err(err))
    }

    fn next_pcap(&mut self) -> Option<Result<Frame<'a>, CaptureError>> {
        let Reader::Pcap { parser, resolution } = &self.reader else {
            return None;
        };
        let resolution = *resolution;
        let rest = &self.bytes[self.pos..];
        if rest.is_empty() {
            self.done = true;
            return None;
        }
        let offset = self.pos as u64;
        if rest.len() < PCAP_RECORD_HEADER_BYTES {
            let err = CaptureError::Truncated {
                path: self.path.to_path_buf(),
                offset,
                what: format!(
                    "record header needs {PCAP_RECORD_HEADER_BYTES} bytes, {} left",
                    rest.len()
                ),
            };
            return self.fail(err);
        }
        // The raw record: its lengths are checked here rather than by pcap-file, which refuses
        // an original length above the snap length (normal in a capture taken with -s).
        let incl_len = {
            let b = [rest[8], rest[9], rest[10], rest[11]];
            match parser.header().endianness {
                Endianness::Big => u32::from_be_bytes(b),
                Endianness::Little => u32::from_le_bytes(b),
            }
        };
        if incl_len > MAX_RECORD_BYTES {
            let err = CaptureError::Corrupt {
                path: self.path.to_path_buf(),
                offset,
                what: format!(
                    "record claims {incl_len} captured bytes (more than {MAX_RECORD_BYTES})"
                ),
            };
            return self.fail(err);
        }
        match parser.next_raw_packet(rest) {
            Ok((after, raw)) => {
                self.pos = self.bytes.len() - after.len();
                let frac_ns = match resolution {
                    TsResolution::Micro => u64::from(raw.ts_frac) * 1_000,
                    TsResolution::Nano => u64::from(raw.ts_frac),
                };
                let data = match raw.data {
                    Cow::Borrowed(d) => d,
                    // pcap-file borrows from the slice it is given; an owned buffer would be a
                    // change in that crate.
                    Cow::Owned(_) => &[],
                };
                Some(Ok(Frame {
                    ts_ns: u64::from(raw.ts_sec) * 1_000_000_000 + frac_ns,
                    data,
                    orig_len: raw.orig_len,
                    offset,
                    resolution,
                    interface: None,
                }))
            }
            Err(PcapError::IncompleteBuffer) => {
                let err = CaptureError::Truncated {
                    path: self.path.to_path_buf(),
                    offset,
                    what: format!(
                        "record holds {incl_len} captured bytes, only {} left after its header",
                        rest.len() - PCAP_RECORD_HEADER_BYTES
                    ),
                };
                self.fail(err)
            }
            Err(e) => {
                let err = CaptureError::Corrupt {
                    path: self.path.to_path_buf(),
                    offset,
                    what: e.to_string(),
                };
                self.fail(err)
            }
        }
    }

    fn next_pcapng(&mut self) -> Option<Result<Frame<'a>, CaptureError>> {
        loop {
            let Reader::PcapNg { parser, interfaces } = &mut self.reader else {
                return None;
            };
            let rest = &self.bytes[self.pos..];
            if rest.is_empty() {
                self.done = true;
                return None;
            }
            let offset = self.pos as u64;
            let (after, block) = match parser.next_block(rest) {
                Ok(x) => x,
                Err(PcapError::IncompleteBuffer) => {
                    let err = CaptureError::Truncated {
                        path: self.path.to_path_buf(),
                        offset,
                        what: format!("pcapng block is cut off ({} bytes left)", rest.len()),
                    };
                    return self.fail(err);
                }
                Err(e) => {
                    let err = CaptureError::Corrupt {
                        path: self.path.to_path_buf(),
                        offset,
                        what: format!("pcapng block: {e}"),
                    };
                    return self.fail(err);
                }
            };
            self.pos = self.bytes.len() - after.len();
            match block {
                Block::SectionHeader(_) => interfaces.clear(),
                Block::InterfaceDescription(idb) => {
                    let linktype = u32::from(idb.linktype);
                    let mut iface = Interface {
                        name: None,
                        linktype,
                        tsresol: 6,
                        tsoffset_s: 0,
                        snaplen: idb.snaplen,
                    };
                    for opt in &idb.options {
                        use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionOption as O;
                        match opt {
                            O::IfTsResol(r) => iface.tsresol = *r,
                            O::IfTsOffset(s) => iface.tsoffset_s = *s,
                            // pcap-file borrows the name from the block (an owned name would
                            // be a change in that crate); NUL padding some writers leave is
                            // not part of it.
                            O::IfName(Cow::Borrowed(n)) => {
                                let n = n.trim_end_matches('\0');
                                iface.name = (!n.is_empty()).then_some(n);
                            }
                            _ => {}
                        }
                    }
                    interfaces.push(iface);
                }
                Block::EnhancedPacket(epb) => {
                    let Some(iface) = interfaces.get(epb.interface_id as usize).copied() else {
                        let err = CaptureError::Corrupt {
                            path: self.path.to_path_buf(),
                            offset,
                            what: unknown_interface(epb.interface_id, interfaces.len()),
                        };
                        return self.fail(err);
                    };
                    if let Err(err) = self.ethernet(iface, offset) {
                        return self.fail(err);
                    }
                    // pcap-file 2 stores the raw timestamp units as nanoseconds; the units are
                    // the interface's `if_tsresol`.
                    let units = epb.timestamp.as_nanos();
                    let data = match epb.data {
                        Cow::Borrowed(d) => d,
                        Cow::Owned(_) => &[],
                    };
                    return Some(Ok(Frame {
                        ts_ns: ts_to_ns(units, iface.tsresol, iface.tsoffset_s),
                        data,
                        orig_len: epb.original_len,
                        offset,
                        resolution: if iface.tsresol == 6 {
                            TsResolution::Micro
                        } else {
                            TsResolution::Nano
                        },
                        interface: iface.name,
                    }));
                }
                Block::SimplePacket(spb) => {
                    let Some(iface) = interfaces.first().copied() else {
                        let err = CaptureError::Corrupt {
                            path: self.path.to_path_buf(),
                            offset,
                            what: "simple packet block before any interface description"
                                .to_string(),
                        };
                        return self.fail(err);
                    };
                    if let Err(err) = self.ethernet(iface, offset) {
                        return self.fail(err);
                    }
                    let body = match spb.data {
                        Cow::Borrowed(d) => d,
                        Cow::Owned(_) => &[],
                    };
                    // The body is padded to 4 bytes; the captured length is the smallest of the
                    // original length, the snap length and the body (pcapng spec, SPB).
                    let mut caplen = body.len().min(spb.original_len as usize);
                    if iface.snaplen != 0 {
                        caplen = caplen.min(iface.snaplen as usize);
                    }
                    return Some(Ok(Frame {
                        ts_ns: 0,
                        data: &body[..caplen],
                        orig_len: spb.original_len,
                        offset,
                        resolution: TsResolution::Micro,
                        interface: iface.name,
                    }));
                }
                Block::Packet(pb) => {
                    let Some(iface) = interfaces.get(usize::from(pb.interface_id)).copied() else {
                        let err = CaptureError::Corrupt {
                            path: self.path.to_path_buf(),
                            offset,
                            what: unknown_interface(u32::from(pb.interface_id), interfaces.len()),
                        };
                        return self.fail(err);
                    };
                    if let Err(err) = self.ethernet(iface, offset) {
                        return self.fail(err);
                    }
                    let data = match pb.data {
                        Cow::Borrowed(d) => d,
                        Cow::Owned(_) => &[],
                    };
                    return Some(Ok(Frame {
                        ts_ns: ts_to_ns(u128::from(pb.timestamp), iface.tsresol, iface.tsoffset_s),
                        data,
                        orig_len: pb.original_len,
                        offset,
                        resolution: if iface.tsresol == 6 {
                            TsResolution::Micro
                        } else {
                            TsResolution::Nano
                        },
                        interface: iface.name,
                    }));
                }
                // Name resolution, statistics, journal and unknown blocks carry no packets.
                _ => {}
            }
        }
    }
}

impl<'a> Iterator for Frames<'a> {
    type Item = Result<Frame<'a>, CaptureError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.format {
            Format::Pcap => self.next_pcap(),
            Format::PcapNg => self.next_pcapng(),
        }
    }
}

/// Convert a pcapng timestamp in `if_tsresol` units (bit 7 clear: 10^-n s; set: 2^-n s) plus
/// `if_tsoffset` seconds into nanoseconds since the epoch, saturating at `u64::MAX`.
fn ts_to_ns(units: u128, tsresol: u8, tsoffset_s: u64) -> u64 {
    let n = u32::from(tsresol & 0x7f);
    let ns: u128 = if tsresol & 0x80 == 0 {
        if n <= 9 {
            units.saturating_mul(10u128.pow(9 - n))
        } else {
            units / 10u128.checked_pow(n - 9).unwrap_or(u128::MAX)
        }
    } else if n < 128 {
        // units / 2^n seconds = units * 1e9 / 2^n ns.
        units.saturating_mul(1_000_000_000) >> n
    } else {
        0
    };
    let total = ns.saturating_add(u128::from(tsoffset_s) * 1_000_000_000);
    u64::try_from(total).unwrap_or(u64::MAX)
}

fn hex(bytes: &[u8]) -> String {
    let mut s = String::from("0x");
    for b in bytes.iter().take(4) {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// A pcap file being written: Ethernet link type, little-endian, timestamps at the resolution
/// chosen at creation.
pub struct CaptureWriter {
    path: PathBuf,
    writer: PcapWriter<BufWriter<File>>,
    packets: u64,
}

impl std::fmt::Debug for CaptureWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaptureWriter")
            .field("path", &self.path)
            .field("packets", &self.packets)
            .finish_non_exhaustive()
    }
}

impl CaptureWriter {
    /// Create (or truncate) `path` and write the pcap file header.
    ///
    /// # Errors
    /// [`CaptureError::Io`] when the file cannot be created or written.
    pub fn create(path: &Path, resolution: TsResolution) -> Result<Self, CaptureError> {
        let io = |e: &dyn std::fmt::Display| CaptureError::Io {
            path: path.to_path_buf(),
            message: e.to_string(),
        };
        let file = File::create(path).map_err(|e| io(&e))?;
        let header = PcapHeader {
            version_major: 2,
            version_minor: 4,
            ts_correction: 0,
            ts_accuracy: 0,
            snaplen: MAX_RECORD_BYTES,
            datalink: DataLink::ETHERNET,
            ts_resolution: match resolution {
                TsResolution::Micro => pcap_file::TsResolution::MicroSecond,
                TsResolution::Nano => pcap_file::TsResolution::NanoSecond,
            },
            endianness: Endianness::Little,
        };
        let writer = PcapWriter::with_header(BufWriter::new(file), header).map_err(|e| io(&e))?;
        Ok(CaptureWriter {
            path: path.to_path_buf(),
            writer,
            packets: 0,
        })
    }

    /// Append one frame with its timestamp and original length.
    ///
    /// # Errors
    /// [`CaptureError::Io`] on a write error, or a timestamp past the year 2106 (pcap keeps
    /// 32-bit seconds).
    pub fn write(&mut self, frame: &Frame<'_>) -> Result<(), CaptureError> {
        let orig_len = frame.orig_len.max(frame.data.len() as u32);
        let pkt = PcapPacket::new(Duration::from_nanos(frame.ts_ns), orig_len, frame.data);
        self.writer
            .write_packet(&pkt)
            .map_err(|e| CaptureError::Io {
                path: self.path.clone(),
                message: e.to_string(),
            })?;
        self.packets += 1;
        Ok(())
    }

    /// Number of frames written so far.
    pub fn packets(&self) -> u64 {
        self.packets
    }

    /// Flush buffered bytes to the file.
    ///
    /// # Errors
    /// [`CaptureError::Io`] on a write error.
    pub fn finish(self) -> Result<(), CaptureError> {
        let path = self.path;
        self.writer
            .into_writer()
            .flush()
            .map_err(|e| CaptureError::Io {
                path,
                message: e.to_string(),
            })
    }
}

/// Build a classic pcap file in memory (microsecond timestamps, little-endian, Ethernet) from
/// `(ts_ns, frame)` pairs. Used by tests and by the traffic generator's callers.
pub fn pcap_bytes(frames: &[(u64, &[u8])]) -> Vec<u8> {
    let mut out = Vec::with_capacity(24 + frames.iter().map(|f| 16 + f.1.len()).sum::<usize>());
    out.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&4u16.to_le_bytes());
    out.extend_from_slice(&0i32.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&MAX_RECORD_BYTES.to_le_bytes());
    out.extend_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
    for (ts_ns, data) in frames {
        let secs = (ts_ns / 1_000_000_000) as u32;
        let usecs = ((ts_ns % 1_000_000_000) / 1_000) as u32;
        out.extend_from_slice(&secs.to_le_bytes());
        out.extend_from_slice(&usecs.to_le_bytes());
        out.extend_from_slice(&(data.len() as u32).to_le_bytes());
        out.extend_from_slice(&(data.len() as u32).to_le_bytes());
        out.extend_from_slice(data);
    }
    out
}

/// One frame for [`pcapng_bytes`] / [`write_pcapng`]: (index into the interface list,
/// capture timestamp in nanoseconds since the Unix epoch, the Ethernet frame).
pub type PcapNgFrame<'a> = (u32, u64, &'a [u8]);

/// Build a pcapng file in memory as `dumpcap -i A -i B` records one: a section header, one
/// Interface Description Block per entry of `interfaces` (Ethernet, snap length
/// [`MAX_RECORD_BYTES`], `if_tsresol` 9 so timestamps keep nanoseconds, and an `if_name`
/// option holding the name; an empty name gets no `if_name` option), then one Enhanced Packet
/// Block per frame, in the order given, naming its interface by index (original length = the
/// frame's length). Little-endian.
///
/// # Errors
/// A message when a frame names an interface index not in `interfaces`, or a frame is longer
/// than [`MAX_RECORD_BYTES`].
pub fn pcapng_bytes(interfaces: &[&str], frames: &[PcapNgFrame<'_>]) -> Result<Vec<u8>, String> {
    use pcap_file::pcapng::PcapNgWriter;
    use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
    use pcap_file::pcapng::blocks::interface_description::{
        InterfaceDescriptionBlock, InterfaceDescriptionOption,
    };
    for (i, &(iface, _, data)) in frames.iter().enumerate() {
        if iface as usize >= interfaces.len() {
            return Err(format!(
                "frame {i} names interface {iface} but {} interfaces are given",
                interfaces.len()
            ));
        }
        if data.len() > MAX_RECORD_BYTES as usize {
            return Err(format!(
                "frame {i} holds {} bytes (more than {MAX_RECORD_BYTES})",
                data.len()
            ));
        }
    }
    let err = |e: PcapError| e.to_string();
    let mut w = PcapNgWriter::with_endianness(Vec::new(), Endianness::Little).map_err(err)?;
    for name in interfaces {
        let mut options = vec![InterfaceDescriptionOption::IfTsResol(9)];
        if !name.is_empty() {
            options.insert(0, InterfaceDescriptionOption::IfName(Cow::Borrowed(name)));
        }
        w.write_pcapng_block(InterfaceDescriptionBlock {
            linktype: DataLink::ETHERNET,
            snaplen: MAX_RECORD_BYTES,
            options,
        })
        .map_err(err)?;
    }
    for &(iface, ts_ns, data) in frames {
        w.write_pcapng_block(EnhancedPacketBlock {
            interface_id: iface,
            timestamp: Duration::from_nanos(ts_ns),
            original_len: data.len() as u32,
            data: Cow::Borrowed(data),
            options: Vec::new(),
        })
        .map_err(err)?;
    }
    Ok(w.into_inner())
}

/// Write the pcapng file [`pcapng_bytes`] builds to `path` (created or truncated): a
/// multi-interface capture whose packets `wasp replay` enters on the devices their interfaces
/// name (see [`crate::replay`](mod@crate::replay)). Used by tests to generate sample captures, e.g.
/// `write_pcapng(path, &["trunk0", "lan0"], &[(0, ts, &geneve_frame), (1, ts + 1000, &reply)])`.
///
/// # Errors
/// [`CaptureError::Io`] when the file cannot be written, or (with the path and the message of
/// [`pcapng_bytes`]) when a frame names an interface not in `interfaces`.
pub fn write_pcapng(
    path: &Path,
    interfaces: &[&str],
    frames: &[PcapNgFrame<'_>],
) -> Result<(), CaptureError> {
    let io = |message: String| CaptureError::Io {
        path: path.to_path_buf(),
        message,
    };
    let bytes = pcapng_bytes(interfaces, frames).map_err(io)?;
    std::fs::write(path, bytes).map_err(|e| io(e.to_string()))
}

/// "packet names interface N but ..." for a pcapng packet whose interface has no
/// Interface Description Block before it.
fn unknown_interface(id: u32, described: usize) -> String {
    match described {
        0 => format!("packet names interface {id} but no interface is described before it"),
        1 => format!("packet names interface {id} but only interface 0 is described"),
        n => format!(
            "packet names interface {id} but only interfaces 0 to {} are described",
            n - 1
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (timestamp ns, bytes, offset) of each frame read.
    type Read = Vec<(u64, Vec<u8>, u64)>;

    fn frames_of(bytes: Vec<u8>) -> (Read, Option<CaptureError>) {
        read_all(bytes, "t.pcap", |f| (f.ts_ns, f.data.to_vec(), f.offset))
    }

    /// Every frame of `bytes` (a capture named `name`) as `each` makes it, and the fault.
    fn read_all<T>(
        bytes: Vec<u8>,
        name: &str,
        each: impl Fn(Frame<'_>) -> T,
    ) -> (Vec<T>, Option<CaptureError>) {
        let cap = Capture::from_bytes(Path::new(name), bytes);
        let mut ok = Vec::new();
        let mut err = None;
        match cap.frames() {
            Err(e) => err = Some(e),
            Ok(frames) => {
                for f in frames {
                    match f {
                        Ok(f) => ok.push(each(f)),
                        Err(e) => err = Some(e),
                    }
                }
            }
        }
        (ok, err)
    }

    #[test]
    fn pcap_round_trip_and_offsets() {
        let a = [1u8; 20];
        let b = [2u8; 30];
        let bytes = pcap_bytes(&[
            (1_500_000_000_123_456_000, &a),
            (1_500_000_001_000_001_000, &b),
        ]);
        let (ok, err) = frames_of(bytes);
        assert_eq!(err, None);
        assert_eq!(ok.len(), 2);
        assert_eq!(ok[0], (1_500_000_000_123_456_000, a.to_vec(), 24));
        assert_eq!(ok[1], (1_500_000_001_000_001_000, b.to_vec(), 24 + 16 + 20));
    }

    #[test]
    fn truncated_record_names_its_offset() {
        let a = [1u8; 20];
        let b = [2u8; 30];
        let mut bytes = pcap_bytes(&[(0, &a), (0, &b)]);
        bytes.truncate(bytes.len() - 5);
        let (ok, err) = frames_of(bytes);
        assert_eq!(ok.len(), 1);
        assert_eq!(
            err.unwrap().to_string(),
            "t.pcap: truncated at byte offset 60: record holds 30 captured bytes, only 25 left after its header"
        );
    }

    #[test]
    fn truncated_record_header() {
        let a = [1u8; 20];
        let mut bytes = pcap_bytes(&[(0, &a)]);
        bytes.extend_from_slice(&[0; 7]);
        let (ok, err) = frames_of(bytes);
        assert_eq!(ok.len(), 1);
        assert_eq!(
            err.unwrap().to_string(),
            "t.pcap: truncated at byte offset 60: record header needs 16 bytes, 7 left"
        );
    }

    #[test]
    fn not_a_capture() {
        let (_, err) = frames_of(b"hello world".to_vec());
        assert_eq!(
            err.unwrap().to_string(),
            "t.pcap: not a capture file: byte offset 0 holds 0x68656c6c, not a pcap or pcapng magic number"
        );
        let (_, err) = frames_of(Vec::new());
        assert!(matches!(err, Some(CaptureError::NotACapture { .. })));
    }

    #[test]
    fn other_link_type_is_refused() {
        let mut bytes = pcap_bytes(&[]);
        bytes[20] = 101; // LINKTYPE_RAW
        let (_, err) = frames_of(bytes);
        assert_eq!(
            err,
            Some(CaptureError::LinkType {
                path: PathBuf::from("t.pcap"),
                offset: 20,
                linktype: 101
            })
        );
    }

    #[test]
    fn fcs_bits_in_link_type_are_ignored() {
        let a = [1u8; 20];
        let mut bytes = pcap_bytes(&[(0, &a)]);
        // FCS length 4 (bits 28..31) and the F bit, as in tcpdump's udp-length-heapoverflow.pcap.
        bytes[23] = 0x50;
        let (ok, err) = frames_of(bytes);
        assert_eq!(err, None);
        assert_eq!(ok.len(), 1);
    }

    #[test]
    fn big_endian_nanosecond_pcap() {
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&0xa1b2_3c4du32.to_be_bytes());
        bytes.extend_from_slice(&2u16.to_be_bytes());
        bytes.extend_from_slice(&4u16.to_be_bytes());
        bytes.extend_from_slice(&[0; 8]);
        bytes.extend_from_slice(&65535u32.to_be_bytes());
        bytes.extend_from_slice(&1u32.to_be_bytes());
        bytes.extend_from_slice(&7u32.to_be_bytes());
        bytes.extend_from_slice(&999_999_999u32.to_be_bytes());
        bytes.extend_from_slice(&3u32.to_be_bytes());
        bytes.extend_from_slice(&1500u32.to_be_bytes());
        bytes.extend_from_slice(&[9, 8, 7]);
        let (ok, err) = frames_of(bytes);
        assert_eq!(err, None);
        assert_eq!(ok, vec![(7_999_999_999, vec![9, 8, 7], 24)]);
    }

    #[test]
    fn pcapng_timestamp_units() {
        assert_eq!(ts_to_ns(1_000_000, 6, 0), 1_000_000_000);
        assert_eq!(ts_to_ns(5, 9, 0), 5);
        assert_eq!(ts_to_ns(1234, 3, 10), 11_234_000_000);
        assert_eq!(ts_to_ns(1 << 20, 0x80 | 20, 0), 1_000_000_000);
        assert_eq!(ts_to_ns(12_345, 12, 0), 12);
    }

    #[test]
    fn unknown_interface_wording() {
        assert_eq!(
            unknown_interface(0, 0),
            "packet names interface 0 but no interface is described before it"
        );
        assert_eq!(
            unknown_interface(3, 1),
            "packet names interface 3 but only interface 0 is described"
        );
        assert_eq!(
            unknown_interface(5, 2),
            "packet names interface 5 but only interfaces 0 to 1 are described"
        );
    }

    /// (interface name, timestamp ns, bytes) of each frame read.
    type Named = Vec<(Option<String>, u64, Vec<u8>)>;

    /// The frames read with their interface names, and the fault.
    fn named_frames(bytes: Vec<u8>) -> (Named, Option<CaptureError>) {
        read_all(bytes, "t.pcapng", |f| {
            (f.interface.map(str::to_string), f.ts_ns, f.data.to_vec())
        })
    }

    fn position(hay: &[u8], needle: &[u8]) -> usize {
        hay.windows(needle.len()).position(|w| w == needle).unwrap()
    }

    #[test]
    fn pcapng_interface_names_per_packet() {
        let a = [1u8; 60];
        let b = [2u8; 61];
        let c = [3u8; 62];
        let bytes = pcapng_bytes(
            &["trunk0", "lan0", ""],
            &[
                (0, 1_700_000_000_000_000_001, &a),
                (1, 1_700_000_000_000_000_502, &b),
                (2, 1_700_000_000_000_001_003, &c),
                (0, 1_700_000_000_000_002_004, &a),
            ],
        )
        .unwrap();
        let (ok, err) = named_frames(bytes);
        assert_eq!(err, None);
        assert_eq!(
            ok,
            vec![
                (
                    Some("trunk0".to_string()),
                    1_700_000_000_000_000_001,
                    a.to_vec()
                ),
                (
                    Some("lan0".to_string()),
                    1_700_000_000_000_000_502,
                    b.to_vec()
                ),
                (None, 1_700_000_000_000_001_003, c.to_vec()),
                (
                    Some("trunk0".to_string()),
                    1_700_000_000_000_002_004,
                    a.to_vec()
                ),
            ]
        );
        let cap = Capture::from_bytes(Path::new("t"), pcapng_bytes(&["x"], &[(0, 5, &a)]).unwrap());
        let f = cap.frames().unwrap().next().unwrap().unwrap();
        assert_eq!((f.resolution, f.orig_len), (TsResolution::Nano, 60));
    }

    #[test]
    fn pcapng_writer_refuses_an_undescribed_interface() {
        let a = [1u8; 60];
        assert_eq!(
            pcapng_bytes(&["lan0"], &[(1, 0, &a)]),
            Err("frame 0 names interface 1 but 1 interfaces are given".to_string())
        );
        let dir = std::env::temp_dir().join(format!("wasp-capture-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("two.pcapng");
        write_pcapng(&path, &["lan0", "wan0"], &[(1, 7_000, &a)]).unwrap();
        let (ok, err) = named_frames(std::fs::read(&path).unwrap());
        assert_eq!(err, None);
        assert_eq!(ok, vec![(Some("wan0".to_string()), 7_000, a.to_vec())]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn classic_pcap_frames_have_no_interface() {
        let a = [1u8; 20];
        let cap = Capture::from_bytes(Path::new("t.pcap"), pcap_bytes(&[(0, &a)]));
        let f = cap.frames().unwrap().next().unwrap().unwrap();
        assert_eq!(f.interface, None);
    }

    #[test]
    fn corrupt_interface_name_options_are_faults_not_panics() {
        let a = [1u8; 60];
        let good = pcapng_bytes(&["lan0"], &[(0, 0, &a)]).unwrap();
        let at = position(&good, b"lan0");
        // The interface block follows the section header block (its length at bytes 4..8).
        let idb = u64::from(u32::from_le_bytes([good[4], good[5], good[6], good[7]]));
        // Not UTF-8.
        let mut bad = good.clone();
        bad[at] = 0xff;
        let (ok, err) = named_frames(bad);
        assert!(ok.is_empty());
        assert!(
            matches!(err, Some(CaptureError::Corrupt { offset, .. }) if offset == idb),
            "{err:?}"
        );
        // An option length running past the block.
        let mut bad = good.clone();
        bad[at - 2] = 0xf0;
        let (ok, err) = named_frames(bad);
        assert!(ok.is_empty());
        assert!(
            matches!(err, Some(CaptureError::Corrupt { offset, .. }) if offset == idb),
            "{err:?}"
        );
        // Trailing NULs are padding; a name of NULs only is no name; an unknown option code
        // is skipped.
        let mut nul = good.clone();
        nul[at + 3] = 0;
        let (ok, _) = named_frames(nul);
        assert_eq!(ok[0].0.as_deref(), Some("lan"));
        let mut nul = good.clone();
        nul[at..at + 4].fill(0);
        let (ok, _) = named_frames(nul);
        assert_eq!(ok[0].0, None);
        let mut unknown = good;
        unknown[at - 4] = 0x55;
        let (ok, err) = named_frames(unknown);
        assert_eq!(err, None);
        assert_eq!(ok[0].0, None);
    }
}
