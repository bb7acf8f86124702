use super::*;

/// (timestamp ns, bytes, offset) of each frame read.
type Read3 = Vec<(u64, Vec<u8>, u64)>;

/// A classic pcap (microseconds) of `(ts_ns, frame)`, made by the module's writer.
fn pcap_bytes(frames: &[(u64, &[u8])]) -> Vec<u8> {
    let mut w = CaptureWriter::new(
        Path::new("mem"),
        Vec::new(),
        Format::Pcap,
        TsResolution::Micro,
    )
    .unwrap();
    for &(ts, d) in frames {
        w.write(&OutFrame::new(ts, d)).unwrap();
    }
    w.finish().unwrap()
}

/// A pcapng (nanoseconds) with `interfaces` and `(interface, ts_ns, frame)`.
fn pcapng_bytes(interfaces: &[&str], frames: &[(u32, u64, &[u8])]) -> Vec<u8> {
    let mut w = CaptureWriter::new(
        Path::new("mem"),
        Vec::new(),
        Format::PcapNg,
        TsResolution::Nano,
    )
    .unwrap();
    for i in interfaces {
        w.add_interface(i).unwrap();
    }
    for &(interface, ts_ns, data) in frames {
        w.write(&OutFrame {
            interface,
            ..OutFrame::new(ts_ns, data)
        })
        .unwrap();
    }
    w.finish().unwrap()
}

/// Every frame of `bytes` (a capture named `name`) as `each` makes it, and the fault.
fn read_all<T>(
    bytes: &[u8],
    name: &str,
    each: impl Fn(Frame<'_>) -> T,
) -> (Vec<T>, Option<CaptureError>) {
    let mut ok = Vec::new();
    let mut r = match CaptureReader::new(Path::new(name), bytes) {
        Ok(r) => r,
        Err(e) => return (ok, Some(e)),
    };
    while let Some(f) = r.next_frame() {
        match f {
            Ok(f) => ok.push(each(f)),
            Err(e) => return (ok, Some(e)),
        }
    }
    (ok, None)
}

fn frames_of(bytes: &[u8]) -> (Read3, Option<CaptureError>) {
    read_all(bytes, "t.pcap", |f| (f.ts_ns, f.data.to_vec(), f.offset))
}

#[test]
fn pcap_round_trip_and_offsets() {
    let a = [1u8; 20];
    let b = [2u8; 30];
    let bytes = pcap_bytes(&[
        (1_500_000_000_123_456_000, &a),
        (1_500_000_001_000_001_000, &b),
    ]);
    let (ok, err) = frames_of(&bytes);
    assert_eq!(err, None);
    assert_eq!(
        ok,
        vec![
            (1_500_000_000_123_456_000, a.to_vec(), 24),
            (1_500_000_001_000_001_000, b.to_vec(), 24 + 16 + 20)
        ]
    );
    // The layout libpcap writes: magic, version 2.4, snap length, link type, then records.
    assert_eq!(&bytes[..4], &0xa1b2_c3d4u32.to_le_bytes());
    assert_eq!(&bytes[16..20], &MAX_RECORD_BYTES.to_le_bytes());
    assert_eq!(&bytes[20..24], &1u32.to_le_bytes());
    assert_eq!(&bytes[24..28], &1_500_000_000u32.to_le_bytes());
    assert_eq!(&bytes[28..32], &123_456u32.to_le_bytes());
    assert_eq!(bytes.len(), 24 + 16 + 20 + 16 + 30);
}

#[test]
fn truncated_record_names_its_offset() {
    let a = [1u8; 20];
    let b = [2u8; 30];
    let mut bytes = pcap_bytes(&[(0, &a), (0, &b)]);
    bytes.truncate(bytes.len() - 5);
    let (ok, err) = frames_of(&bytes);
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
    let (ok, err) = frames_of(&bytes);
    assert_eq!(ok.len(), 1);
    assert_eq!(
        err.unwrap().to_string(),
        "t.pcap: truncated at byte offset 60: record header needs 16 bytes, 7 left"
    );
}

#[test]
fn a_record_longer_than_the_limit_is_corrupt_before_it_is_read() {
    let a = [1u8; 20];
    let mut bytes = pcap_bytes(&[(0, &a)]);
    bytes[24 + 8..24 + 12].copy_from_slice(&(MAX_RECORD_BYTES + 1).to_le_bytes());
    let (ok, err) = frames_of(&bytes);
    assert!(ok.is_empty());
    assert_eq!(
        err.unwrap().to_string(),
        "t.pcap: corrupt at byte offset 24: record claims 262145 captured bytes (more than 262144)"
    );
}

#[test]
fn not_a_capture() {
    let (_, err) = frames_of(b"hello world");
    assert_eq!(
        err.unwrap().to_string(),
        "t.pcap: not a capture file: byte offset 0 holds 0x68656c6c, not a pcap or pcapng magic number"
    );
    let (_, err) = frames_of(b"");
    assert_eq!(
        err.unwrap().to_string(),
        "t.pcap: not a capture file: byte offset 0 holds nothing (the file is empty), not a pcap or pcapng magic number"
    );
    let (_, err) = frames_of(b"\xd4\xc3");
    assert!(matches!(err, Some(CaptureError::NotACapture { found, .. }) if found == "0xd4c3"));
}

/// Zeros forever, counting what was asked of it (a reader of `/dev/zero`).
struct Zeros(usize);

impl Read for Zeros {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        buf.fill(0);
        self.0 += buf.len();
        Ok(buf.len())
    }
}

