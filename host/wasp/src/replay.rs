//! `wasp replay`: captures through a ruleset, as a live port would feed them.
//!
//! Replay is a daemon worker whose ports are capture files: the same bundle
//! ([`crate::datapath::build`]) and the same loop ([`crate::datapath::Datapath::vector`]) as
//! `wasp run`'s workers, over a port group ([`PcapGroup`]: one port per device, the inputs
//! read as streams, what is sent on a port written to its `tx-DEV` capture), leaving through
//! the same port side ([`PortExit`]). What replay adds: the capture's clock, the accepted and
//! dropped captures, the verdict lines, the trace and the [`Summary`]. The inputs are read in
//! the order given, each in file order; one poll of the group is one vector of up to
//! [`MAX_VECTOR`] packets entering on one device, run at the capture time of its first packet
//! (`now_ns`; capture timestamps are the clock of a replay, DESIGN section 2). A vector never
//! spans two inputs, nor two devices.
//!
//! Devices: every packet enters on the input device ([`ReplayOptions::in_dev`], `--in-dev`,
//! `in-dev` in `sample.toml`; by default the device of the first netdev ingress base chain),
//! except a packet of a pcapng interface whose `if_name` ([`wasp_io::capture::Frame::interface`]) is a device
//! wasp knows, a device of the gateway file or of a netdev ingress base chain: it enters on
//! that device (its `meta iifname`, the base chains it runs, where the gateway routes it from),
//! as it did where the capture was taken (`dumpcap -i trunk0 -i lan0`). An interface without a
//! name, or named after a device wasp does not know, and a classic pcap, enter on the input
//! device. The vector is cut where the device changes. A packet that entered on another device
//! than the input device has ` iif "DEV"` at the end of its `--verdicts` line (its trace lines
//! name the device of every packet, `iif "DEV"`), and the summary's chain rows list the
//! ingress chains of the input device, then those of every other device packets entered on,
//! in the order of its first packet, each naming it; with a single device the output is as
//! before. Results: `accepted.pcap` / `dropped.pcap` (same timestamps and
//! original lengths as the input), the verdict lines, the trace, and a [`Summary`].
//!
//! Captures are read and written by `wasp_io::capture`: each input as a stream (`-` is standard
//! input), in bounded memory whatever its size (`perf/RESULTS.md`: about 20 MiB for 4.5 M
//! frames). A frame sent keeps the capture time of the packet it was made from
//! (`TxSide::describe`), and a pcapng carries that packet's verdict line with it. The output captures are pcap or pcapng
//! ([`ReplayOptions::format`], `--format`; by default the format of the first input), named
//! `.pcap` or `.pcapng` after it. A pcapng output has one interface per device (the device a
//! packet entered on in `accepted`/`dropped`, the device sent on in `tx-DEV`), and each frame
//! carries as its comment the verdict line of its packet (see [`crate::verdicts`]).
//!
//! Plugins ([`crate::plugins`]) run on the same clock: before each vector the runtime's clock
//! moves to the vector's capture time and fires the timers that fell due, so an idle timer
//! expires inside a capture at the capture time it falls due (to the vector); their events go
//! to the summary. Edits that plugin statements make are applied to the frames written to
//! `accepted.pcap` / `dropped.pcap`. `--swap NAME=PATH@N` cuts the vector after input packet
//! `N` and swaps there, so packets up to `N` see the old version and the others the new one.
//!
//! A fault in a capture (truncated, corrupt, not a capture) ends that capture after the packets
//! read before it have been processed and written; the captures after it are still read, and
//! the first fault is returned in [`Report::fault`] (the command then exits 1).
//!
//! Forwarding: when the ruleset has `fwd`/`dup` statements or a gateway file is given
//! ([`ReplayOptions::gateway`], `gateway = "FILE"` in `sample.toml`), every packet goes on
//! through [`Forwarder::after_ingress`] (the same call the daemon makes): `dup` copies, `fwd`
//! targets and what the gateway routes or answers run the netdev egress hook of their device
//! and are written to `tx-DEV.pcap` (one per device, [`tx_file`]); `accepted.pcap` then holds
//! what is delivered to the host side (the gateway's own packets, or every accepted packet
//! that no `fwd` took when there is no gateway), `dropped.pcap` what the ingress hook dropped
//! and what was lost on the way out. The summary's `forward` part counts it all. Frames sent
//! keep the timestamp of the packet they came from.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use wasp_core::{Engine, FinalVerdict, MAX_VECTOR, Outcome, Packet, TraceEvent, TraceSink};
use wasp_gateway::{Fate, Forwarder, Gateway, Send, SendKind};
use wasp_io::capture::{
    CaptureError, CaptureReader, CaptureWriter, Format, OutFrame, Source, TsResolution,
};
use wasp_io::{
    Captured, Frame as PortFrame, IoError, PcapGroup, PcapInput, PcapOptions, PcapPort, PortGroup,
    TxSide,
};
use wasp_plugin::HostConfig;
use wasp_ruleset::model::Hook;

use crate::datapath::{Clocks, Datapath, Exit, Shared, build};
use crate::error::Error;
use crate::names::{BaseChainRef, Names};
use crate::plugins::{
    PluginCache, REPLAY_DEADLINE_TICKS, ReplayPlugins, RuntimeCounters, SwapSpec,
};
use crate::port_exit::PortExit;
use crate::progress::Progress;
use crate::sample::Sample;
use crate::summary::{
    ChainSummary, CounterSummary, DeviceSummary, EventSummary, ForwardSummary, InputStatus,
    InputSummary, LossSummary, NamedCounterSummary, PluginStateSummary, RuleSummary,
    SetCounterSummary, Summary,
};
use crate::trace::{Collector, format_packet_trace};
use crate::verdicts::{self, VerdictWriter};

