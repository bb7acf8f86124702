//! Capture files as ports: the port group `wasp replay` drives. No privileges, no system
//! calls beyond file I/O, so a worker loop runs from captures in tests as in replay.
//!
//! Inputs are capture files (pcap or pcapng, Ethernet; `-` is standard input) read in the order
//! given, each to its end or its first fault, as streams ([`crate::capture::CaptureReader`]):
//! the group holds one reader at a time and, during a poll, a copy of that poll's frames, so
//! its memory does not grow with the captures. A frame enters on the port its pcapng
//! interface's `if_name` names (a port with [`PcapPort::named_input`]), else on its input's
//! port ([`PcapInput::port`]).
//!
//! Outputs: one capture per port ([`PcapPort::output`]), created at the first frame sent there
//! (or at [`PcapGroup::close`] for [`PcapPort::empty_output`]), in [`PcapOptions::format`], at
//! the timestamp resolution of the first frame read. A frame sent is stamped with the capture
//! time [`TxSide::describe`] gave (the received frame it was made from) or else the latest
//! capture time handed out, and its original length is its length; in pcapng the port's one
//! interface is named after the port and [`TxSide::describe`]'s note is the frame's comment.

use std::fs::File;
use std::io::BufWriter;
use std::path::PathBuf;
use std::time::Duration;

use crate::IoError;
use crate::capture::{
    CaptureError, CaptureReader, CaptureWriter, Format, OutFrame, Source, TsResolution,
};
use crate::port::{Frame, PortGroup, PortInfo, PortStats, TxSide};

/// One port of a [`PcapGroup`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PcapPort {
    /// The port's name (what rulesets call the device, e.g. `"eth0"`).
    pub name: String,
    /// Frames of a pcapng interface whose `if_name` is this name enter on this port.
    pub named_input: bool,
    /// The capture written with the frames sent on this port (`None`: they are refused and
    /// counted in [`PortStats::tx_dropped`]).
    pub output: Option<PathBuf>,
    /// Create the output at [`PcapGroup::close`] even when nothing was sent (an empty capture
    /// says that nothing left there).
    pub empty_output: bool,
}

impl PcapPort {
    /// A port named `name` that only receives (frames of a pcapng interface of that name, and
    /// the frames of inputs given to it).
    pub fn input(name: &str) -> Self {
        PcapPort {
            name: name.to_string(),
            named_input: true,
            ..PcapPort::default()
        }
    }
}

/// One capture to read.
#[derive(Debug)]
pub struct PcapInput {
    /// The file (`-`: standard input).
    pub path: PathBuf,
    /// Index of the port its frames enter on, unless their pcapng interface names another.
    pub port: usize,
    /// The input already opened (or why it could not be), e.g. to look at its first frame
    /// before the group is made: read from where it is. `None`: opened at its turn.
    pub reader: Option<Result<CaptureReader<Source>, CaptureError>>,
}

impl PcapInput {
    /// `path`, entering on `port`, opened at its turn.
    pub fn new(path: impl Into<PathBuf>, port: usize) -> Self {
        PcapInput {
            path: path.into(),
            port,
            reader: None,
        }
    }
}

/// How a [`PcapGroup`] hands out and writes frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PcapOptions {
    /// Format of the outputs; `None`: the format of the first input (pcap when it is not a
    /// capture).
    pub format: Option<Format>,
    /// The most capture time one poll's frames span, in ns from its first frame (`None`: no
    /// limit).
    pub max_span_ns: Option<u64>,
}

/// What the capture said about one frame of a poll, beside its [`Frame`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Captured {
    /// Index of its input among those given to [`PcapGroup::open`].
    pub input: usize,
    /// Capture time, ns since the Unix epoch.
    pub ts_ns: u64,
    /// Length on the wire, in bytes.
    pub orig_len: u32,
    /// Byte offset of its record or block in its input.
    pub offset: u64,
    /// Resolution of its timestamp in the file.
    pub resolution: TsResolution,
}

/// The callback of [`PcapGroup::poll_captured`]: a poll's frames, what the capture said of
/// each, and the send side.
pub type OnCaptured<'a> = dyn FnMut(&[Frame<'_>], &[Captured], &mut dyn TxSide) + 'a;