#[test]
fn the_magic_number_is_checked_before_anything_else_is_read() {
    let mut zeros = Zeros(0);
    let err = CaptureReader::new(Path::new("/dev/zero"), &mut zeros).unwrap_err();
    assert_eq!(
        err.to_string(),
        "/dev/zero: not a capture file: byte offset 0 holds 0x00000000, not a pcap or pcapng magic number"
    );
    // One read of the first chunk, no more.
    assert_eq!(zeros.0, READ_CHUNK_BYTES);
}

#[test]
fn a_pcapng_block_claiming_too_many_bytes_is_corrupt_before_it_is_read() {
    let a = [1u8; 60];
    let mut bytes = pcapng_bytes(&["lan0"], &[(0, 0, &a)]);
    let shb = u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]) as usize;
    bytes[shb + 4..shb + 8].copy_from_slice(&u32::MAX.to_le_bytes());
    let (ok, err) = frames_of(&bytes);
    assert!(ok.is_empty());
    assert_eq!(
        err.unwrap().to_string(),
        format!(
            "t.pcap: corrupt at byte offset {shb}: pcapng block claims 4294967295 bytes (more than 16777216)"
        )
    );
}

#[test]
fn other_link_type_is_refused() {
    let mut bytes = pcap_bytes(&[]);
    bytes[20] = 101; // LINKTYPE_RAW
    let (_, err) = frames_of(&bytes);
    assert_eq!(
        err,
        Some(CaptureError::LinkType {
            path: PathBuf::from("t.pcap"),
            offset: 20,
            linktype: 101
        })
    );
    // pcapng: at the first packet of the interface, naming its block.
    let a = [1u8; 60];
    let mut ng = pcapng_bytes(&["lan0"], &[(0, 0, &a)]);
    let shb = u32::from_le_bytes([ng[4], ng[5], ng[6], ng[7]]) as usize;
    ng[shb + 8] = 113; // LINKTYPE_LINUX_SLL
    let idb = u32::from_le_bytes([ng[shb + 4], ng[shb + 5], ng[shb + 6], ng[shb + 7]]) as usize;
    let (ok, err) = frames_of(&ng);
    assert!(ok.is_empty());
    assert_eq!(
        err.unwrap().to_string(),
        format!(
            "t.pcap: link type 113 at byte offset {} is not Ethernet (1); wasp reads Ethernet captures only",
            shb + idb
        )
    );
}