/// With plugins, the most capture time one vector spans (1 ms): their clock moves (and their
/// timers fire) before each vector, so a timer fires at most this late on the packet clock.
pub const TIME_STEP_NS: u64 = 1_000_000;

/// File name of the accepted packets in the output directory: `accepted.pcap` or
/// `accepted.pcapng`.
pub fn accepted_file(format: Format) -> String {
    format!("accepted.{}", format.name())
}

/// File name of the dropped packets in the output directory: `dropped.pcap` or
/// `dropped.pcapng`.
pub fn dropped_file(format: Format) -> String {
    format!("dropped.{}", format.name())
}

/// File name of the frames sent on device `dev` in the output directory: `tx-DEV.pcap` or
/// `tx-DEV.pcapng`.
pub fn tx_file(dev: &str, format: Format) -> String {
    format!("tx-{dev}.{}", format.name())
}

/// One capture to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Input {
    /// Where the file is.
    pub path: PathBuf,
    /// How to name it in the summary (the path as the user wrote it).
    pub display: String,
    /// When the file is missing: `true` is an error, `false` skips it with a note.
    pub required: bool,
}

impl Input {
    /// A required input named by its path.
    pub fn required(path: impl Into<PathBuf>) -> Self {
        let path = path.into();
        Input {
            display: path.display().to_string(),
            path,
            required: true,
        }
    }
}

/// What to replay and where the results go.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ReplayOptions {
    /// The ruleset file.
    pub ruleset: PathBuf,
    /// Captures in order.
    pub inputs: Vec<Input>,
    /// Input device; `None`: the device of the first netdev ingress base chain. The default
    /// only for pcapng packets whose interface names a device wasp knows (see the module doc).
    pub in_dev: Option<String>,
    /// Directory for `accepted.pcap` and `dropped.pcap` (created when missing); `None` writes
    /// no captures.
    pub out_dir: Option<PathBuf>,
    /// File for the verdict lines.
    pub verdicts: Option<PathBuf>,
    /// Produce the `nft monitor trace` style walk of every packet.
    pub trace: bool,
    /// Plugin swaps (`--swap NAME=PATH@N`).
    pub swaps: Vec<SwapSpec>,
    /// The gateway file (devices, addresses, routes, neighbours; see
    /// [`wasp_gateway::Gateway::parse`]): accepted packets are routed.
    pub gateway: Option<PathBuf>,
    /// Format of the output captures; `None`: pcapng when the first input is a pcapng, pcap
    /// otherwise.
    pub format: Option<Format>,
}

impl ReplayOptions {
    /// The options a sample directory declares (its ruleset, captures, device, out dir).
    pub fn from_sample(sample: &Sample) -> Self {
        ReplayOptions {
            ruleset: sample.ruleset.clone(),
            inputs: sample
                .captures
                .iter()
                .map(|c| Input {
                    path: c.path.clone(),
                    display: c.declared.display().to_string(),
                    required: c.required,
                })
                .collect(),
            in_dev: sample.in_dev.clone(),
            out_dir: Some(sample.out.clone()),
            verdicts: None,
            trace: false,
            swaps: sample.swaps.clone(),
            gateway: sample.gateway.clone(),
            format: None,
        }
    }
}

/// The result of a run that got as far as reading captures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// Counts.
    pub summary: Summary,
    /// Things the user should know (a skipped capture, no base chain on the device).
    pub notes: Vec<String>,
    /// The first capture fault of the run, if any: that capture stopped there, the packets
    /// before it have their results, and later captures were still read.
    pub fault: Option<CaptureError>,
    /// The ruleset as `nft list ruleset` lists it after the run: rule counters, named
    /// counter objects and set element counters with their counts (`wasp replay --list`).
    pub listing: String,
    /// The connections conntrack holds after the last packet, one line each as `wasp ctl list
    /// conntrack` lists them (timeouts on the capture's clock); empty without a gateway that
    /// runs the IP path.
    pub conntrack: Vec<String>,
}

/// The netdev ingress base chains of one input device, in hook order, for the summary.
struct ChainCounts {
    chains: Vec<BaseChainRef>,
    counts: Vec<ChainSummary>,
}

impl ChainCounts {
    fn new(names: &Names, dev: &str) -> Self {
        ChainCounts::of(names, names.ingress_chains(dev))
    }

    fn of(names: &Names, chains: Vec<BaseChainRef>) -> Self {
        let counts = chains
            .iter()
            .map(|b| ChainSummary {
                family: names.family(b.table).to_string(),
                table: names.table(b.table).to_string(),
                chain: names.chain(b.table, b.chain).to_string(),
                priority: b.priority,
                ..ChainSummary::default()
            })
            .collect();
        ChainCounts { chains, counts }
    }

    /// Fill in the counts from the engine's own per-base-chain statistics: every packet whose
    /// walk entered a chain, and how that walk ended (an accept moves on to the next base
    /// chain of the hook, a drop ends the walk).
    fn fill(&mut self, engine: &Engine, hook: Hook, dev: &str) {
        for s in engine.chain_stats(hook, dev) {
            if let Some(pos) = self
                .chains
                .iter()
                .position(|b| b.table == s.table && b.chain == s.chain)
            {
                let c = &mut self.counts[pos];
                c.packets = s.packets;
                c.accepted = s.accepted;
                c.dropped = s.dropped;
            }
        }
    }
}

/// One output capture and, in pcapng, the devices its interfaces describe (added at the first
/// frame of each).
struct OutCapture {
    w: CaptureWriter<BufWriter<File>>,
    devices: Vec<String>,
}