/// How far an input has been read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputState {
    /// The file.
    pub path: PathBuf,
    /// Its format, once opened.
    pub format: Option<Format>,
    /// Frames handed out.
    pub frames: u64,
    /// The fault that ended it (the frames before it were handed out).
    pub fault: Option<CaptureError>,
    /// Read to its end or its fault.
    pub done: bool,
}

struct Input {
    port: usize,
    reader: Option<CaptureReader<Source>>,
    state: InputState,
}

struct Port {
    named_input: bool,
    output: Option<PathBuf>,
    empty_output: bool,
    writer: Option<CaptureWriter<BufWriter<File>>>,
    stats: PortStats,
}

/// Ports backed by capture files (see the module documentation). [`PortGroup::poll`] hands
/// out the inputs' frames in order, never waiting: at most `max`, all of one input and one
/// port, spanning at most [`PcapOptions::max_span_ns`]; [`PortGroup::exhausted`] tells when
/// every input has been read.
pub struct PcapGroup {
    info: Vec<PortInfo>,
    ports: Vec<Port>,
    inputs: Vec<Input>,
    /// The input being read.
    next: usize,
    options: PcapOptions,
    /// The output format, once decided.
    format: Option<Format>,
    /// The resolution of the first frame handed out (the outputs').
    resolution: Option<TsResolution>,
    /// The latest capture time handed out.
    now_ns: u64,
    /// Bytes of the inputs read to their end.
    bytes_done: u64,
    /// One poll's frames: their bytes, and (port, start, end) with what the capture said.
    arena: Vec<u8>,
    spans: Vec<(usize, usize, usize)>,
    captured: Vec<Captured>,
    /// Where `queue_with` fills a frame before writing it out.
    scratch: Vec<u8>,
    /// The first write error, reported by the next flush.
    write_error: Option<IoError>,
}

impl std::fmt::Debug for PcapGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PcapGroup")
            .field("ports", &self.info)
            .field("next", &self.next)
            .finish_non_exhaustive()
    }
}

impl PcapGroup {
    /// A group of `ports` reading `inputs` in order. Nothing is opened yet: each input when
    /// its turn comes (or [`PcapGroup::peek_ts`] looks ahead), each output at its first frame.
    ///
    /// Errors: [`IoError::Config`] for no ports, a name used twice, or an input naming a port
    /// out of range.
    pub fn open(
        ports: Vec<PcapPort>,
        inputs: Vec<PcapInput>,
        options: PcapOptions,
    ) -> Result<PcapGroup, IoError> {
        let names: Vec<&str> = ports.iter().map(|p| p.name.as_str()).collect();
        crate::afpacket::check_devs(&names)?;
        if let Some(i) = inputs.iter().find(|i| i.port >= ports.len()) {
            return Err(IoError::Config(format!(
                "{}: port {} of {} ports",
                i.path.display(),
                i.port,
                ports.len()
            )));
        }
        Ok(PcapGroup {
            info: ports
                .iter()
                .map(|p| PortInfo {
                    name: p.name.clone(),
                    ifindex: 0,
                    mac: [0; 6],
                    mtu: 1500,
                })
                .collect(),
            ports: ports
                .into_iter()
                .map(|p| Port {
                    named_input: p.named_input,
                    output: p.output,
                    empty_output: p.empty_output,
                    writer: None,
                    stats: PortStats::default(),
                })
                .collect(),
            inputs: inputs
                .into_iter()
                .map(|i| {
                    let (format, fault) = match &i.reader {
                        Some(Ok(r)) => (Some(r.format()), None),
                        Some(Err(e)) => (None, Some(e.clone())),
                        None => (None, None),
                    };
                    Input {
                        port: i.port,
                        state: InputState {
                            path: i.path,
                            format,
                            frames: 0,
                            done: fault.is_some(),
                            fault,
                        },
                        reader: i.reader.and_then(Result::ok),
                    }
                })
                .collect(),
            next: 0,
            format: options.format,
            options,
            resolution: None,
            now_ns: 0,
            bytes_done: 0,
            arena: Vec::new(),
            spans: Vec::new(),
            captured: Vec::new(),
            scratch: Vec::new(),
            write_error: None,
        })
    }