#[test]
fn fcs_bits_in_link_type_are_ignored() {
    let a = [1u8; 20];
    let mut bytes = pcap_bytes(&[(0, &a)]);
    // FCS length 4 (bits 28..31) and the F bit, as in tcpdump's udp-length-heapoverflow.pcap.
    bytes[23] = 0x50;
    let (ok, err) = frames_of(&bytes);
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
    let (ok, err) = frames_of(&bytes);
    assert_eq!(err, None);
    assert_eq!(ok, vec![(7_999_999_999, vec![9, 8, 7], 24)]);
    let mut r = CaptureReader::new(Path::new("b"), &bytes[..]).unwrap();
    let f = r.next_frame().unwrap().unwrap();
    assert_eq!((f.resolution, f.orig_len), (TsResolution::Nano, 1500));
}

#[test]
fn nanosecond_pcap_written_and_read_back() {
    let a = [5u8; 42];
    let mut w =
        CaptureWriter::new(Path::new("m"), Vec::new(), Format::Pcap, TsResolution::Nano).unwrap();
    w.write(&OutFrame {
        orig_len: 1000,
        ..OutFrame::new(1_700_000_000_123_456_789, &a)
    })
    .unwrap();
    assert_eq!(w.packets(), 1);
    let bytes = w.finish().unwrap();
    assert_eq!(&bytes[..4], &0xa1b2_3c4du32.to_le_bytes());
    let mut r = CaptureReader::new(Path::new("m"), &bytes[..]).unwrap();
    let f = r.next_frame().unwrap().unwrap();
    assert_eq!(
        (f.ts_ns, f.data, f.orig_len, f.resolution),
        (1_700_000_000_123_456_789, &a[..], 1000, TsResolution::Nano)
    );
    assert!(r.next_frame().is_none());
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
fn named_frames(bytes: &[u8]) -> (Named, Option<CaptureError>) {
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
    );
    let (ok, err) = named_frames(&bytes);
    assert_eq!(err, None);
    let s = |n: &str| Some(n.to_string());
    assert_eq!(
        ok,
        vec![
            (s("trunk0"), 1_700_000_000_000_000_001, a.to_vec()),
            (s("lan0"), 1_700_000_000_000_000_502, b.to_vec()),
            (None, 1_700_000_000_000_001_003, c.to_vec()),
            (s("trunk0"), 1_700_000_000_000_002_004, a.to_vec()),
        ]
    );
    let ng = pcapng_bytes(&["x"], &[(0, 5, &a)]);
    let mut r = CaptureReader::new(Path::new("t"), &ng[..]).unwrap();
    assert_eq!(r.format(), Format::PcapNg);
    let f = r.next_frame().unwrap().unwrap();
    assert_eq!((f.resolution, f.orig_len), (TsResolution::Nano, 60));
}

#[test]
fn pcapng_comments_and_microseconds_round_trip() {
    let a = [7u8; 61];
    let mut w = CaptureWriter::new(
        Path::new("m.pcapng"),
        Vec::new(),
        Format::PcapNg,
        TsResolution::Micro,
    )
    .unwrap();
    assert_eq!(w.add_interface("lan0").unwrap(), 0);
    assert_eq!(w.add_interface("wan0").unwrap(), 1);
    w.write(&OutFrame {
        interface: 1,
        comment: Some("1 drop filter input 4"),
        ..OutFrame::new(1_700_000_000_000_001_999, &a)
    })
    .unwrap();
    let err = w
        .write(&OutFrame {
            interface: 2,
            ..OutFrame::new(0, &a)
        })
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "m.pcapng: packet names interface 2 but only interfaces 0 to 1 are described"
    );
    let bytes = w.finish().unwrap();
    let at = position(&bytes, b"1 drop filter input 4");
    // The comment option: code 1, length 21, padded to 24.
    assert_eq!(&bytes[at - 4..at], &[1, 0, 21, 0]);
    let (ok, err) = named_frames(&bytes);
    assert_eq!(err, None);
    // Microseconds kept: the nanoseconds below are cut.
    assert_eq!(
        ok,
        vec![(
            Some("wan0".to_string()),
            1_700_000_000_000_001_000,
            a.to_vec()
        )]
    );
}

