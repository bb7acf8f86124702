//! Capture files: pcap and pcapng read as a stream, pcap and pcapng written. The one capture
//! code of wasp: `wasp replay` reads and writes through it ([`crate::PcapGroup`]), and so do
//! the tests and benchmarks that make captures.
//!
//! Reading ([`CaptureReader`]): classic pcap (magic numbers `a1b2c3d4` for microseconds and
//! `a1b23c4d` for nanoseconds, either byte order; libpcap's `pcap-savefile(5)`) and pcapng
//! (sections, several interfaces, `if_tsresol` and `if_tsoffset`; enhanced, simple and obsolete
//! packet blocks; the IETF draft `draft-ietf-opsawg-pcapng`). The blocks and records are parsed
//! by the `pcap-file` crate's slice parsers; this module feeds them from any [`Read`] through a
//! buffer that holds at most one record or block past [`READ_CHUNK_BYTES`] (so a capture of
//! any size is read in bounded memory, from a pipe as from a file), checks the magic number
//! before reading anything else, refuses records longer than [`MAX_RECORD_BYTES`] and blocks
//! longer than [`MAX_BLOCK_BYTES`] before reading them, and names the file and byte offset of
//! every fault.
//!
//! Only Ethernet is read (link type 1, `LINKTYPE_ETHERNET`, in the low 16 bits of a pcap
//! header's link-type field whose upper bits may carry FCS information); another link type is
//! refused with an error that names it. A fault ends the stream: the frames before it are
//! delivered first, then the fault ([`CaptureError`]), then nothing.
//!
//! Writing ([`CaptureWriter`]): pcap (little-endian, Ethernet, snap length
//! [`MAX_RECORD_BYTES`], microsecond or nanosecond magic) or pcapng (one little-endian section;
//! one Interface Description Block per interface added, Ethernet, with its `if_name` and an
//! `if_tsresol` of 6 or 9; one Enhanced Packet Block per frame, with an optional `opt_comment`),
//! both through `pcap-file`'s writers. Timestamps are nanoseconds since the Unix epoch in the
//! API, cut to microseconds when the resolution is [`TsResolution::Micro`].

use std::borrow::Cow;
use std::fs::File;
use std::io::{BufWriter, ErrorKind, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapParser, PcapWriter};
use pcap_file::pcapng::blocks::enhanced_packet::{EnhancedPacketBlock, EnhancedPacketOption};
use pcap_file::pcapng::blocks::interface_description::{
    InterfaceDescriptionBlock, InterfaceDescriptionOption,
};
use pcap_file::pcapng::{Block, PcapNgParser, PcapNgWriter};
use pcap_file::{DataLink, Endianness, PcapError};

/// `LINKTYPE_ETHERNET`, the only link type read.
pub const LINKTYPE_ETHERNET: u32 = 1;

/// Largest captured length accepted for one frame, in bytes (libpcap's `MAXIMUM_SNAPLEN`). A
/// pcap record claiming more is corrupt; the snap length of the captures written.
pub const MAX_RECORD_BYTES: u32 = 262_144;

/// Largest pcapng block accepted, in bytes (Wireshark's `MAX_BLOCK_SIZE` order of size: a
/// packet of [`MAX_RECORD_BYTES`] with room for options and name tables). A block header
/// claiming more is corrupt: nothing is read for it.
pub const MAX_BLOCK_BYTES: u32 = 16 << 20;

/// Bytes asked of the source per read (the buffer holds this much, or one record or block
/// when that is longer).
pub const READ_CHUNK_BYTES: usize = 256 << 10;

/// Most interfaces one pcapng section may describe (the descriptions are kept while the
/// section is read).
pub const MAX_INTERFACES: usize = 1 << 16;

/// Length of the pcap file header, in bytes.
const PCAP_HEADER_BYTES: usize = 24;
/// Length of a pcap record header, in bytes.
const PCAP_RECORD_HEADER_BYTES: usize = 16;
/// The pcapng section header block type, the first four bytes of a pcapng file.
const PCAPNG_MAGIC: [u8; 4] = [0x0a, 0x0d, 0x0d, 0x0a];
/// The pcapng byte-order magic, as a big-endian section writes it (bytes 8..12 of a section
/// header block).
const PCAPNG_BYTE_ORDER_BE: [u8; 4] = [0x1a, 0x2b, 0x3c, 0x4d];
/// The same, little-endian.
const PCAPNG_BYTE_ORDER_LE: [u8; 4] = [0x4d, 0x3c, 0x2b, 0x1a];
/// pcap magic numbers as they appear in the file (big-endian reading of the first four bytes):
/// microseconds and nanoseconds, each in both byte orders.
const PCAP_MAGICS: [u32; 4] = [0xa1b2_c3d4, 0xd4c3_b2a1, 0xa1b2_3c4d, 0x4d3c_b2a1];