    /// Change the most capture time one poll spans (from the next poll on).
    pub fn set_max_span_ns(&mut self, max_span_ns: Option<u64>) {
        self.options.max_span_ns = max_span_ns;
    }

    /// The inputs, as far as they have been read.
    pub fn inputs(&self) -> impl ExactSizeIterator<Item = &InputState> {
        self.inputs.iter().map(|i| &i.state)
    }

    /// Bytes of the inputs read so far.
    pub fn bytes_read(&self) -> u64 {
        self.bytes_done
            + self
                .inputs
                .get(self.next)
                .and_then(|i| i.reader.as_ref())
                .map_or(0, CaptureReader::offset)
    }

    /// The format of the outputs: [`PcapOptions::format`], or the first input's (opened now
    /// if it is not yet), or pcap when it cannot be read.
    pub fn output_format(&mut self) -> Format {
        if let Some(f) = self.format {
            return f;
        }
        let f = match self.inputs.first_mut() {
            Some(first) => {
                open_input(first);
                first.state.format.unwrap_or_default()
            }
            None => Format::Pcap,
        };
        *self.format.insert(f)
    }

    /// The capture time of the next frame to be handed out, looking ahead through inputs that
    /// end or fail before giving one (they are done then; their faults are in
    /// [`PcapGroup::inputs`]).
    pub fn peek_ts(&mut self) -> Option<u64> {
        while let Some(input) = self.inputs.get_mut(self.next) {
            open_input(input);
            if let Some(r) = input.reader.as_mut()
                && let Some(Ok(f)) = r.peek_frame()
            {
                return Some(f.ts_ns);
            }
            self.finish_input();
        }
        None
    }

    /// Close the current input: its fault (if any) kept, its bytes counted; the next one is
    /// read from now on.
    fn finish_input(&mut self) {
        let Some(input) = self.inputs.get_mut(self.next) else {
            return;
        };
        if let Some(mut r) = input.reader.take() {
            if let Some(Err(e)) = r.next_frame() {
                input.state.fault = Some(e);
            }
            self.bytes_done += r.offset();
        }
        input.state.done = true;
        self.next += 1;
    }

    /// Take the next frames (see [`PcapGroup`]) into the arena.
    fn gather(&mut self, max: usize) {
        self.arena.clear();
        self.spans.clear();
        self.captured.clear();
        while self.spans.len() < max {
            let PcapGroup {
                info,
                ports,
                inputs,
                next,
                options,
                resolution,
                now_ns,
                arena,
                spans,
                captured,
                ..
            } = self;
            let Some(input) = inputs.get_mut(*next) else {
                break;
            };
            open_input(input);
            let default_port = input.port;
            // The next frame's time and port, looked at without taking it.
            let peeked = input.reader.as_mut().and_then(|r| match r.peek_frame() {
                Some(Ok(f)) => {
                    let named = f.interface.and_then(|name| {
                        info.iter()
                            .zip(ports.iter())
                            .position(|(i, p)| p.named_input && i.name == name)
                    });
                    Some((f.ts_ns, named.unwrap_or(default_port)))
                }
                _ => None,
            });
            let Some((ts_ns, port)) = peeked else {
                // The input's end or fault: a poll never spans two inputs.
                self.finish_input();
                if self.spans.is_empty() {
                    continue;
                }
                break;
            };
            if let (Some(&(first_port, ..)), Some(first)) = (spans.first(), captured.first()) {
                let too_long = options
                    .max_span_ns
                    .is_some_and(|m| ts_ns.saturating_sub(first.ts_ns) > m);
                if port != first_port || too_long {
                    break;
                }
            }
            let Some(Some(Ok(f))) = input.reader.as_mut().map(CaptureReader::next_frame) else {
                break;
            };
            let start = arena.len();
            arena.extend_from_slice(f.data);
            spans.push((port, start, arena.len()));
            captured.push(Captured {
                input: *next,
                ts_ns: f.ts_ns,
                orig_len: f.orig_len,
                offset: f.offset,
                resolution: f.resolution,
            });
            input.state.frames += 1;
            resolution.get_or_insert(f.resolution);
            *now_ns = (*now_ns).max(f.ts_ns);
            let st = &mut ports[port].stats;
            st.rx_packets += 1;
            st.rx_bytes += (arena.len() - start) as u64;
        }
    }