#[test]
fn a_big_endian_pcapng_section_is_read() {
    use pcap_file::pcapng::PcapNgWriter;
    let a = [9u8; 60];
    let mut w = PcapNgWriter::with_endianness(Vec::new(), Endianness::Big).unwrap();
    w.write_pcapng_block(InterfaceDescriptionBlock {
        linktype: DataLink::ETHERNET,
        snaplen: 0,
        options: vec![InterfaceDescriptionOption::IfName(Cow::Borrowed("eth9"))],
    })
    .unwrap();
    w.write_pcapng_block(EnhancedPacketBlock {
        interface_id: 0,
        // Microseconds, the default resolution.
        timestamp: Duration::from_nanos(1_234_567),
        original_len: 60,
        data: Cow::Borrowed(&a),
        options: Vec::new(),
    })
    .unwrap();
    let (ok, err) = named_frames(&w.into_inner());
    assert_eq!(err, None);
    assert_eq!(
        ok,
        vec![(Some("eth9".to_string()), 1_234_567_000, a.to_vec())]
    );
}

#[test]
fn classic_pcap_frames_have_no_interface() {
    let a = [1u8; 20];
    let bytes = pcap_bytes(&[(0, &a)]);
    let mut r = CaptureReader::new(Path::new("t.pcap"), &bytes[..]).unwrap();
    assert_eq!(r.format(), Format::Pcap);
    let f = r.next_frame().unwrap().unwrap();
    assert_eq!(f.interface, None);
}

#[test]
fn corrupt_interface_name_options_are_faults_not_panics() {
    let a = [1u8; 60];
    let good = pcapng_bytes(&["lan0"], &[(0, 0, &a)]);
    let at = position(&good, b"lan0");
    // The interface block follows the section header block (its length at bytes 4..8).
    let idb = u64::from(u32::from_le_bytes([good[4], good[5], good[6], good[7]]));
    // Not UTF-8.
    let mut bad = good.clone();
    bad[at] = 0xff;
    let (ok, err) = named_frames(&bad);
    assert!(ok.is_empty());
    assert!(
        matches!(err, Some(CaptureError::Corrupt { offset, .. }) if offset == idb),
        "{err:?}"
    );
    // An option length running past the block.
    let mut bad = good.clone();
    bad[at - 2] = 0xf0;
    let (ok, err) = named_frames(&bad);
    assert!(ok.is_empty());
    assert!(
        matches!(err, Some(CaptureError::Corrupt { offset, .. }) if offset == idb),
        "{err:?}"
    );
    // Trailing NULs are padding; a name of NULs only is no name; an unknown option code is
    // skipped.
    let mut nul = good.clone();
    nul[at + 3] = 0;
    let (ok, _) = named_frames(&nul);
    assert_eq!(ok[0].0.as_deref(), Some("lan"));
    let mut nul = good.clone();
    nul[at..at + 4].fill(0);
    let (ok, _) = named_frames(&nul);
    assert_eq!(ok[0].0, None);
    let mut unknown = good;
    unknown[at - 4] = 0x55;
    let (ok, err) = named_frames(&unknown);
    assert_eq!(err, None);
    assert_eq!(ok[0].0, None);
}

#[test]
fn every_cut_of_a_capture_gives_its_whole_frames_then_a_fault() {
    let frames: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; 60 + usize::from(i)]).collect();
    let refs: Vec<(u32, u64, &[u8])> = frames
        .iter()
        .enumerate()
        .map(|(i, f)| ((i % 2) as u32, i as u64 * 1000, f.as_slice()))
        .collect();
    let ng = pcapng_bytes(&["a", "b"], &refs);
    let pcap = pcap_bytes(&refs.iter().map(|r| (r.1, r.2)).collect::<Vec<_>>());
    for whole in [ng, pcap] {
        let (all, err) = frames_of(&whole);
        assert_eq!((all.len(), err), (5, None));
        // Where each frame's record or block ends.
        let ends: Vec<u64> = (0..all.len())
            .map(|k| all.get(k + 1).map_or(whole.len() as u64, |f| f.2))
            .collect();
        for cut in 0..whole.len() as u64 {
            let (ok, err) = frames_of(&whole[..cut as usize]);
            let whole_ones = ends.iter().filter(|&&e| e <= cut).count();
            assert_eq!(ok[..], all[..whole_ones], "cut {cut}");
            let inside = (0..all.len()).any(|k| all[k].2 < cut && cut < ends[k]);
            if inside || cut < 24 {
                assert!(err.is_some(), "cut {cut} inside a record without a fault");
            }
        }
    }
}