/// A capture that cannot be read or written, or that stops being a capture part way through.
/// Every variant names the file; those about the contents name the byte offset of the header,
/// record or block at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CaptureError {
    /// The file could not be opened, read or written.
    #[error("{path}: {message}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS (or the writer) said.
        message: String,
    },
    /// The file starts with neither a pcap nor a pcapng magic number.
    #[error(
        "{path}: not a capture file: byte offset 0 holds {found}, not a pcap or pcapng magic number"
    )]
    NotACapture {
        /// The file.
        path: PathBuf,
        /// The first bytes, in hex (or that the file is empty).
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// Classic pcap (libpcap's format).
    #[default]
    Pcap,
    /// pcapng.
    PcapNg,
}

impl Format {
    /// `pcap` or `pcapng` (also the file name extension wasp gives it).
    pub fn name(self) -> &'static str {
        match self {
            Format::Pcap => "pcap",
            Format::PcapNg => "pcapng",
        }
    }
}

/// Resolution of a capture's timestamps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TsResolution {
    /// Microseconds (pcap magic `a1b2c3d4`; pcapng `if_tsresol` 6, the default).
    #[default]
    Micro,
    /// Nanoseconds, or finer in pcapng (kept as nanoseconds).
    Nano,
}

/// One frame read from a capture, borrowed from the reader until its next call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame<'a> {
    /// Capture timestamp, nanoseconds since the Unix epoch (pcapng: `if_tsresol` units
    /// converted, `if_tsoffset` added; saturating).
    pub ts_ns: u64,
    /// The captured bytes (Ethernet header first).
    pub data: &'a [u8],
    /// Length of the frame on the wire, in bytes (at least `data.len()` in a sane capture; not
    /// checked).
    pub orig_len: u32,
    /// Byte offset of the frame's record or block in the file.
    pub offset: u64,
    /// Resolution of this frame's timestamp in the file.
    pub resolution: TsResolution,
    /// The device the frame was captured on: the `if_name` option of its pcapng interface
    /// (Interface Description Block option 2, as `dumpcap -i trunk0 -i lan0` writes it),
    /// without trailing NULs. `None` in a classic pcap, for an interface without a name, and
    /// for an empty name.
    pub interface: Option<&'a str>,
}

/// One pcapng interface: what its packets need to be read.
#[derive(Debug, Clone)]
struct Interface {
    name: Option<String>,
    linktype: u32,
    /// `if_tsresol`: bit 7 clear = 10^-n seconds, set = 2^-n seconds.
    tsresol: u8,
    /// `if_tsoffset`, seconds.
    tsoffset_s: u64,
    /// Captured-length limit (0 = none), used for simple packet blocks.
    snaplen: u32,
}

enum Parser {
    Pcap {
        parser: PcapParser,
        resolution: TsResolution,
    },
    PcapNg {
        parser: PcapNgParser,
        interfaces: Vec<Interface>,
    },
}

/// The frame parsed last, as positions in the buffer.
#[derive(Debug, Clone, Copy)]
struct Current {
    /// Buffer position just past its record or block.
    end: usize,
    /// Its bytes, `data_at..data_at + data_len` in the buffer.
    data_at: usize,
    data_len: usize,
    ts_ns: u64,
    orig_len: u32,
    offset: u64,
    resolution: TsResolution,
    /// Index of its interface in the section's list (pcapng).
    interface: Option<usize>,
}

/// The source a reader opened by path reads: a file or standard input.
pub type Source = Box<dyn Read + Send>;

/// The bytes of a source not consumed yet: `buf[start..end]`, at file offset `base + start`.
struct Buffer<R> {
    path: PathBuf,
    src: R,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// File offset of `buf[0]`.
    base: u64,
    eof: bool,
}

