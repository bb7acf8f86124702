//! Capture files as ports: pcap or pcapng input, one pcap output per port. No privileges, no
//! system calls beyond file I/O, so a daemon loop can run in tests from captures.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use pcap_file::DataLink;
use pcap_file::pcap::PcapReader;
use pcap_file::pcapng::{Block, PcapNgReader};

use crate::IoError;
use crate::port::{Frame, PortGroup, PortInfo, PortStats, TxSide};

/// One port of a [`PcapGroup`]: where its received frames come from and where its sent frames
/// go. Either may be absent (a port that only receives or only sends).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PcapPort {
    /// The port's name (what rulesets call the device, e.g. `"eth0"`).
    pub name: String,
    /// A pcap or pcapng capture of Ethernet frames, read as this port's input.
    pub input: Option<PathBuf>,
    /// A pcap file (Ethernet, microseconds) created for the frames sent on this port.
    pub output: Option<PathBuf>,
}

struct Port {
    info: PortInfo,
    /// Frames of the input handed out so far.
    next: usize,
    out: Option<(PathBuf, BufWriter<File>)>,
    stats: PortStats,
}

/// Ports backed by capture files: [`PortGroup::poll`] hands out the inputs' frames in timestamp
/// order across ports (ties by port order, then file order), never waiting; frames queued on a
/// port are written to its output pcap, stamped with the timestamp of the last frame handed
/// out (so a replay's outputs line up with its inputs). [`PortGroup::exhausted`] tells when
/// every input has been read.
pub struct PcapGroup {
    info: Vec<PortInfo>,
    /// Per port: the input's frames with their timestamps (read at open), apart from the
    /// ports' outputs so that both can be borrowed at once ([`PortGroup::poll_tx`]).
    inputs: Vec<Vec<(Duration, Vec<u8>)>>,
    ports: Vec<Port>,
    /// Where `queue_with` fills a frame before writing it out.
    scratch: Vec<u8>,
    now: Duration,
    /// The first write error, reported by the next flush.
    write_error: Option<IoError>,
}

impl PcapGroup {
    /// Reads every input (whole, into memory) and creates every output.
    ///
    /// Errors: [`IoError::Pcap`] naming the file for an unreadable or malformed capture, a link
    /// type other than Ethernet, or an output that cannot be created; [`IoError::Config`] for
    /// no ports or a name used twice.
    pub fn open(ports: Vec<PcapPort>) -> Result<PcapGroup, IoError> {
        let names: Vec<&str> = ports.iter().map(|p| p.name.as_str()).collect();
        crate::afpacket::check_devs(&names)?;
        let mut out = Vec::new();
        let mut inputs = Vec::new();
        for p in ports {
            let frames = match &p.input {
                Some(path) => read(path)?,
                None => Vec::new(),
            };
            let w = match &p.output {
                Some(path) => {
                    let pe = |e: &dyn std::fmt::Display| IoError::Pcap {
                        path: path.clone(),
                        msg: e.to_string(),
                    };
                    let f = File::create(path).map_err(|e| pe(&e))?;
                    let mut w = BufWriter::new(f);
                    w.write_all(&PCAP_HEADER).map_err(|e| pe(&e))?;
                    Some((path.clone(), w))
                }
                None => None,
            };
            inputs.push(frames);
            out.push(Port {
                info: PortInfo {
                    name: p.name,
                    ifindex: 0,
                    mac: [0; 6],
                    mtu: 1500,
                },
                next: 0,
                out: w,
                stats: PortStats::default(),
            });
        }
        Ok(PcapGroup {
            info: out.iter().map(|p| p.info.clone()).collect(),
            inputs,
            ports: out,
            scratch: Vec::new(),
            now: Duration::ZERO,
            write_error: None,
        })
    }
}

/// pcap global header: magic (little-endian, microseconds), version 2.4, zone 0, sigfigs 0,
/// snaplen 65535, link type 1 (Ethernet).
const PCAP_HEADER: [u8; 24] = [
    0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 1, 0, 0, 0,
];