/// A source that gives at most `step` bytes per read (a pipe).
struct Trickle<'a> {
    bytes: &'a [u8],
    step: usize,
}

impl Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.step.min(buf.len()).min(self.bytes.len());
        buf[..n].copy_from_slice(&self.bytes[..n]);
        self.bytes = &self.bytes[n..];
        Ok(n)
    }
}

#[test]
fn short_reads_give_the_same_frames() {
    let frames: Vec<Vec<u8>> = (0..50u8).map(|i| vec![i; 60 + usize::from(i)]).collect();
    let refs: Vec<(u32, u64, &[u8])> = frames
        .iter()
        .enumerate()
        .map(|(i, f)| (0, i as u64, f.as_slice()))
        .collect();
    let ng = pcapng_bytes(&["lan0"], &refs);
    let (want, _) = named_frames(&ng);
    for step in [1, 3, 7, 4096] {
        let src = Trickle { bytes: &ng, step };
        let mut r = CaptureReader::new(Path::new("p"), src).unwrap();
        let mut got = Vec::new();
        while let Some(f) = r.next_frame() {
            let f = f.unwrap();
            got.push((f.interface.map(str::to_string), f.ts_ns, f.data.to_vec()));
        }
        assert_eq!(got, want, "reads of {step} bytes");
    }
}

/// A pcap of `frames` frames of 64 bytes made on the fly (never whole in memory).
struct Endless {
    header: Vec<u8>,
    record: Vec<u8>,
    left: u64,
    at: usize,
}

impl Read for Endless {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if !self.header.is_empty() {
            let n = self.header.len().min(buf.len());
            buf[..n].copy_from_slice(&self.header[..n]);
            self.header.drain(..n);
            return Ok(n);
        }
        let mut n = 0;
        while n < buf.len() && self.left > 0 {
            let k = (self.record.len() - self.at).min(buf.len() - n);
            buf[n..n + k].copy_from_slice(&self.record[self.at..self.at + k]);
            n += k;
            self.at += k;
            if self.at == self.record.len() {
                self.at = 0;
                self.left -= 1;
            }
        }
        Ok(n)
    }
}

#[test]
fn a_long_capture_is_read_in_a_bounded_buffer() {
    let one = pcap_bytes(&[(1_000, &[0xab; 64])]);
    let mut src = Endless {
        header: one[..24].to_vec(),
        record: one[24..].to_vec(),
        left: 200_000,
        at: 0,
    };
    let mut r = CaptureReader::new(Path::new("endless"), &mut src).unwrap();
    let mut n = 0u64;
    while let Some(f) = r.next_frame() {
        assert_eq!(f.unwrap().data.len(), 64);
        n += 1;
    }
    assert_eq!(n, 200_000);
    assert_eq!(r.offset(), 24 + 200_000 * 80);
    assert_eq!(
        r.input.buf.len(),
        READ_CHUNK_BYTES,
        "200000 frames, one chunk"
    );
}

#[test]
fn a_long_block_grows_the_buffer_once_then_it_shrinks_back() {
    let big = vec![3u8; MAX_RECORD_BYTES as usize];
    let small = [4u8; 60];
    let bytes = pcapng_bytes(&["x"], &[(0, 1, &big), (0, 2, &small), (0, 3, &small)]);
    let mut r = CaptureReader::new(Path::new("b"), &bytes[..]).unwrap();
    assert_eq!(r.next_frame().unwrap().unwrap().data.len(), big.len());
    assert!(r.input.buf.len() > READ_CHUNK_BYTES);
    assert_eq!(r.next_frame().unwrap().unwrap().data, &small);
    assert_eq!(r.input.buf.len(), READ_CHUNK_BYTES);
    assert_eq!(r.next_frame().unwrap().unwrap().ts_ns, 3);
    assert!(r.next_frame().is_none());
}