impl<R: Read> Buffer<R> {
    /// Bytes available from `start` (all that is left once the source has ended).
    fn rest(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    /// File offset of `start`.
    fn offset(&self) -> u64 {
        self.base + self.start as u64
    }

    /// Make at least `need` bytes available from `start`, reading as needed; fewer only at
    /// the end of the source. Returns the bytes available.
    fn fill(&mut self, need: usize) -> Result<usize, CaptureError> {
        if self.end - self.start >= need || self.eof {
            return Ok(self.end - self.start);
        }
        if self.start + need > self.buf.len() {
            // Move what is left to the front, and grow for a long record or block.
            self.buf.copy_within(self.start..self.end, 0);
            self.base += self.start as u64;
            self.end -= self.start;
            self.start = 0;
            if need > self.buf.len() {
                self.buf.resize(need, 0);
            }
        }
        while self.end - self.start < need {
            match self.src.read(&mut self.buf[self.end..]) {
                Ok(0) => {
                    self.eof = true;
                    break;
                }
                Ok(n) => self.end += n,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    return Err(CaptureError::Io {
                        path: self.path.clone(),
                        message: format!(
                            "read error at byte offset {}: {e}",
                            self.base + self.end as u64
                        ),
                    });
                }
            }
        }
        Ok(self.end - self.start)
    }

    /// Give back the memory of a buffer grown for one long record or block once little of it
    /// is left.
    fn shrink(&mut self) {
        if self.buf.len() > READ_CHUNK_BYTES && self.end - self.start <= READ_CHUNK_BYTES / 2 {
            self.buf.copy_within(self.start..self.end, 0);
            self.base += self.start as u64;
            self.end -= self.start;
            self.start = 0;
            self.buf.truncate(READ_CHUNK_BYTES);
            self.buf.shrink_to_fit();
        }
    }

    /// The total length of the pcapng block at `start`, read in the byte order of `section`
    /// (of its own header for a section header block), checked against [`MAX_BLOCK_BYTES`];
    /// [`BlockLen::Cut`] with the bytes left when fewer than 12 are.
    fn block_len(&mut self, section: Endianness) -> Result<BlockLen, CaptureError> {
        let have = self.fill(12)?;
        if have < 12 {
            return Ok(BlockLen::Cut(have));
        }
        let rest = self.rest();
        let field = [rest[4], rest[5], rest[6], rest[7]];
        let order = [rest[8], rest[9], rest[10], rest[11]];
        let big = if rest[..4] == PCAPNG_MAGIC {
            match order {
                PCAPNG_BYTE_ORDER_BE => true,
                PCAPNG_BYTE_ORDER_LE => false,
                // Not a section header: the parser says so (from these 12 bytes).
                _ => return Ok(BlockLen::Len(12)),
            }
        } else {
            section == Endianness::Big
        };
        let len = if big {
            u32::from_be_bytes(field)
        } else {
            u32::from_le_bytes(field)
        };
        if len > MAX_BLOCK_BYTES {
            return Err(CaptureError::Corrupt {
                path: self.path.clone(),
                offset: self.offset(),
                what: format!("pcapng block claims {len} bytes (more than {MAX_BLOCK_BYTES})"),
            });
        }
        // A length under 12 or not a multiple of 4 is refused by the parser.
        Ok(BlockLen::Len((len as usize).max(12)))
    }
}

/// A capture read as a stream: the header at creation, then one frame per
/// [`CaptureReader::next_frame`], in file order. Holds one buffer of [`READ_CHUNK_BYTES`], or
/// of one record or block when that is longer, whatever the size of the capture.
pub struct CaptureReader<R> {
    input: Buffer<R>,
    parser: Parser,
    /// The frame parsed last; `handed` once [`CaptureReader::next_frame`] gave it out (its
    /// bytes are consumed at the next call).
    current: Option<Current>,
    handed: bool,
    /// A fault found while looking ahead, given out by the next call.
    fault: Option<CaptureError>,
    done: bool,
}

impl<R> std::fmt::Debug for CaptureReader<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaptureReader")
            .field("path", &self.input.path)
            .field("start", &self.input.start)
            .finish_non_exhaustive()
    }
}

impl CaptureReader<Source> {
    /// Open the capture at `path` (`-`: standard input) and read its header.
    ///
    /// # Errors
    /// [`CaptureError::Io`] when it cannot be opened or read, and those of
    /// [`CaptureReader::new`].
    pub fn open(path: &Path) -> Result<Self, CaptureError> {
        let src: Source = if path == Path::new("-") {
            Box::new(std::io::stdin())
        } else {
            Box::new(File::open(path).map_err(|e| CaptureError::Io {
                path: path.to_path_buf(),
                message: e.to_string(),
            })?)
        };
        CaptureReader::new(path, src)
    }
}