/// One pcap record (little-endian header, microseconds) of `frame` at `ts`.
fn write_record(w: &mut impl Write, ts: Duration, frame: &[u8]) -> std::io::Result<()> {
    let mut h = [0u8; 16];
    h[0..4].copy_from_slice(&(ts.as_secs() as u32).to_le_bytes());
    h[4..8].copy_from_slice(&ts.subsec_micros().to_le_bytes());
    h[8..12].copy_from_slice(&(frame.len() as u32).to_le_bytes());
    h[12..16].copy_from_slice(&(frame.len() as u32).to_le_bytes());
    w.write_all(&h)?;
    w.write_all(frame)
}

/// Every frame of a pcap or pcapng capture of Ethernet frames.
fn read(path: &Path) -> Result<Vec<(Duration, Vec<u8>)>, IoError> {
    let err = |msg: String| IoError::Pcap {
        path: path.to_path_buf(),
        msg,
    };
    let bytes = std::fs::read(path).map_err(|e| err(e.to_string()))?;
    let mut frames = Vec::new();
    if bytes.starts_with(&[0x0a, 0x0d, 0x0d, 0x0a]) {
        let mut r = PcapNgReader::new(&bytes[..]).map_err(|e| err(format!("pcapng: {e}")))?;
        let mut links = Vec::new();
        while let Some(b) = r.next_block() {
            match b.map_err(|e| err(format!("pcapng: {e}")))? {
                Block::SectionHeader(_) => links.clear(),
                Block::InterfaceDescription(i) => links.push(i.linktype),
                Block::EnhancedPacket(p) => {
                    let link = links.get(p.interface_id as usize).copied();
                    if link != Some(DataLink::ETHERNET) {
                        return Err(err(format!(
                            "pcapng interface {} is not Ethernet ({link:?})",
                            p.interface_id
                        )));
                    }
                    frames.push((p.timestamp, p.data.into_owned()));
                }
                Block::SimplePacket(p) => {
                    if links.first() != Some(&DataLink::ETHERNET) {
                        return Err(err("pcapng interface 0 is not Ethernet".into()));
                    }
                    frames.push((Duration::ZERO, p.data.into_owned()));
                }
                _ => {}
            }
        }
    } else {
        let mut r = PcapReader::new(&bytes[..]).map_err(|e| err(format!("pcap: {e}")))?;
        let link = r.header().datalink;
        if link != DataLink::ETHERNET {
            return Err(err(format!("link type {link:?}, not Ethernet")));
        }
        while let Some(p) = r.next_packet() {
            let p = p.map_err(|e| err(format!("pcap: {e}")))?;
            frames.push((p.timestamp, p.data.into_owned()));
        }
    }
    Ok(frames)
}

/// A [`PcapGroup`]'s outputs, lent apart from its inputs.
struct PcapTx<'a> {
    ports: &'a mut [Port],
    now: Duration,
    write_error: &'a mut Option<IoError>,
    scratch: &'a mut Vec<u8>,
}

impl PcapTx<'_> {
    fn write(&mut self, port: usize, frame: &[u8]) -> bool {
        let Some(p) = self.ports.get_mut(port) else {
            return false;
        };
        let Some((path, w)) = p.out.as_mut() else {
            p.stats.tx_dropped += 1;
            return false;
        };
        match write_record(w, self.now, frame) {
            Ok(_) => {
                p.stats.tx_packets += 1;
                p.stats.tx_bytes += frame.len() as u64;
                true
            }
            Err(e) => {
                p.stats.tx_errors += 1;
                self.write_error.get_or_insert(IoError::Pcap {
                    path: path.clone(),
                    msg: e.to_string(),
                });
                false
            }
        }
    }
}