impl OutCapture {
    fn create(path: &Path, format: Format, resolution: TsResolution) -> Result<Self, Error> {
        Ok(OutCapture {
            w: CaptureWriter::create(path, format, resolution)?,
            devices: Vec::new(),
        })
    }

    /// Append `frame`, which entered on (or leaves by) `dev`.
    fn write(&mut self, dev: &str, frame: OutFrame<'_>) -> Result<(), Error> {
        let interface = match self.devices.iter().position(|d| d == dev) {
            Some(i) => i as u32,
            None => {
                self.devices.push(dev.to_string());
                self.w.add_interface(dev)?
            }
        };
        self.w.write(&OutFrame { interface, ..frame })?;
        Ok(())
    }

    fn finish(self) -> Result<(), Error> {
        self.w.finish()?;
        Ok(())
    }
}

/// Output files of a run that are not ports' (those are the [`PcapGroup`]'s `tx-DEV`): what
/// was delivered and what was dropped, and the verdict lines.
struct Outputs {
    dir: Option<PathBuf>,
    /// The format of the output captures.
    format: Format,
    accepted: Option<OutCapture>,
    dropped: Option<OutCapture>,
    /// The resolution of the first frame.
    resolution: Option<TsResolution>,
    verdicts: Option<(PathBuf, VerdictWriter<BufWriter<File>>)>,
}

impl Outputs {
    fn open(opts: &ReplayOptions, format: Format) -> Result<Self, Error> {
        if let Some(dir) = &opts.out_dir {
            std::fs::create_dir_all(dir).map_err(|e| Error::Output {
                path: dir.clone(),
                message: e.to_string(),
            })?;
        }
        let verdicts = match &opts.verdicts {
            None => None,
            Some(p) => {
                let f = File::create(p).map_err(|e| Error::Output {
                    path: p.clone(),
                    message: e.to_string(),
                })?;
                Some((p.clone(), VerdictWriter::new(BufWriter::new(f))))
            }
        };
        Ok(Outputs {
            dir: opts.out_dir.clone(),
            format,
            accepted: None,
            dropped: None,
            resolution: None,
            verdicts,
        })
    }

    /// Whether the frames written carry their verdict lines (pcapng comments).
    fn comments(&self) -> bool {
        self.dir.is_some() && self.format == Format::PcapNg
    }

    /// Create the accepted and dropped captures (at the first packet, with its timestamp
    /// resolution).
    fn ensure_captures(&mut self, resolution: TsResolution) -> Result<(), Error> {
        self.resolution.get_or_insert(resolution);
        let Some(dir) = &self.dir else { return Ok(()) };
        if self.accepted.is_none() {
            let f = self.format;
            self.accepted = Some(OutCapture::create(
                &dir.join(accepted_file(f)),
                f,
                resolution,
            )?);
            self.dropped = Some(OutCapture::create(
                &dir.join(dropped_file(f)),
                f,
                resolution,
            )?);
        }
        Ok(())
    }

    /// Write a packet that entered on `dev` to the accepted or the dropped capture.
    fn write(
        &mut self,
        dev: &str,
        resolution: TsResolution,
        frame: OutFrame<'_>,
        verdict: FinalVerdict,
    ) -> Result<(), Error> {
        self.ensure_captures(resolution)?;
        let w = match verdict {
            FinalVerdict::Accept => self.accepted.as_mut(),
            FinalVerdict::Drop => self.dropped.as_mut(),
        };
        if let Some(w) = w {
            w.write(dev, frame)?;
        }
        Ok(())
    }

    fn verdict(&mut self, line: &str) -> Result<(), Error> {
        if let Some((path, w)) = &mut self.verdicts {
            w.write_line(line).map_err(|e| Error::Output {
                path: path.clone(),
                message: e.to_string(),
            })?;
        }
        Ok(())
    }

    /// Flush everything (the accepted and dropped captures exist even without packets).
    fn finish(mut self) -> Result<(), Error> {
        self.ensure_captures(TsResolution::Micro)?;
        if let Some(w) = self.accepted.take() {
            w.finish()?;
        }
        if let Some(w) = self.dropped.take() {
            w.finish()?;
        }
        if let Some((path, w)) = self.verdicts.take() {
            w.finish().map_err(|e| Error::Output {
                path,
                message: e.to_string(),
            })?;
        }
        Ok(())
    }
}

/// Everything a run keeps between vectors.
struct Run<'o> {
    /// The one worker's data path (the same as a daemon worker's).
    dp: Datapath,
    /// What the vectors' results are written into.
    rec: Record<'o>,
    /// The ports' names (devices), by port index; port 0 is the default input device.
    ports: Vec<String>,
    /// The ports packets entered on: the default input device first, then each device a
    /// pcapng interface name chose, in the order of their first packet.
    devs: Vec<usize>,
    /// The ruleset asks for forwarding (`fwd`, `dup`, `reject`) or a gateway file is given:
    /// the summary reports the way out.
    forwarding: bool,
    /// The swaps `--swap` asks for, when the ruleset has plugins.
    plugins: Option<ReplayPlugins>,
    /// Plugin events so far.
    events: Vec<EventSummary>,
    /// The latest capture time seen (ns), and notes of inputs that start before it.
    clock_ns: u64,
    clock_notes: Vec<String>,
    /// Counts by input of the port group.
    inputs: Vec<InputSummary>,
    /// The input of the last frame seen.
    last_input: Option<usize>,
}

/// A frame of the vector in flight, as the capture gave it (what its outputs keep).
#[derive(Debug, Clone, Copy)]
struct InFrame {
    ts_ns: u64,
    len: usize,
    orig_len: u32,
    resolution: TsResolution,
}