impl<R: Read> CaptureReader<R> {
    /// Read the header of the capture `src` (`path` names it in errors): the magic number
    /// first (four bytes: nothing more is read from a source that is not a capture), then the
    /// pcap file header (with its link type) or the pcapng section header block.
    ///
    /// # Errors
    /// [`CaptureError::NotACapture`], [`CaptureError::Truncated`] (shorter than its header),
    /// [`CaptureError::LinkType`] (pcap), [`CaptureError::Corrupt`], [`CaptureError::Io`].
    pub fn new(path: &Path, src: R) -> Result<Self, CaptureError> {
        let mut input = Buffer {
            path: path.to_path_buf(),
            src,
            buf: vec![0; READ_CHUNK_BYTES],
            start: 0,
            end: 0,
            base: 0,
            eof: false,
        };
        let have = input.fill(4)?;
        if have < 4 {
            return Err(CaptureError::NotACapture {
                path: input.path.clone(),
                found: if have == 0 {
                    "nothing (the file is empty)".to_string()
                } else {
                    hex(input.rest())
                },
            });
        }
        let magic = [input.buf[0], input.buf[1], input.buf[2], input.buf[3]];
        let parser = if magic == PCAPNG_MAGIC {
            start_pcapng(&mut input)?
        } else if PCAP_MAGICS.contains(&u32::from_be_bytes(magic)) {
            start_pcap(&mut input)?
        } else {
            return Err(CaptureError::NotACapture {
                path: input.path.clone(),
                found: hex(&magic),
            });
        };
        Ok(CaptureReader {
            input,
            parser,
            current: None,
            handed: false,
            fault: None,
            done: false,
        })
    }

    /// The file's path (as given; `-` for standard input).
    pub fn path(&self) -> &Path {
        &self.input.path
    }

    /// The container format.
    pub fn format(&self) -> Format {
        match self.parser {
            Parser::Pcap { .. } => Format::Pcap,
            Parser::PcapNg { .. } => Format::PcapNg,
        }
    }

    /// Bytes of the file consumed so far: the byte offset of the next record or block once
    /// the frame given out last is done with.
    pub fn offset(&self) -> u64 {
        match (self.current, self.handed) {
            (Some(c), true) => self.input.base + c.end as u64,
            (Some(c), false) => c.offset,
            (None, _) => self.input.offset(),
        }
    }

    /// The next frame, or the fault that ends the capture (once), or `None` at its end.
    pub fn next_frame(&mut self) -> Option<Result<Frame<'_>, CaptureError>> {
        if self.prepare() {
            self.handed = true;
            return self.view().map(Ok);
        }
        self.fault.take().map(Err)
    }

    /// The frame [`CaptureReader::next_frame`] gives next, without taking it; or the fault it
    /// gives next; `None` at the end.
    pub fn peek_frame(&mut self) -> Option<Result<Frame<'_>, &CaptureError>> {
        if self.prepare() {
            return self.view().map(Ok);
        }
        self.fault.as_ref().map(Err)
    }

    /// The current frame as a view into the buffer.
    fn view(&self) -> Option<Frame<'_>> {
        let c = self.current?;
        let interface = match (&self.parser, c.interface) {
            (Parser::PcapNg { interfaces, .. }, Some(i)) => {
                interfaces.get(i).and_then(|i| i.name.as_deref())
            }
            _ => None,
        };
        Some(Frame {
            ts_ns: c.ts_ns,
            data: self.input.buf.get(c.data_at..c.data_at + c.data_len)?,
            orig_len: c.orig_len,
            offset: c.offset,
            resolution: c.resolution,
            interface,
        })
    }

    /// Make `current` a frame not handed out yet; false at the end or at a fault (then kept in
    /// `fault` until given out).
    fn prepare(&mut self) -> bool {
        if self.current.is_some() && !self.handed {
            return true;
        }
        if let Some(c) = self.current.take() {
            self.input.start = c.end;
        }
        self.handed = false;
        if self.done {
            return false;
        }
        self.input.shrink();
        let next = match &mut self.parser {
            Parser::Pcap { parser, resolution } => next_pcap(&mut self.input, parser, *resolution),
            Parser::PcapNg { parser, interfaces } => {
                next_pcapng(&mut self.input, parser, interfaces)
            }
        };
        match next {
            Ok(Some(c)) => {
                self.current = Some(c);
                true
            }
            Ok(None) => {
                self.done = true;
                false
            }
            Err(e) => {
                self.done = true;
                self.fault = Some(e);
                false
            }
        }
    }
}