#[test]
fn peek_gives_what_next_gives_then_the_fault_once() {
    let a = [1u8; 20];
    let mut bytes = pcap_bytes(&[(5_000, &a)]);
    bytes.extend_from_slice(&[0; 3]);
    let mut r = CaptureReader::new(Path::new("t.pcap"), &bytes[..]).unwrap();
    assert_eq!(r.offset(), 24);
    assert_eq!(r.peek_frame().unwrap().unwrap().ts_ns, 5_000);
    assert_eq!(r.peek_frame().unwrap().unwrap().offset, 24);
    assert_eq!(r.offset(), 24);
    assert_eq!(r.next_frame().unwrap().unwrap().ts_ns, 5_000);
    assert_eq!(r.offset(), 60);
    assert!(matches!(
        r.peek_frame(),
        Some(Err(CaptureError::Truncated { offset: 60, .. }))
    ));
    assert!(matches!(
        r.next_frame(),
        Some(Err(CaptureError::Truncated { offset: 60, .. }))
    ));
    assert!(r.next_frame().is_none());
    assert!(r.peek_frame().is_none());
}

#[test]
fn writer_refuses_what_a_capture_cannot_hold() {
    let long = vec![0u8; MAX_RECORD_BYTES as usize + 1];
    let mut w = CaptureWriter::new(
        Path::new("o.pcap"),
        Vec::new(),
        Format::Pcap,
        TsResolution::Micro,
    )
    .unwrap();
    assert_eq!(
        w.write(&OutFrame::new(0, &long)).unwrap_err().to_string(),
        "o.pcap: a frame of 262145 bytes is longer than the snap length 262144"
    );
    // pcap keeps 32-bit seconds.
    assert!(w.write(&OutFrame::new(u64::MAX, &[0; 60])).is_err());
    assert_eq!(w.packets(), 0);
    assert_eq!(cut_str("aé", 2), "a");
    assert_eq!(cut_str("abc", 5), "abc");
}

#[test]
fn a_file_is_written_and_read_back() {
    let dir = std::env::temp_dir().join(format!("wasp-io-capture-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("two.pcapng");
    let mut w = CaptureWriter::create(&path, Format::PcapNg, TsResolution::Nano).unwrap();
    w.add_interface("lan0").unwrap();
    w.add_interface("wan0").unwrap();
    w.write(&OutFrame {
        interface: 1,
        ..OutFrame::new(7_000, &[1; 60])
    })
    .unwrap();
    w.finish().unwrap();
    let mut r = CaptureReader::open(&path).unwrap();
    let f = r.next_frame().unwrap().unwrap();
    assert_eq!((f.interface, f.ts_ns), (Some("wan0"), 7_000));
    assert!(r.next_frame().is_none());
    let missing = dir.join("missing.pcap");
    let e = CaptureReader::open(&missing).unwrap_err();
    assert!(
        matches!(&e, CaptureError::Io { path, .. } if *path == missing),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A source that fails after `ok` bytes.
struct Failing<'a> {
    bytes: &'a [u8],
    ok: usize,
}

impl Read for Failing<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.ok == 0 {
            return Err(std::io::Error::other("device gone"));
        }
        let n = self.ok.min(buf.len()).min(self.bytes.len());
        buf[..n].copy_from_slice(&self.bytes[..n]);
        self.bytes = &self.bytes[n..];
        self.ok -= n;
        Ok(n)
    }
}

#[test]
fn a_read_error_names_where_it_happened_after_the_frames_before_it() {
    let a = [1u8; 20];
    let bytes = pcap_bytes(&[(0, &a), (0, &a)]);
    let src = Failing {
        bytes: &bytes,
        ok: 24 + 36 + 10,
    };
    let mut r = CaptureReader::new(Path::new("p"), src).unwrap();
    assert_eq!(r.next_frame().unwrap().unwrap().data, &a);
    assert_eq!(
        r.next_frame().unwrap().unwrap_err().to_string(),
        "p: read error at byte offset 70: device gone"
    );
    assert!(r.next_frame().is_none());
}