impl InFrame {
    /// The output frame of `data` made from this one: the same timestamp; the original
    /// length grown or shrunk by what the walk's edits did to the captured length.
    fn out<'d>(&self, data: &'d [u8]) -> OutFrame<'d> {
        let grown = data.len() as i64 - self.len as i64;
        OutFrame {
            orig_len: (i64::from(self.orig_len) + grown).max(0) as u32,
            ..OutFrame::new(self.ts_ns, data)
        }
    }
}

/// What replay writes of a vector's results: the accepted and dropped captures, the verdict
/// lines, the trace, the summary's counts. (What leaves goes to the ports: [`ReplayExit`].)
struct Record<'o> {
    names: Names,
    trace: Option<&'o mut dyn Write>,
    collector: Collector,
    outputs: Outputs,
    summary: Summary,
    /// Input packets so far (the verdict lines' and the trace's packet numbers).
    index: u64,
    /// (table, chain, rule handle or `u64::MAX` for the policy, drop?) -> packets.
    decisions: BTreeMap<(u32, u32, u64, bool), u64>,
    /// The vector in flight: its frames, its device and whether verdict lines name it.
    frames: Vec<InFrame>,
    dev: String,
    named_dev: bool,
    /// The trace events of the vector in flight, by packet (taken at its first packet).
    walks: Vec<Vec<TraceEvent>>,
    /// Counts of the vector in flight, for its input's summary.
    input: InputSummary,
    /// The first output error of the vector (the run stops there).
    err: Option<Error>,
    /// What the packet in flight sends, queued once its verdict line is known.
    sends: Vec<Send>,
    /// The verdict line of the packet in flight (reused).
    line: String,
}

impl Record<'_> {
    fn check(&mut self, r: Result<(), Error>) {
        if let Err(e) = r {
            self.err.get_or_insert(e);
        }
    }

    /// On standard error, in the order they ran, as the kernel log would show them.
    fn log(lines: &[String]) {
        let mut err = std::io::stderr().lock();
        for line in lines {
            let _ = writeln!(err, "{line}");
        }
    }

    /// Packet `i` is done: its counts, its verdict line, what it sends (queued on `port`,
    /// stamped with its capture time and its verdict line), its frame in the accepted or
    /// dropped capture, its trace.
    fn done(
        &mut self,
        i: usize,
        p: &Packet<'_>,
        outcome: &Outcome,
        frame: &[u8],
        fate: Fate,
        port: &mut PortExit<'_>,
    ) {
        if i > 0 && self.trace.is_some() {
            // Its walks through the IP hooks, given just before its turn.
            let later = self.collector.take_by_packet(self.frames.len());
            for (w, l) in self.walks.iter_mut().zip(later) {
                w.extend(l);
            }
        }
        if i == 0 && self.trace.is_some() {
            self.walks = self.collector.take_by_packet(self.frames.len());
            // `log` lines from the trace's events, in packet order (the IP hooks' come
            // through the exit's `log`).
            let lines: Vec<String> = self
                .walks
                .iter()
                .flatten()
                .filter_map(|e| match e {
                    TraceEvent::Log { text, .. } => Some(text.clone()),
                    _ => None,
                })
                .collect();
            Record::log(&lines);
        }
        self.index += 1;
        self.summary.packets += 1;
        self.input.packets += 1;
        if p.meta.malformed.is_some() {
            self.summary.malformed += 1;
            self.input.malformed += 1;
        }
        match outcome.verdict {
            FinalVerdict::Accept => {
                self.summary.accepted += 1;
                self.input.accepted += 1;
            }
            FinalVerdict::Drop => {
                self.summary.dropped += 1;
                self.input.dropped += 1;
            }
        }
        match outcome.decision {
            None => self.summary.unseen += 1,
            Some(d) => {
                let key = (
                    d.table,
                    d.chain,
                    d.rule.unwrap_or(u64::MAX),
                    outcome.verdict == FinalVerdict::Drop,
                );
                *self.decisions.entry(key).or_default() += 1;
            }
        }
        // The verdict line: the `--verdicts` file's, and the comment of every frame written
        // for the packet in a pcapng.
        let iif = self.named_dev.then_some(self.dev.as_str());
        let mut line = std::mem::take(&mut self.line);
        line.clear();
        if self.outputs.verdicts.is_some() || self.outputs.comments() {
            verdicts::write_line(&mut line, self.index, outcome, &self.names, iif);
        }
        let f = self.frames[i];
        // What leaves: on its port, at the packet's capture time.
        for s in self.sends.drain(..) {
            port.tx().describe(f.ts_ns, &line);
            port.send(&s, frame);
        }
        port.done(fate);
        // accepted: what is delivered to the host side; dropped: what the ingress hook
        // dropped and what was lost on the way out.
        let comment = self.outputs.comments().then_some(line.as_str());
        let out = OutFrame {
            comment,
            ..f.out(frame)
        };
        let r = match fate {
            Fate::Local => self
                .outputs
                .write(&self.dev, f.resolution, out, FinalVerdict::Accept),
            Fate::Dropped(_) => {
                self.outputs
                    .write(&self.dev, f.resolution, out, FinalVerdict::Drop)
            }
            Fate::Sent | Fate::Replied => Ok(()),
        };
        self.check(r);
        let r = self.outputs.verdict(&line);
        self.check(r);
        self.line = line;
        if let Some(t) = self.trace.as_mut() {
            let text = format_packet_trace(
                self.index,
                self.walks.get(i).map_or(&[][..], Vec::as_slice),
                &self.names,
                &self.dev,
                p.frame,
                &p.meta,
            );
            if let Err(e) = t.write_all(text.as_bytes()) {
                self.err.get_or_insert(Error::Output {
                    path: PathBuf::from("<trace>"),
                    message: e.to_string(),
                });
            }
        }
    }
}