/// Read the pcap file header (the magic number is known to be pcap's).
fn start_pcap<R: Read>(input: &mut Buffer<R>) -> Result<Parser, CaptureError> {
    let have = input.fill(PCAP_HEADER_BYTES)?;
    if have < PCAP_HEADER_BYTES {
        return Err(CaptureError::Truncated {
            path: input.path.clone(),
            offset: 0,
            what: format!("pcap file header needs {PCAP_HEADER_BYTES} bytes, the file has {have}"),
        });
    }
    let head = &input.buf[..PCAP_HEADER_BYTES];
    let (_, parser) = PcapParser::new(head).map_err(|e| CaptureError::Corrupt {
        path: input.path.clone(),
        offset: 0,
        what: format!("pcap file header: {e}"),
    })?;
    let header: PcapHeader = parser.header();
    // The link-type field's upper bits may carry FCS information (pcap spec, "LinkType and
    // additional information"): the link type itself is the low 16 bits.
    let raw = [head[20], head[21], head[22], head[23]];
    let field = match header.endianness {
        Endianness::Big => u32::from_be_bytes(raw),
        Endianness::Little => u32::from_le_bytes(raw),
    };
    let linktype = field & 0xffff;
    if linktype != LINKTYPE_ETHERNET {
        return Err(CaptureError::LinkType {
            path: input.path.clone(),
            offset: 20,
            linktype,
        });
    }
    let resolution = match header.ts_resolution {
        pcap_file::TsResolution::MicroSecond => TsResolution::Micro,
        pcap_file::TsResolution::NanoSecond => TsResolution::Nano,
    };
    input.start = PCAP_HEADER_BYTES;
    Ok(Parser::Pcap { parser, resolution })
}

/// Read the pcapng section header block (the magic number is known to be pcapng's).
fn start_pcapng<R: Read>(input: &mut Buffer<R>) -> Result<Parser, CaptureError> {
    let cut = |input: &Buffer<R>| CaptureError::Truncated {
        path: input.path.clone(),
        offset: 0,
        what: "pcapng section header block is cut off".to_string(),
    };
    let len = match input.block_len(Endianness::Big)? {
        BlockLen::Cut(_) => return Err(cut(input)),
        BlockLen::Len(n) => n,
    };
    if input.fill(len)? < len {
        return Err(cut(input));
    }
    let (rest, parser) =
        PcapNgParser::new(&input.buf[..len]).map_err(|e| CaptureError::Corrupt {
            path: input.path.clone(),
            offset: 0,
            what: format!("pcapng section header block: {e}"),
        })?;
    input.start = len - rest.len();
    Ok(Parser::PcapNg {
        parser,
        interfaces: Vec::new(),
    })
}

/// The next pcap record as a frame; `None` at the end.
fn next_pcap<R: Read>(
    input: &mut Buffer<R>,
    parser: &PcapParser,
    resolution: TsResolution,
) -> Result<Option<Current>, CaptureError> {
    let offset = input.offset();
    let have = input.fill(PCAP_RECORD_HEADER_BYTES)?;
    if have == 0 {
        return Ok(None);
    }
    if have < PCAP_RECORD_HEADER_BYTES {
        return Err(CaptureError::Truncated {
            path: input.path.clone(),
            offset,
            what: format!("record header needs {PCAP_RECORD_HEADER_BYTES} bytes, {have} left"),
        });
    }
    // The raw record: its lengths are checked here rather than by pcap-file, which refuses an
    // original length above the snap length (normal in a capture taken with -s).
    let rest = input.rest();
    let b = [rest[8], rest[9], rest[10], rest[11]];
    let incl_len = match parser.header().endianness {
        Endianness::Big => u32::from_be_bytes(b),
        Endianness::Little => u32::from_le_bytes(b),
    };
    if incl_len > MAX_RECORD_BYTES {
        return Err(CaptureError::Corrupt {
            path: input.path.clone(),
            offset,
            what: format!("record claims {incl_len} captured bytes (more than {MAX_RECORD_BYTES})"),
        });
    }
    let len = PCAP_RECORD_HEADER_BYTES + incl_len as usize;
    let have = input.fill(len)?;
    if have < len {
        return Err(CaptureError::Truncated {
            path: input.path.clone(),
            offset,
            what: format!(
                "record holds {incl_len} captured bytes, only {} left after its header",
                have - PCAP_RECORD_HEADER_BYTES
            ),
        });
    }
    let raw = match parser.next_raw_packet(&input.rest()[..len]) {
        Ok((_, raw)) => raw,
        Err(e) => {
            return Err(CaptureError::Corrupt {
                path: input.path.clone(),
                offset,
                what: e.to_string(),
            });
        }
    };
    let frac_ns = match resolution {
        TsResolution::Micro => u64::from(raw.ts_frac) * 1_000,
        TsResolution::Nano => u64::from(raw.ts_frac),
    };
    Ok(Some(Current {
        end: input.start + len,
        data_at: input.start + PCAP_RECORD_HEADER_BYTES,
        data_len: incl_len as usize,
        ts_ns: u64::from(raw.ts_sec) * 1_000_000_000 + frac_ns,
        orig_len: raw.orig_len,
        offset,
        resolution,
        interface: None,
    }))
}