    /// As [`PortGroup::poll_tx`], with what the capture said of each frame beside it.
    ///
    /// Errors: none today (a fault in an input ends that input, see [`PcapGroup::inputs`]);
    /// write errors come with the next flush.
    pub fn poll_captured(
        &mut self,
        max: usize,
        on_rx: &mut OnCaptured<'_>,
    ) -> Result<usize, IoError> {
        self.gather(max);
        if self.spans.is_empty() {
            return Ok(0);
        }
        if self.format.is_none() {
            self.output_format();
        }
        let frames: Vec<Frame<'_>> = self
            .spans
            .iter()
            .map(|&(port, a, b)| Frame {
                port,
                data: &self.arena[a..b],
            })
            .collect();
        let mut tx = PcapTx {
            info: &self.info,
            ports: &mut self.ports,
            format: self.format.unwrap_or_default(),
            resolution: self.resolution.unwrap_or_default(),
            ts_ns: self.now_ns,
            note: None,
            write_error: &mut self.write_error,
            scratch: &mut self.scratch,
        };
        on_rx(&frames, &self.captured, &mut tx);
        Ok(frames.len())
    }

    fn tx(&mut self) -> PcapTx<'_> {
        if self.format.is_none() {
            self.output_format();
        }
        PcapTx {
            info: &self.info,
            ports: &mut self.ports,
            format: self.format.unwrap_or_default(),
            resolution: self.resolution.unwrap_or_default(),
            ts_ns: self.now_ns,
            note: None,
            write_error: &mut self.write_error,
            scratch: &mut self.scratch,
        }
    }

    /// Create the outputs still missing that [`PcapPort::empty_output`] asks for, finish every
    /// output, and return the ports' counters.
    ///
    /// Errors: [`IoError::Pcap`] naming the output that cannot be created or written (the
    /// first write error of the run, if any).
    pub fn close(mut self) -> Result<Vec<PortStats>, IoError> {
        let format = self.output_format();
        let resolution = self.resolution.unwrap_or_default();
        if let Some(e) = self.write_error.take() {
            return Err(e);
        }
        for (info, p) in self.info.iter().zip(&mut self.ports) {
            if p.empty_output && p.writer.is_none() {
                create(info, p, format, resolution)?;
            }
            if let Some(w) = p.writer.take() {
                w.finish().map_err(pcap_error)?;
            }
        }
        Ok(self.ports.iter().map(|p| p.stats).collect())
    }
}

/// Open `input` if it is not (its format, or its fault).
fn open_input(input: &mut Input) {
    if input.reader.is_some() || input.state.done {
        return;
    }
    match CaptureReader::open(&input.state.path) {
        Ok(r) => {
            input.state.format = Some(r.format());
            input.reader = Some(r);
        }
        Err(e) => {
            input.state.fault = Some(e);
            input.state.done = true;
        }
    }
}

fn pcap_error(e: CaptureError) -> IoError {
    IoError::Pcap {
        path: e.path().to_path_buf(),
        msg: match e {
            CaptureError::Io { message, .. } => message,
            other => other.to_string(),
        },
    }
}

/// Create port `p`'s output, with its one interface in pcapng.
fn create(
    info: &PortInfo,
    p: &mut Port,
    format: Format,
    resolution: TsResolution,
) -> Result<(), IoError> {
    let Some(path) = &p.output else {
        return Ok(());
    };
    let mut w = CaptureWriter::create(path, format, resolution).map_err(pcap_error)?;
    w.add_interface(&info.name).map_err(pcap_error)?;
    p.writer = Some(w);
    Ok(())
}