/// Replay's [`Exit`]: the ports' (shared with the daemon's worker: [`PortExit`]) and
/// replay's own record.
struct ReplayExit<'r, 'o, 'p> {
    rec: &'r mut Record<'o>,
    port: PortExit<'p>,
}

impl Exit for ReplayExit<'_, '_, '_> {
    /// Trace events only when a trace is printed: the summary's counts come from the
    /// outcomes and the engine's per-base-chain statistics.
    fn trace(&mut self) -> Option<&mut dyn TraceSink> {
        match self.rec.trace {
            Some(_) => Some(&mut self.rec.collector),
            None => None,
        }
    }

    fn log(&mut self, lines: Vec<String>, _: u64) {
        Record::log(&lines);
    }

    /// Kept until the packet is done: a frame sent carries its packet's verdict line.
    fn send(&mut self, _: usize, s: &Send, _: &[u8]) {
        self.rec.sends.push(s.clone());
    }

    fn done(&mut self, i: usize, p: &Packet<'_>, outcome: &Outcome, frame: &[u8], fate: Fate) {
        self.rec.done(i, p, outcome, frame, fate, &mut self.port);
    }
}

impl Run<'_> {
    /// Classify one poll of the port group (frames of one input entering on one port, see
    /// [`PcapGroup`]) as one vector through the data path at the capture time of its first
    /// frame, and record every result; what leaves is queued on `tx`.
    fn vector(
        &mut self,
        frames: &[PortFrame<'_>],
        caps: &[Captured],
        tx: &mut dyn TxSide,
    ) -> Result<(), Error> {
        let (Some(first), Some(f0)) = (caps.first(), frames.first()) else {
            return Ok(());
        };
        if self.last_input != Some(first.input) {
            self.last_input = Some(first.input);
            if first.ts_ns < self.clock_ns && self.dp.forwarder.netfilter().is_some() {
                // The packet clock drives conntrack's and the flowtables' timeouts.
                let path = self.inputs[first.input].path.clone();
                self.clock_notes.push(format!(
                    "{path} starts {:.3} s before the previous input's last packet: the packet clock goes back (conntrack and flowtable timeouts)",
                    (self.clock_ns - first.ts_ns) as f64 / 1e9
                ));
            }
        }
        for c in caps {
            self.clock_ns = self.clock_ns.max(c.ts_ns);
        }
        let port = f0.port;
        if !self.devs.contains(&port) {
            self.devs.push(port);
        }
        let now = first.ts_ns;
        let rec = &mut self.rec;
        rec.summary.start_ns.get_or_insert(now);
        if let Some(p) = self.plugins.as_mut() {
            p.note_time(now);
        }
        rec.frames.clear();
        rec.frames
            .extend(frames.iter().zip(caps).map(|(f, c)| InFrame {
                ts_ns: c.ts_ns,
                len: f.data.len(),
                orig_len: c.orig_len,
                resolution: c.resolution,
            }));
        rec.dev.clone_from(&self.ports[port]);
        // Verdict lines name the device only when it is not the default one.
        rec.named_dev = port != 0;
        rec.input = InputSummary::default();
        let mut exit = ReplayExit {
            rec,
            port: PortExit::new(tx, &self.ports),
        };
        self.dp.vector(
            &self.ports[port],
            frames.iter().map(|f| f.data),
            now,
            &mut exit,
        );
        let rec = &mut self.rec;
        let input = &mut self.inputs[first.input];
        input.packets += rec.input.packets;
        input.malformed += rec.input.malformed;
        input.accepted += rec.input.accepted;
        input.dropped += rec.input.dropped;
        if let (Some(p), Some(rt)) = (self.plugins.as_mut(), self.dp.runtime.as_mut()) {
            self.events
                .extend(p.take_events(rt).into_iter().map(|e| EventSummary {
                    time_ns: e.at_ns,
                    plugin: e.plugin,
                    text: e.text,
                }));
        }
        match rec.err.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// A port group's error as the command's: the output capture it names.
fn port_error(e: IoError) -> Error {
    match e {
        IoError::Pcap { path, msg } => Error::Output { path, message: msg },
        other => Error::Output {
            path: PathBuf::from("<ports>"),
            message: other.to_string(),
        },
    }
}

/// Run a replay. Trace text (when `opts.trace`) goes to `trace_out`.
///
/// # Errors
/// [`Error::Ruleset`] before anything is read when the ruleset is bad; [`Error::MissingCapture`]
/// for a missing required input (also before anything is read); [`Error::Output`] or
/// [`Error::Capture`] (I/O) when an output cannot be written. A fault inside a capture is not an
/// error here: it is returned in [`Report::fault`] with the results of the packets before it.
pub fn replay(
    opts: &ReplayOptions,
    trace_out: Option<&mut dyn Write>,
    progress: &mut Progress,
) -> Result<Report, Error> {
    // Set hashes seeded as the connection table's, before any set is built (a no-op when a
    // process replays twice).
    wasp_sets::seed::fix_hash_seed(crate::datapath::REPLAY_SEED);
    let ruleset = wasp_ruleset::parse_file(&opts.ruleset)?;
    // The inputs, each opened at its turn; the first ones earlier, for the start of the clock
    // and the output format.
    let mut readers: Vec<Option<Opened>> = opts.inputs.iter().map(|_| None).collect();
    let start_ns = first_timestamp(&opts.inputs, &mut readers).unwrap_or(0);
    let format =
        opts.format
            .unwrap_or_else(|| match opts.inputs.first().filter(|i| is_present(i)) {
                Some(first) => {
                    match readers[0].get_or_insert_with(|| CaptureReader::open(&first.path)) {
                        Ok(r) => r.format(),
                        Err(_) => Format::Pcap,
                    }
                }
                None => Format::Pcap,
            });
    let mut names = Names::new(&ruleset);
    let mut notes = Vec::new();
    let dev = match (&opts.in_dev, names.first_ingress_device()) {
        (Some(d), _) => d.clone(),
        (None, Some(d)) => d.to_string(),
        (None, None) => String::new(),
    };
    let gateway = match &opts.gateway {
        None => None,
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| wasp_ruleset::Error::Io {
                path: path.clone(),
                message: e.to_string(),
            })?;
            let g = Gateway::parse(&text, &path.display().to_string())?;
            if g.device(&dev).is_none() {
                notes.push(format!(
                    "the gateway file names no device \"{dev}\": the packets accepted there are dropped (unknown-device)"
                ));
            }
            Some(g)
        }
    };
    // The one worker's bundle, made as a daemon worker's: conntrack, NAT and flowtables for
    // the packets the gateway routes (deterministic: the tables' hash seeds are fixed, its
    // clock is the capture's); plugins with the replay's deadline.
    let mut cache = PluginCache::default();
    let mut shared = Shared::single(
        &mut cache,
        HostConfig {
            deadline_ticks: REPLAY_DEADLINE_TICKS,
            ..HostConfig::default()
        },
    );
    let clocks = Clocks {
        epoch_ns: None,
        wall_epoch_ns: 0,
        now_ns: start_ns,
    };
    let bundle = build(&ruleset, 0, 1, clocks, gateway.is_some(), &mut shared)?;
    let mut plugins = match (&bundle.runtime, shared.host.made()) {
        (Some(_), Some(host)) => Some(ReplayPlugins::load(
            host,
            shared.cache.search(),
            &ruleset,
            &bundle.engine,
            &opts.swaps,
            start_ns,
        )?),
        _ if !opts.swaps.is_empty() => {
            let s = &opts.swaps[0];
            return Err(Error::Usage(format!(
                "--swap {}=...: the ruleset declares no plugin `{}`",
                s.name, s.name
            )));
        }
        _ => None,
    };
    let engine = &bundle.engine;
    if opts.trace {
        names.learn_rule_texts(&wasp_ruleset::print_ruleset(&ruleset, true));
        names.learn_sites(engine);
    }
    let forwarding = gateway.is_some() || !engine.out_targets().is_empty() || engine.has_rejects();
    // The devices that get a tx pcap: the gateway's and the fwd/dup targets.
    let tx_gateway_devices: Vec<String> = gateway
        .iter()
        .flat_map(|g| g.devices().iter().map(|d| d.name.clone()))
        .collect();
    let mut tx_devices: Vec<String> = gateway
        .iter()
        .flat_map(|g| g.devices().iter().map(|d| d.name.clone()))
        .chain(engine.out_targets().iter().map(|t| t.dev.to_string()))
        .collect();
    tx_devices.sort();
    tx_devices.dedup();
    if forwarding {
        notes.push(
            "forwarding: netdev egress chains run on the frames sent (tx-DEV.pcap); accepted.pcap holds what is delivered to the host side".to_string(),
        );
    }
    if names.ingress_chains(&dev).is_empty() {
        notes.push(format!(
            "no netdev ingress base chain on device \"{dev}\": every packet is accepted unseen"
        ));
    }

    // Missing inputs: an error when required, before anything is processed.
    let mut present = Vec::new();
    let mut summary = Summary {
        ruleset: opts.ruleset.display().to_string(),
        in_dev: dev.clone(),
        ..Summary::default()
    };
    for input in &opts.inputs {
        if is_present(input) {
            present.push(true);
        } else if input.required {
            return Err(Error::MissingCapture {
                path: input.path.clone(),
            });
        } else {
            present.push(false);
            notes.push(format!("skipping {}: not found", input.display));
        }
    }
    if opts.inputs.is_empty() {
        return Err(Error::Usage(
            "no capture to replay: give --in CAPTURE (or a sample directory)".to_string(),
        ));
    }

    progress.start(
        opts.inputs
            .iter()
            .filter_map(|i| std::fs::metadata(&i.path).ok())
            .map(|m| m.len())
            .sum(),
    );
    // The ports: the input device first, then the devices a pcapng interface may name (those
    // of netdev ingress base chains and of the gateway file), then those only sent on. Each
    // writes what is sent on it to `tx-DEV.pcap`; the devices of the gateway and the fwd/dup
    // targets get theirs even when nothing was sent.
    let known: Vec<String> = names
        .ingress_devices()
        .into_iter()
        .map(str::to_string)
        .chain(tx_gateway_devices)
        .collect();
    let mut port_names = vec![dev.clone()];
    for d in known.iter().chain(&tx_devices) {
        if !port_names.contains(d) {
            port_names.push(d.clone());
        }
    }
    let ports = port_names
        .iter()
        .enumerate()
        .map(|(i, name)| PcapPort {
            name: name.clone(),
            named_input: i == 0 || known.contains(name),
            output: opts.out_dir.as_ref().map(|d| d.join(tx_file(name, format))),
            empty_output: forwarding && tx_devices.contains(name),
        })
        .collect();
    // The inputs there are, in order, each entering on the input device unless its pcapng
    // interface names another; those opened already are read on from where they are.
    let mut group_inputs = Vec::new();
    let mut input_summaries = Vec::new();
    for ((input, here), reader) in opts.inputs.iter().zip(&present).zip(&mut readers) {
        if *here {
            group_inputs.push(PcapInput {
                reader: reader.take(),
                ..PcapInput::new(&input.path, 0)
            });
            input_summaries.push(InputSummary {
                path: input.display.clone(),
                ..InputSummary::default()
            });
        }
    }
    let mut group = PcapGroup::open(
        ports,
        group_inputs,
        PcapOptions {
            format: Some(format),
            // With plugins, a vector spans at most TIME_STEP_NS of capture time, so that
            // their timers fire (before each vector) close to when they fall due.
            max_span_ns: plugins.is_some().then_some(TIME_STEP_NS),
        },
    )
    .map_err(port_error)?;
    let mut dp = Datapath::new(bundle, Forwarder::new(gateway));
    if let (Some(p), Some(rt)) = (plugins.as_mut(), dp.runtime.as_mut()) {
        // `@0`: before the first packet.
        p.apply_swaps(rt, 0);
    }
    let mut run = Run {
        dp,
        rec: Record {
            names,
            trace: if opts.trace { trace_out } else { None },
            collector: Collector::default(),
            outputs: Outputs::open(opts, format)?,
            summary,
            index: 0,
            decisions: BTreeMap::new(),
            frames: Vec::with_capacity(MAX_VECTOR),
            dev: String::new(),
            named_dev: false,
            walks: Vec::new(),
            input: InputSummary::default(),
            err: None,
            sends: Vec::new(),
            line: String::new(),
        },
        ports: port_names,
        devs: vec![0],
        forwarding,
        plugins,
        events: Vec::new(),
        clock_ns: 0,
        clock_notes: Vec::new(),
        inputs: input_summaries,
        last_input: None,
    };
    // The worker's loop, on the capture clock: one poll of the ports is one vector.
    let mut done_bytes = 0;
    loop {
        // A swap cuts the vector after its packet.
        let max = match run.plugins.as_ref().and_then(ReplayPlugins::next_swap) {
            Some(n) => usize::try_from(n.saturating_sub(run.rec.index))
                .unwrap_or(MAX_VECTOR)
                .clamp(1, MAX_VECTOR),
            None => MAX_VECTOR,
        };
        let mut err = None;
        let n = group
            .poll_captured(max, &mut |frames, caps, tx| {
                if let Err(e) = run.vector(frames, caps, tx) {
                    err.get_or_insert(e);
                }
            })
            .map_err(port_error)?;
        if let Some(e) = err {
            return Err(e);
        }
        group.flush().map_err(port_error)?;
        if n == 0 {
            break;
        }
        if let (Some(p), Some(rt)) = (run.plugins.as_mut(), run.dp.runtime.as_mut()) {
            p.apply_swaps(rt, run.rec.index);
        }
        let read = group.bytes_read();
        progress.advance(read.saturating_sub(done_bytes));
        done_bytes = read;
    }
    // Each input's summary, in the order given; the first fault is the run's (later captures
    // were still read: a capture cut short by a killed tcpdump should not hide the ones after
    // it).
    let mut fault = None;
    let mut states = group.inputs();
    let mut counted = std::mem::take(&mut run.inputs).into_iter();
    for (input, here) in opts.inputs.iter().zip(&present) {
        if !*here {
            run.rec.summary.inputs.push(InputSummary {
                path: input.display.clone(),
                status: InputStatus::Skipped,
                note: Some("not found".to_string()),
                ..InputSummary::default()
            });
            continue;
        }
        let (Some(state), Some(mut s)) = (states.next(), counted.next()) else {
            continue;
        };
        s.format = state.format;
        if let Some(e) = &state.fault {
            s.status = InputStatus::Fault;
            s.note = Some(e.to_string());
            fault.get_or_insert(e.clone());
        }
        run.rec.summary.inputs.push(s);
    }
    drop(states);
    group.close().map_err(port_error)?;
    progress.finish();
    notes.append(&mut run.clock_notes);
    let mut conntrack = Vec::new();
    if let Some(nf) = run.dp.forwarder.netfilter() {
        // What conntrack and the flowtables hold at the end of the captures.
        let ct = nf.conntrack();
        conntrack = ct
            .entries(run.clock_ns)
            .iter()
            .map(ToString::to_string)
            .collect();
        let s = ct.stats();
        notes.push(format!(
            "conntrack: {} connections at the end ({} new, {} invalid, {} dropped when full)",
            ct.len(),
            s.new,
            s.invalid,
            s.drop
        ));
        for ft in nf.flowtables() {
            let st = ft.stats();
            notes.push(format!(
                "flowtable {}: {} flows at the end, {} added, {} removed",
                ft.config().name,
                st.flows,
                st.added,
                st.removed
            ));
        }
    }
    if let (Some(p), Some(rt)) = (run.plugins.as_mut(), run.dp.runtime.as_mut()) {
        notes.extend(p.unapplied(run.rec.index));
        // Events of the swaps made after the last packet.
        run.events
            .extend(p.take_events(rt).into_iter().map(|e| EventSummary {
                time_ns: e.at_ns,
                plugin: e.plugin,
                text: e.text,
            }));
    }
    run.rec.summary.events = std::mem::take(&mut run.events);
    if let (Some(p), Some(rt)) = (run.plugins.as_mut(), run.dp.runtime.as_mut()) {
        run.rec.summary.plugin_state = p
            .states(rt, &run.dp.engine)
            .into_iter()
            .map(|(site, plugin, state)| {
                let span = run.dp.engine.ext_site_span(site).unwrap_or_default();
                let file = ruleset
                    .source(span.file)
                    .map_or_else(String::new, |s| s.path.display().to_string());
                PluginStateSummary {
                    at: format!("{file}:{}:{}", span.line, span.col),
                    plugin,
                    state,
                }
            })
            .collect();
    }
    summary = run.rec.summary;
    // The ingress chains of the default device, then those of every other device packets
    // entered on (in the order of their first packet), each row naming its device.
    for (i, dev) in run.devs.iter().map(|&p| &run.ports[p]).enumerate() {
        let mut chains = ChainCounts::new(&run.rec.names, dev);
        chains.fill(&run.dp.engine, Hook::Ingress, dev);
        summary
            .chains
            .extend(chains.counts.into_iter().map(|mut c| {
                if i != 0 {
                    c.dev = Some(dev.clone());
                }
                c
            }));
    }
    // With a gateway that runs the IP path, the chains of the IP hooks, in hook order.
    if run.dp.forwarder.netfilter().is_some() {
        for hook in [
            Hook::Prerouting,
            Hook::Input,
            Hook::Forward,
            Hook::Postrouting,
        ] {
            let mut chains = ChainCounts::of(&run.rec.names, run.rec.names.ip_hook_chains(hook));
            chains.fill(&run.dp.engine, hook, "");
            summary.chains.extend(chains.counts);
        }
    }
    summary.decided_by = run
        .rec
        .decisions
        .iter()
        .map(|(&(t, c, h, drop), &packets)| RuleSummary {
            table: run.rec.names.table(t).to_string(),
            chain: run.rec.names.chain(t, c).to_string(),
            rule: (h != u64::MAX).then_some(h),
            verdict: if drop { "drop" } else { "accept" }.to_string(),
            packets,
        })
        .collect();
    let mut none = crate::plugins::NoCounters;
    let mut runtime_counts;
    let src: &mut dyn wasp_core::CounterSource = match run.dp.runtime.as_mut() {
        Some(rt) => {
            runtime_counts = RuntimeCounters(rt);
            &mut runtime_counts
        }
        None => &mut none,
    };
    summary.counters = run
        .dp
        .engine
        .counters(src)
        .into_iter()
        .map(|c| CounterSummary {
            table: run.rec.names.table(c.table).to_string(),
            chain: run.rec.names.chain(c.table, c.chain).to_string(),
            rule: c.handle,
            packets: c.packets,
            bytes: c.bytes,
        })
        .collect();
    summary.named_counters = run
        .dp
        .engine
        .named_counters(src)
        .into_iter()
        .map(|c| NamedCounterSummary {
            table: run.rec.names.table(c.table).to_string(),
            name: c.name,
            packets: c.packets,
            bytes: c.bytes,
        })
        .collect();
    summary.set_counters = run
        .dp
        .engine
        .set_element_counters(src)
        .into_iter()
        .filter_map(|c| {
            let t = ruleset.tables.get(c.table as usize)?;
            let e = t
                .sets
                .iter()
                .find(|s| s.name == c.set)?
                .elements
                .get(c.element)?;
            Some(SetCounterSummary {
                table: t.name.clone(),
                set: c.set,
                element: wasp_ruleset::element_key_text(&e),
                packets: c.packets,
                bytes: c.bytes,
            })
        })
        .collect();
    summary.forward = run
        .forwarding
        .then(|| forward_summary(&run.dp.forwarder, opts.gateway.as_deref()));
    let mut listed = ruleset.clone();
    run.dp.engine.store_counters(&mut listed, src);
    run.dp
        .engine
        .store_dynamic_elements(&mut listed, run.clock_ns);
    run.rec.outputs.finish()?;
    Ok(Report {
        summary,
        notes,
        fault,
        listing: wasp_ruleset::print_ruleset(&listed, false),
        conntrack,
    })
}