/// The next packet of a pcapng capture as a frame, reading the blocks before it (sections,
/// interfaces, blocks without packets); `None` at the end.
fn next_pcapng<R: Read>(
    input: &mut Buffer<R>,
    parser: &mut PcapNgParser,
    interfaces: &mut Vec<Interface>,
) -> Result<Option<Current>, CaptureError> {
    loop {
        input.shrink();
        let offset = input.offset();
        let len = match input.block_len(parser.section().endianness)? {
            BlockLen::Cut(0) => return Ok(None),
            BlockLen::Cut(left) => {
                return Err(CaptureError::Truncated {
                    path: input.path.clone(),
                    offset,
                    what: format!("pcapng block is cut off ({left} bytes left)"),
                });
            }
            BlockLen::Len(n) => n,
        };
        let have = input.fill(len)?;
        if have < len {
            return Err(CaptureError::Truncated {
                path: input.path.clone(),
                offset,
                what: format!("pcapng block is cut off ({have} bytes left)"),
            });
        }
        let corrupt = |what: String| CaptureError::Corrupt {
            path: input.path.clone(),
            offset,
            what,
        };
        let start = input.start;
        let slice = &input.buf[start..start + len];
        let (after, block) = parser
            .next_block(slice)
            .map_err(|e| corrupt(format!("pcapng block: {e}")))?;
        let end = start + (len - after.len());
        // Where a part of the block is in the buffer (pcap-file's parsers borrow what they
        // return from the slice they are given; anything else fails the check below).
        let at = |d: &[u8]| start + (d.as_ptr() as usize).saturating_sub(slice.as_ptr() as usize);
        // (interface index, data position, captured length, timestamp ns, original length)
        let packet = match block {
            Block::SectionHeader(_) => {
                interfaces.clear();
                None
            }
            Block::InterfaceDescription(idb) => {
                if interfaces.len() >= MAX_INTERFACES {
                    return Err(corrupt(format!(
                        "more than {MAX_INTERFACES} interfaces in one section"
                    )));
                }
                let mut iface = Interface {
                    name: None,
                    linktype: u32::from(idb.linktype),
                    tsresol: 6,
                    tsoffset_s: 0,
                    snaplen: idb.snaplen,
                };
                for opt in &idb.options {
                    match opt {
                        InterfaceDescriptionOption::IfTsResol(r) => iface.tsresol = *r,
                        InterfaceDescriptionOption::IfTsOffset(s) => iface.tsoffset_s = *s,
                        // NUL padding some writers leave is not part of the name.
                        InterfaceDescriptionOption::IfName(n) => {
                            let n = n.trim_end_matches('\0');
                            iface.name = (!n.is_empty()).then(|| n.to_string());
                        }
                        _ => {}
                    }
                }
                interfaces.push(iface);
                None
            }
            Block::EnhancedPacket(epb) => {
                let i = epb.interface_id as usize;
                let Some(iface) = interfaces.get(i) else {
                    return Err(corrupt(unknown_interface(
                        epb.interface_id,
                        interfaces.len(),
                    )));
                };
                // pcap-file 2 keeps the raw timestamp units as nanoseconds; the units are the
                // interface's `if_tsresol`.
                let units = epb.timestamp.as_nanos();
                Some((
                    i,
                    at(&epb.data),
                    epb.data.len(),
                    ts_to_ns(units, iface.tsresol, iface.tsoffset_s),
                    epb.original_len,
                ))
            }
            Block::SimplePacket(spb) => {
                let Some(iface) = interfaces.first() else {
                    return Err(corrupt(
                        "simple packet block before any interface description".to_string(),
                    ));
                };
                // The body is padded to 4 bytes; the captured length is the smallest of the
                // original length, the snap length and the body (pcapng, SPB).
                let mut caplen = spb.data.len().min(spb.original_len as usize);
                if iface.snaplen != 0 {
                    caplen = caplen.min(iface.snaplen as usize);
                }
                Some((0, at(&spb.data), caplen, 0, spb.original_len))
            }
            Block::Packet(pb) => {
                let i = usize::from(pb.interface_id);
                let Some(iface) = interfaces.get(i) else {
                    return Err(corrupt(unknown_interface(
                        u32::from(pb.interface_id),
                        interfaces.len(),
                    )));
                };
                Some((
                    i,
                    at(&pb.data),
                    pb.data.len(),
                    ts_to_ns(u128::from(pb.timestamp), iface.tsresol, iface.tsoffset_s),
                    pb.original_len,
                ))
            }
            // Name resolution, statistics, journal and unknown blocks carry no packets.
            _ => None,
        };
        let Some((i, data_at, data_len, ts_ns, orig_len)) = packet else {
            input.start = end;
            continue;
        };
        let iface = &interfaces[i];
        if iface.linktype != LINKTYPE_ETHERNET {
            return Err(CaptureError::LinkType {
                path: input.path.clone(),
                offset,
                linktype: iface.linktype,
            });
        }
        // The block's data lies inside the buffer (the parser borrows it from the slice).
        if data_at + data_len > end {
            return Err(corrupt("packet data outside its block".to_string()));
        }
        return Ok(Some(Current {
            end,
            data_at,
            data_len,
            ts_ns,
            orig_len,
            offset,
            resolution: if iface.tsresol == 6 {
                TsResolution::Micro
            } else {
                TsResolution::Nano
            },
            interface: Some(i),
        }));
    }
}