/// A [`PcapGroup`]'s outputs, lent apart from its inputs.
struct PcapTx<'a> {
    info: &'a [PortInfo],
    ports: &'a mut [Port],
    format: Format,
    resolution: TsResolution,
    /// The stamp of the frames queued now ([`TxSide::describe`]).
    ts_ns: u64,
    note: Option<String>,
    write_error: &'a mut Option<IoError>,
    scratch: &'a mut Vec<u8>,
}

impl PcapTx<'_> {
    /// Whether `port` takes frames (counting a refusal).
    fn takes(&mut self, port: usize) -> bool {
        match self.ports.get_mut(port) {
            None => false,
            Some(p) if p.output.is_none() => {
                p.stats.tx_dropped += 1;
                false
            }
            Some(_) => true,
        }
    }

    fn write(&mut self, port: usize, frame: &[u8]) -> bool {
        if !self.takes(port) {
            return false;
        }
        let (info, p) = (&self.info[port], &mut self.ports[port]);
        if p.writer.is_none()
            && let Err(e) = create(info, p, self.format, self.resolution)
        {
            p.stats.tx_errors += 1;
            self.write_error.get_or_insert(e);
            return false;
        }
        let Some(w) = p.writer.as_mut() else {
            return false;
        };
        let out = OutFrame {
            comment: self.note.as_deref(),
            ..OutFrame::new(self.ts_ns, frame)
        };
        match w.write(&out) {
            Ok(()) => {
                p.stats.tx_packets += 1;
                p.stats.tx_bytes += frame.len() as u64;
                true
            }
            Err(e) => {
                p.stats.tx_errors += 1;
                self.write_error.get_or_insert(pcap_error(e));
                false
            }
        }
    }
}

impl TxSide for PcapTx<'_> {
    /// `fill` writes into a reused buffer, which is then written to the port's output (file
    /// I/O, buffered).
    fn queue_with(&mut self, port: usize, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> bool {
        if !self.takes(port) {
            return false;
        }
        // `write` checks the port again (it takes frames: nothing more is counted).
        let mut buf = std::mem::take(self.scratch);
        buf.clear();
        buf.resize(len, 0);
        fill(&mut buf);
        let ok = self.write(port, &buf);
        *self.scratch = buf;
        ok
    }

    fn queue(&mut self, port: usize, frame: &[u8]) -> bool {
        self.write(port, frame)
    }

    fn describe(&mut self, ts_ns: u64, note: &str) {
        self.ts_ns = ts_ns;
        if self.format == Format::PcapNg {
            let n = self.note.get_or_insert_with(String::new);
            n.clear();
            n.push_str(note);
        }
    }
}

impl PortGroup for PcapGroup {
    fn ports(&self) -> &[PortInfo] {
        &self.info
    }

    fn poll(
        &mut self,
        min: usize,
        max: usize,
        timeout: Duration,
        on_rx: &mut dyn FnMut(&[Frame<'_>]),
    ) -> Result<usize, IoError> {
        self.poll_tx(min, max, timeout, &mut |frames, _| on_rx(frames))
    }

    /// Never waits; frames queued during `on_rx` are stamped as the module documentation says.
    fn poll_tx(
        &mut self,
        _min: usize,
        max: usize,
        _timeout: Duration,
        on_rx: &mut dyn FnMut(&[Frame<'_>], &mut dyn TxSide),
    ) -> Result<usize, IoError> {
        self.poll_captured(max, &mut |frames, _, tx| on_rx(frames, tx))
    }

    fn queue(&mut self, port: usize, frame: &[u8]) -> bool {
        self.tx().queue(port, frame)
    }

    fn queue_with(&mut self, port: usize, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> bool {
        self.tx().queue_with(port, len, fill)
    }

    /// Reports the first write error since the last flush. Frames are already in their
    /// outputs' buffers, which reach the files as they fill and at [`PcapGroup::close`] (or
    /// when the group is dropped).
    fn flush(&mut self) -> Result<(), IoError> {
        if let Some(e) = self.write_error.take() {
            return Err(e);
        }
        Ok(())
    }

    fn stats(&self) -> Vec<PortStats> {
        self.ports.iter().map(|p| p.stats).collect()
    }

    fn exhausted(&self) -> bool {
        self.next >= self.inputs.len()
    }
}

#[cfg(test)]
mod tests;