/// The summary's forwarding part.
fn forward_summary(fw: &Forwarder, gateway: Option<&Path>) -> ForwardSummary {
    let st = fw.stats();
    let g = fw.gateway().map(|g| *g.stats()).unwrap_or_default();
    ForwardSummary {
        gateway: gateway.map(|p| p.display().to_string()),
        local: st.local,
        forwarded: st.sent(SendKind::Forward),
        offloaded: st.sent(SendKind::Flow),
        fwd: st.sent(SendKind::Fwd),
        dup: st.sent(SendKind::Dup),
        replied: st.sent(SendKind::Reply),
        arp_replies: g.arp_replies,
        nd_replies: g.nd_replies,
        time_exceeded: g.time_exceeded,
        solicited: st.sent(SendKind::Solicit),
        unreachable: st.sent(SendKind::Unreachable),
        rejected: st.sent(SendKind::Reject),
        lost: st
            .lost
            .iter()
            .map(|(l, &packets)| LossSummary {
                reason: l.name().to_string(),
                packets,
            })
            .collect(),
        devices: st
            .by_device
            .iter()
            .map(|(d, &packets)| DeviceSummary {
                dev: d.clone(),
                packets,
            })
            .collect(),
    }
}

/// A capture opened, or why it could not be.
type Opened = Result<CaptureReader<Source>, CaptureError>;

/// Whether an input is there to be read: standard input (`-`) or an existing file.
fn is_present(input: &Input) -> bool {
    input.path == Path::new("-") || input.path.exists()
}

/// The capture time of the first frame of the first input that has one (the replay's clock
/// starts there: plugins configured before the run arm their timers from it). The inputs
/// opened to find it are kept in `readers`, their first frame not taken.
fn first_timestamp(inputs: &[Input], readers: &mut [Option<Opened>]) -> Option<u64> {
    for (input, slot) in inputs.iter().zip(readers) {
        if !is_present(input) {
            continue;
        }
        let opened = slot.get_or_insert_with(|| CaptureReader::open(&input.path));
        if let Ok(r) = opened
            && let Some(Ok(f)) = r.peek_frame()
        {
            return Some(f.ts_ns);
        }
    }
    None
}

/// Check that `path` is a sample directory (holds `sample.toml`).
pub fn is_sample_dir(path: &Path) -> bool {
    path.is_dir() && path.join(crate::sample::SAMPLE_FILE).is_file()
}