/// What [`Buffer::block_len`] found.
enum BlockLen {
    /// The block's total length in bytes (at least 12).
    Len(usize),
    /// Fewer than 12 bytes are left: this many.
    Cut(usize),
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

/// One frame to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutFrame<'a> {
    /// Capture timestamp, nanoseconds since the Unix epoch (microseconds are kept in a capture
    /// written at [`TsResolution::Micro`]; pcap keeps 32-bit seconds: up to 2106).
    pub ts_ns: u64,
    /// The frame, Ethernet header first (at most [`MAX_RECORD_BYTES`]).
    pub data: &'a [u8],
    /// Length on the wire, in bytes; written as at least `data.len()`.
    pub orig_len: u32,
    /// pcapng: the index of its interface among those added ([`CaptureWriter::add_interface`]);
    /// ignored in pcap.
    pub interface: u32,
    /// pcapng: the packet's comment (`opt_comment`, cut to 65532 bytes at a character
    /// boundary); ignored in pcap.
    pub comment: Option<&'a str>,
}

impl<'a> OutFrame<'a> {
    /// `data` captured whole at `ts_ns`, on interface 0, without a comment.
    pub fn new(ts_ns: u64, data: &'a [u8]) -> Self {
        OutFrame {
            ts_ns,
            data,
            orig_len: data.len() as u32,
            interface: 0,
            comment: None,
        }
    }
}

enum Sink<W: Write> {
    Pcap(PcapWriter<W>),
    PcapNg(PcapNgWriter<W>),
}

/// A capture being written (see the module documentation for the layout).
pub struct CaptureWriter<W: Write> {
    path: PathBuf,
    sink: Sink<W>,
    resolution: TsResolution,
    interfaces: u32,
    packets: u64,
}

impl<W: Write> std::fmt::Debug for CaptureWriter<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaptureWriter")
            .field("path", &self.path)
            .field("packets", &self.packets)
            .finish_non_exhaustive()
    }
}