impl TxSide for PcapTx<'_> {
    /// `fill` writes into a reused buffer, which is then written to the port's output (file
    /// I/O, buffered).
    fn queue_with(&mut self, port: usize, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> bool {
        match self.ports.get_mut(port) {
            None => return false,
            Some(p) if p.out.is_none() => {
                p.stats.tx_dropped += 1;
                return false;
            }
            Some(_) => {}
        }
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
}

impl PcapGroup {
    fn tx(&mut self) -> PcapTx<'_> {
        PcapTx {
            ports: &mut self.ports,
            now: self.now,
            write_error: &mut self.write_error,
            scratch: &mut self.scratch,
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

    /// Frames queued during `on_rx` are stamped with the latest timestamp of this poll's
    /// frames.
    fn poll_tx(
        &mut self,
        _min: usize,
        max: usize,
        _timeout: Duration,
        on_rx: &mut dyn FnMut(&[Frame<'_>], &mut dyn TxSide),
    ) -> Result<usize, IoError> {
        // Pick (port, index) pairs first, then borrow the frames.
        let mut cursors: Vec<usize> = self.ports.iter().map(|p| p.next).collect();
        let mut picks = Vec::new();
        while picks.len() < max {
            let best = (0..self.ports.len())
                .filter(|&i| cursors[i] < self.inputs[i].len())
                .min_by_key(|&i| (self.inputs[i][cursors[i]].0, i));
            let Some(i) = best else { break };
            picks.push((i, cursors[i]));
            cursors[i] += 1;
        }
        if picks.is_empty() {
            return Ok(0);
        }
        for &(i, k) in &picks {
            let p = &mut self.ports[i];
            p.stats.rx_packets += 1;
            p.stats.rx_bytes += self.inputs[i][k].1.len() as u64;
            self.now = self.now.max(self.inputs[i][k].0);
        }
        for (p, c) in self.ports.iter_mut().zip(cursors) {
            p.next = c;
        }
        let frames: Vec<Frame<'_>> = picks
            .iter()
            .map(|&(i, k)| Frame {
                port: i,
                data: &self.inputs[i][k].1,
            })
            .collect();
        let mut tx = PcapTx {
            ports: &mut self.ports,
            now: self.now,
            write_error: &mut self.write_error,
            scratch: &mut self.scratch,
        };
        on_rx(&frames, &mut tx);
        Ok(picks.len())
    }

    fn queue(&mut self, port: usize, frame: &[u8]) -> bool {
        self.tx().queue(port, frame)
    }

    fn queue_with(&mut self, port: usize, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> bool {
        self.tx().queue_with(port, len, fill)
    }

    fn flush(&mut self) -> Result<(), IoError> {
        if let Some(e) = self.write_error.take() {
            return Err(e);
        }
        for p in &mut self.ports {
            if let Some((path, w)) = p.out.as_mut() {
                w.flush().map_err(|e| IoError::Pcap {
                    path: path.clone(),
                    msg: e.to_string(),
                })?;
            }
        }
        Ok(())
    }

    fn stats(&self) -> Vec<PortStats> {
        self.ports.iter().map(|p| p.stats).collect()
    }

    fn exhausted(&self) -> bool {
        self.ports
            .iter()
            .zip(&self.inputs)
            .all(|(p, i)| p.next >= i.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_pcap(path: &Path, frames: &[(u64, Vec<u8>)]) {
        use pcap_file::pcap::{PcapPacket, PcapWriter};
        let mut w = PcapWriter::new(File::create(path).unwrap()).unwrap();
        for (us, f) in frames {
            w.write_packet(&PcapPacket::new(
                Duration::from_micros(*us),
                f.len() as u32,
                f,
            ))
            .unwrap();
        }
    }

    fn read_pcap(path: &Path) -> Vec<(Duration, Vec<u8>)> {
        read(path).unwrap()
    }

    #[test]
    fn inputs_merge_by_time_and_outputs_get_what_was_queued() {
        let d = tempfile::tempdir().unwrap();
        let a = d.path().join("a.pcap");
        let b = d.path().join("b.pcap");
        write_pcap(
            &a,
            &[(10, vec![1; 60]), (30, vec![3; 60]), (50, vec![5; 70])],
        );
        write_pcap(&b, &[(20, vec![2; 60]), (30, vec![4; 60])]);
        let out = d.path().join("out-b.pcap");
        let mut g = PcapGroup::open(vec![
            PcapPort {
                name: "a".into(),
                input: Some(a),
                output: None,
            },
            PcapPort {
                name: "b".into(),
                input: Some(b),
                output: Some(out.clone()),
            },
        ])
        .unwrap();
        assert_eq!(g.ports()[1].name, "b");
        let mut seen = Vec::new();
        let n = g
            .poll(1, 3, Duration::ZERO, &mut |fs| {
                seen.extend(fs.iter().map(|f| (f.port, f.data[0])));
            })
            .unwrap();
        assert_eq!(n, 3);
        assert!(!g.exhausted());
        // Echo what arrived so far onto b, then read the rest.
        assert!(g.queue(1, &[9; 64]));
        assert!(!g.queue(0, &[9; 64]), "a has no output");
        g.poll(1, 64, Duration::ZERO, &mut |fs| {
            seen.extend(fs.iter().map(|f| (f.port, f.data[0])));
        })
        .unwrap();
        assert!(g.exhausted());
        assert_eq!(g.poll(1, 64, Duration::ZERO, &mut |_| panic!()).unwrap(), 0);
        // Time order; at 30 µs the tie goes to port 0.
        assert_eq!(seen, [(0, 1), (1, 2), (0, 3), (1, 4), (0, 5)]);
        g.flush().unwrap();
        let st = g.stats();
        assert_eq!(
            (st[0].rx_packets, st[0].rx_bytes, st[0].tx_dropped),
            (3, 190, 1)
        );
        assert_eq!(
            (st[1].rx_packets, st[1].tx_packets, st[1].tx_bytes),
            (2, 1, 64)
        );
        drop(g);
        let written = read_pcap(&out);
        assert_eq!(written, [(Duration::from_micros(30), vec![9; 64])]);
    }

    #[test]
    fn frames_queued_during_the_poll_go_to_the_output_stamped_with_the_poll() {
        let d = tempfile::tempdir().unwrap();
        let a = d.path().join("a.pcap");
        write_pcap(&a, &[(10, vec![1; 60]), (40, vec![2; 61])]);
        let out = d.path().join("out.pcap");
        let mut g = PcapGroup::open(vec![
            PcapPort {
                name: "a".into(),
                input: Some(a),
                output: None,
            },
            PcapPort {
                name: "b".into(),
                input: None,
                output: Some(out.clone()),
            },
        ])
        .unwrap();
        let mut ok = Vec::new();
        g.poll_tx(1, 64, Duration::ZERO, &mut |fs, tx| {
            for f in fs {
                ok.push(tx.queue_with(1, f.data.len(), &mut |b| {
                    b.copy_from_slice(f.data);
                    b[0] = 0xaa;
                }));
                ok.push(tx.queue_with(0, 60, &mut |_| panic!("no output: not filled")));
                ok.push(tx.queue(5, f.data));
            }
        })
        .unwrap();
        assert_eq!(ok, [true, false, false, true, false, false]);
        g.flush().unwrap();
        let st = g.stats();
        assert_eq!((st[0].rx_packets, st[0].tx_dropped), (2, 2));
        assert_eq!((st[1].tx_packets, st[1].tx_bytes), (2, 121));
        drop(g);
        let mut f1 = vec![1; 60];
        f1[0] = 0xaa;
        let mut f2 = vec![2; 61];
        f2[0] = 0xaa;
        // Both stamped with the latest timestamp handed out by the poll.
        let t = Duration::from_micros(40);
        assert_eq!(read_pcap(&out), [(t, f1), (t, f2)]);
    }

    #[test]
    fn reads_the_shared_pcapng_captures() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/pcaps");
        let Some(ng) = std::fs::read_dir(&dir).ok().and_then(|d| {
            d.flatten()
                .map(|e| e.path())
                .find(|p| p.extension().is_some_and(|x| x == "pcapng"))
        }) else {
            eprintln!("skipping: no pcapng in {}", dir.display());
            return;
        };
        let mut g = PcapGroup::open(vec![PcapPort {
            name: "eth0".into(),
            input: Some(ng.clone()),
            output: None,
        }])
        .unwrap();
        let mut n = 0;
        while !g.exhausted() {
            g.poll(1, 64, Duration::ZERO, &mut |fs| {
                assert!(fs.iter().all(|f| f.data.len() >= 14));
                n += fs.len();
            })
            .unwrap();
        }
        assert!(n > 0, "{} has frames", ng.display());
    }

    #[test]
    fn bad_inputs_name_the_file() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("junk.pcap");
        std::fs::write(&p, b"not a capture at all").unwrap();
        let e = PcapGroup::open(vec![PcapPort {
            name: "x".into(),
            input: Some(p.clone()),
            output: None,
        }])
        .err()
        .unwrap();
        assert!(e.to_string().starts_with(&p.display().to_string()), "{e}");
        let e = PcapGroup::open(vec![PcapPort {
            name: "x".into(),
            input: Some(d.path().join("missing.pcap")),
            output: None,
        }])
        .err()
        .unwrap();
        assert!(e.to_string().contains("missing.pcap"), "{e}");
    }
}