impl CaptureWriter<BufWriter<File>> {
    /// Create (or truncate) `path` and write the file header.
    ///
    /// # Errors
    /// [`CaptureError::Io`] when the file cannot be created or written.
    pub fn create(
        path: &Path,
        format: Format,
        resolution: TsResolution,
    ) -> Result<Self, CaptureError> {
        let file = File::create(path).map_err(|e| CaptureError::Io {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        CaptureWriter::new(path, BufWriter::new(file), format, resolution)
    }
}

impl<W: Write> CaptureWriter<W> {
    /// Write the file header of a `format` capture to `out` (`path` names it in errors).
    ///
    /// # Errors
    /// [`CaptureError::Io`] when `out` cannot be written.
    pub fn new(
        path: &Path,
        out: W,
        format: Format,
        resolution: TsResolution,
    ) -> Result<Self, CaptureError> {
        let io = |e: PcapError| CaptureError::Io {
            path: path.to_path_buf(),
            message: e.to_string(),
        };
        let sink = match format {
            Format::Pcap => {
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
                Sink::Pcap(PcapWriter::with_header(out, header).map_err(io)?)
            }
            Format::PcapNg => {
                Sink::PcapNg(PcapNgWriter::with_endianness(out, Endianness::Little).map_err(io)?)
            }
        };
        Ok(CaptureWriter {
            path: path.to_path_buf(),
            sink,
            resolution,
            interfaces: 0,
            packets: 0,
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The container format.
    pub fn format(&self) -> Format {
        match self.sink {
            Sink::Pcap(_) => Format::Pcap,
            Sink::PcapNg(_) => Format::PcapNg,
        }
    }

    /// Describe one more interface (pcapng: an Interface Description Block, Ethernet, snap
    /// length [`MAX_RECORD_BYTES`], `if_name` = `name` unless empty, `if_tsresol` of the
    /// writer's resolution) and return its index for [`OutFrame::interface`]. pcap has no
    /// interfaces: nothing is written, and the index counts on all the same.
    ///
    /// # Errors
    /// [`CaptureError::Io`] on a write error.
    pub fn add_interface(&mut self, name: &str) -> Result<u32, CaptureError> {
        if let Sink::PcapNg(w) = &mut self.sink {
            let mut options = Vec::with_capacity(2);
            if !name.is_empty() {
                options.push(InterfaceDescriptionOption::IfName(Cow::Borrowed(name)));
            }
            options.push(InterfaceDescriptionOption::IfTsResol(
                match self.resolution {
                    TsResolution::Micro => 6,
                    TsResolution::Nano => 9,
                },
            ));
            w.write_pcapng_block(InterfaceDescriptionBlock {
                linktype: DataLink::ETHERNET,
                snaplen: MAX_RECORD_BYTES,
                options,
            })
            .map_err(|e| CaptureError::Io {
                path: self.path.clone(),
                message: e.to_string(),
            })?;
        }
        self.interfaces += 1;
        Ok(self.interfaces - 1)
    }

    /// Append one frame.
    ///
    /// # Errors
    /// [`CaptureError::Io`] on a write error, a frame longer than [`MAX_RECORD_BYTES`], a
    /// pcap timestamp past 2106 (32-bit seconds), or a pcapng interface not added.
    pub fn write(&mut self, frame: &OutFrame<'_>) -> Result<(), CaptureError> {
        let io = |message: String| CaptureError::Io {
            path: self.path.clone(),
            message,
        };
        if frame.data.len() > MAX_RECORD_BYTES as usize {
            return Err(io(format!(
                "a frame of {} bytes is longer than the snap length {MAX_RECORD_BYTES}",
                frame.data.len()
            )));
        }
        let orig_len = frame.orig_len.max(frame.data.len() as u32);
        let r = match &mut self.sink {
            Sink::Pcap(w) => w
                .write_packet(&PcapPacket::new(
                    Duration::from_nanos(frame.ts_ns),
                    orig_len,
                    frame.data,
                ))
                .map(drop),
            Sink::PcapNg(w) => {
                if frame.interface >= self.interfaces {
                    return Err(io(unknown_interface(
                        frame.interface,
                        self.interfaces as usize,
                    )));
                }
                let units = match self.resolution {
                    TsResolution::Micro => frame.ts_ns / 1_000,
                    TsResolution::Nano => frame.ts_ns,
                };
                let options = match frame.comment {
                    None => Vec::new(),
                    Some(c) => vec![EnhancedPacketOption::Comment(Cow::Borrowed(cut_str(
                        c, 65_532,
                    )))],
                };
                w.write_pcapng_block(EnhancedPacketBlock {
                    interface_id: frame.interface,
                    timestamp: Duration::from_nanos(units),
                    original_len: orig_len,
                    data: Cow::Borrowed(frame.data),
                    options,
                })
                .map(drop)
            }
        };
        r.map_err(|e| io(e.to_string()))?;
        self.packets += 1;
        Ok(())
    }

    /// Frames written so far.
    pub fn packets(&self) -> u64 {
        self.packets
    }

    /// Flush and return the output.
    ///
    /// # Errors
    /// [`CaptureError::Io`] on a write error.
    pub fn finish(self) -> Result<W, CaptureError> {
        let mut out = match self.sink {
            Sink::Pcap(w) => w.into_writer(),
            Sink::PcapNg(w) => w.into_inner(),
        };
        out.flush().map_err(|e| CaptureError::Io {
            path: self.path,
            message: e.to_string(),
        })?;
        Ok(out)
    }
}

/// The longest prefix of `s` of at most `max` bytes that ends at a character boundary.
fn cut_str(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests;
