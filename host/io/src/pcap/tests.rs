use std::path::Path;

use super::*;

/// Write a pcap (microseconds) of `(ts_us, frame)` at `path`.
fn write_pcap(path: &Path, frames: &[(u64, Vec<u8>)]) {
    let mut w = CaptureWriter::create(path, Format::Pcap, TsResolution::Micro).unwrap();
    for (us, f) in frames {
        w.write(&OutFrame::new(us * 1_000, f)).unwrap();
    }
    w.finish().unwrap();
}

/// Write a pcapng (nanoseconds) with `interfaces` of `(interface, ts_ns, frame)` at `path`.
fn write_pcapng(path: &Path, interfaces: &[&str], frames: &[(u32, u64, Vec<u8>)]) {
    let mut w = CaptureWriter::create(path, Format::PcapNg, TsResolution::Nano).unwrap();
    for i in interfaces {
        w.add_interface(i).unwrap();
    }
    for (interface, ts, f) in frames {
        w.write(&OutFrame {
            interface: *interface,
            ..OutFrame::new(*ts, f)
        })
        .unwrap();
    }
    w.finish().unwrap();
}

/// (ts_ns, frame, interface name, comment) of every frame of a capture.
fn read_back(path: &Path) -> Vec<(u64, Vec<u8>, Option<String>)> {
    let mut r = CaptureReader::open(path).unwrap();
    let mut out = Vec::new();
    while let Some(f) = r.next_frame() {
        let f = f.unwrap();
        out.push((f.ts_ns, f.data.to_vec(), f.interface.map(str::to_string)));
    }
    out
}

/// Every poll of `g` (max `max`): (port, first bytes, input) of each frame.
fn drain(g: &mut PcapGroup, max: usize) -> Vec<Vec<(usize, u8, usize)>> {
    let mut polls = Vec::new();
    loop {
        let mut got = Vec::new();
        let n = g
            .poll_captured(max, &mut |fs, caps, _| {
                got.extend(
                    fs.iter()
                        .zip(caps)
                        .map(|(f, c)| (f.port, f.data[0], c.input)),
                );
            })
            .unwrap();
        if n == 0 {
            assert!(g.exhausted());
            return polls;
        }
        assert_eq!(n, got.len());
        polls.push(got);
    }
}

fn port(name: &str, output: Option<PathBuf>) -> PcapPort {
    PcapPort {
        output,
        ..PcapPort::input(name)
    }
}

#[test]
fn inputs_in_order_each_frame_on_its_interfaces_port_one_port_per_poll() {
    let d = tempfile::tempdir().unwrap();
    let a = d.path().join("a.pcapng");
    // lan0, wan0, an unnamed interface and one no port is named after.
    write_pcapng(
        &a,
        &["lan0", "wan0", "", "dmz0"],
        &[
            (0, 10, vec![1; 60]),
            (0, 20, vec![2; 60]),
            (1, 30, vec![3; 60]),
            (2, 40, vec![4; 60]),
            (3, 50, vec![5; 60]),
            (1, 60, vec![6; 60]),
        ],
    );
    let b = d.path().join("b.pcap");
    write_pcap(&b, &[(1, vec![7; 60]), (2, vec![8; 60])]);
    let mut g = PcapGroup::open(
        vec![port("lan0", None), port("wan0", None)],
        vec![PcapInput::new(a.clone(), 0), PcapInput::new(b, 1)],
        PcapOptions::default(),
    )
    .unwrap();
    assert_eq!(g.peek_ts(), Some(10));
    assert_eq!(g.output_format(), Format::PcapNg, "the first input's");
    let polls = drain(&mut g, 64);
    // lan0, lan0 | wan0 | the unnamed and the unknown interface on the input's port (lan0) |
    // wan0 | the second input, on its port (wan0) in one poll.
    assert_eq!(
        polls,
        [
            vec![(0, 1, 0), (0, 2, 0)],
            vec![(1, 3, 0)],
            vec![(0, 4, 0), (0, 5, 0)],
            vec![(1, 6, 0)],
            vec![(1, 7, 1), (1, 8, 1)],
        ]
    );
    let st = g.stats();
    assert_eq!((st[0].rx_packets, st[0].rx_bytes), (4, 240));
    assert_eq!(st[1].rx_packets, 4);
    let states: Vec<_> = g
        .inputs()
        .map(|i| (i.frames, i.done, i.fault.clone()))
        .collect();
    assert_eq!(states, [(6, true, None), (2, true, None)]);
    assert_eq!(
        g.bytes_read(),
        std::fs::metadata(&a).unwrap().len() + 24 + 2 * 76
    );
}

#[test]
fn polls_hold_at_most_max_frames_and_span_at_most_the_time_limit() {
    let d = tempfile::tempdir().unwrap();
    let a = d.path().join("a.pcap");
    // 0, 1, 2, ... 9 ms.
    write_pcap(
        &a,
        &(0..10)
            .map(|i| (i * 1_000, vec![i as u8; 60]))
            .collect::<Vec<_>>(),
    );
    let open = |span| {
        PcapGroup::open(
            vec![port("lan0", None)],
            vec![PcapInput::new(a.clone(), 0)],
            PcapOptions {
                format: None,
                max_span_ns: span,
            },
        )
        .unwrap()
    };
    let sizes =
        |polls: Vec<Vec<(usize, u8, usize)>>| polls.iter().map(Vec::len).collect::<Vec<_>>();
    assert_eq!(sizes(drain(&mut open(None), 4)), [4, 4, 2]);
    // At most 2.5 ms from a poll's first frame: 0..=2, 3..=5, 6..=8, 9.
    assert_eq!(sizes(drain(&mut open(Some(2_500_000)), 64)), [3, 3, 3, 1]);
    let mut g = open(None);
    g.set_max_span_ns(Some(0));
    assert_eq!(sizes(drain(&mut g, 64)), [1; 10]);
}

#[test]
fn a_fault_ends_its_input_after_its_frames_and_the_next_input_is_read() {
    let d = tempfile::tempdir().unwrap();
    let junk = d.path().join("junk.pcap");
    std::fs::write(&junk, b"not a capture at all").unwrap();
    let cut = d.path().join("cut.pcap");
    write_pcap(&cut, &[(1, vec![1; 60]), (2, vec![2; 60])]);
    let bytes = std::fs::read(&cut).unwrap();
    std::fs::write(&cut, &bytes[..bytes.len() - 10]).unwrap();
    let good = d.path().join("good.pcap");
    write_pcap(&good, &[(3, vec![3; 60])]);
    let missing = d.path().join("missing.pcap");
    let inputs = [&junk, &cut, &missing, &good]
        .iter()
        .map(|p| PcapInput::new(p.to_path_buf(), 0))
        .collect();
    let mut g = PcapGroup::open(vec![port("x", None)], inputs, PcapOptions::default()).unwrap();
    // The first frame to come is the second input's: the first is done, its fault kept.
    assert_eq!(g.peek_ts(), Some(1_000));
    assert_eq!(
        g.output_format(),
        Format::Pcap,
        "the first input is no capture"
    );
    assert_eq!(drain(&mut g, 64), [vec![(0, 1, 1)], vec![(0, 3, 3)]]);
    let faults: Vec<String> = g
        .inputs()
        .map(|i| i.fault.as_ref().map_or(String::new(), ToString::to_string))
        .collect();
    assert_eq!(
        faults[0],
        format!(
            "{}: not a capture file: byte offset 0 holds 0x6e6f7420, not a pcap or pcapng magic number",
            junk.display()
        )
    );
    assert_eq!(
        faults[1],
        format!(
            "{}: truncated at byte offset 100: record holds 60 captured bytes, only 50 left after its header",
            cut.display()
        )
    );
    assert!(
        faults[2].starts_with(&missing.display().to_string()),
        "{}",
        faults[2]
    );
    assert_eq!(faults[3], "");
}

#[test]
fn sends_are_stamped_as_described_and_go_to_their_ports_output() {
    let d = tempfile::tempdir().unwrap();
    let a = d.path().join("a.pcapng");
    write_pcapng(
        &a,
        &["in0"],
        &[(0, 1_000, vec![1; 60]), (0, 5_000, vec![2; 61])],
    );
    let out = d.path().join("out.pcapng");
    let empty = d.path().join("empty.pcapng");
    let mut g = PcapGroup::open(
        vec![
            port("in0", None),
            port("out0", Some(out.clone())),
            PcapPort {
                empty_output: true,
                ..port("idle0", Some(empty.clone()))
            },
        ],
        vec![PcapInput::new(a, 0)],
        PcapOptions::default(),
    )
    .unwrap();
    let mut ok = Vec::new();
    g.poll_captured(64, &mut |fs, caps, tx| {
        for (f, c) in fs.iter().zip(caps) {
            tx.describe(c.ts_ns, &format!("packet at {}", c.ts_ns));
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
    // Outside a poll: the latest capture time, no comment.
    assert!(g.queue(1, &[3; 64]));
    g.flush().unwrap();
    let st = g.stats();
    assert_eq!((st[0].rx_packets, st[0].tx_dropped), (2, 2));
    assert_eq!((st[1].tx_packets, st[1].tx_bytes), (3, 185));
    let st = g.close().unwrap();
    assert_eq!(st[1].tx_packets, 3);
    let mut f1 = vec![1; 60];
    f1[0] = 0xaa;
    let mut f2 = vec![2; 61];
    f2[0] = 0xaa;
    let out0 = Some("out0".to_string());
    assert_eq!(
        read_back(&out),
        [
            (1_000, f1, out0.clone()),
            (5_000, f2, out0.clone()),
            (5_000, vec![3; 64], out0)
        ]
    );
    let bytes = std::fs::read(&out).unwrap();
    assert!(
        bytes
            .windows(15)
            .any(|w| w == b"packet at 1000\0" || w == b"packet at 1000 ")
    );
    assert!(read_back(&empty).is_empty(), "created empty at close");
}

#[test]
fn pcap_outputs_keep_the_first_frames_resolution() {
    let d = tempfile::tempdir().unwrap();
    let a = d.path().join("a.pcap");
    write_pcap(&a, &[(7, vec![1; 60])]);
    let out = d.path().join("o.pcap");
    let mut g = PcapGroup::open(
        vec![port("in0", None), port("o", Some(out.clone()))],
        vec![PcapInput::new(a, 0)],
        PcapOptions::default(),
    )
    .unwrap();
    g.poll_tx(1, 64, Duration::ZERO, &mut |fs, tx| {
        tx.describe(123_456_789, "not kept in pcap");
        assert!(tx.queue(1, fs[0].data));
    })
    .unwrap();
    g.close().unwrap();
    let bytes = std::fs::read(&out).unwrap();
    assert_eq!(&bytes[..4], &0xa1b2_c3d4u32.to_le_bytes(), "microseconds");
    assert_eq!(read_back(&out), [(123_456_000, vec![1; 60], None)]);
}

#[test]
fn a_long_input_is_read_in_bounded_memory() {
    let d = tempfile::tempdir().unwrap();
    let a = d.path().join("long.pcap");
    let mut w = CaptureWriter::create(&a, Format::Pcap, TsResolution::Micro).unwrap();
    for i in 0..50_000u64 {
        w.write(&OutFrame::new(i * 1_000, &[(i % 251) as u8; 64]))
            .unwrap();
    }
    w.finish().unwrap();
    let mut g = PcapGroup::open(
        vec![port("lan0", None)],
        vec![PcapInput::new(a, 0)],
        PcapOptions::default(),
    )
    .unwrap();
    let mut n = 0;
    while g
        .poll(1, 256, Duration::ZERO, &mut |fs| n += fs.len())
        .unwrap()
        > 0
    {}
    assert_eq!(n, 50_000);
    // One poll's frames, not the file's (4 MB).
    assert!(g.arena.capacity() <= 256 * 64 * 2, "{}", g.arena.capacity());
    assert_eq!(g.bytes_read(), 24 + 50_000 * 80);
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
    let mut g = PcapGroup::open(
        vec![port("eth0", None)],
        vec![PcapInput::new(ng.clone(), 0)],
        PcapOptions::default(),
    )
    .unwrap();
    let mut n = 0;
    while g
        .poll(1, 64, Duration::ZERO, &mut |fs| {
            assert!(fs.iter().all(|f| f.data.len() >= 14));
            n += fs.len();
        })
        .unwrap()
        > 0
    {}
    assert!(n > 0, "{} has frames", ng.display());
    assert!(g.inputs().all(|i| i.fault.is_none()));
}

#[test]
fn bad_configurations_are_refused() {
    let e = PcapGroup::open(vec![], vec![], PcapOptions::default()).unwrap_err();
    assert_eq!(e.to_string(), "a port group needs at least one device");
    let e = PcapGroup::open(
        vec![port("a", None), port("a", None)],
        vec![],
        PcapOptions::default(),
    )
    .unwrap_err();
    assert_eq!(e.to_string(), "device a listed twice");
    let e = PcapGroup::open(
        vec![port("a", None)],
        vec![PcapInput::new("x.pcap", 1)],
        PcapOptions::default(),
    )
    .unwrap_err();
    assert_eq!(e.to_string(), "x.pcap: port 1 of 1 ports");
}

#[test]
fn an_input_opened_before_is_read_from_where_it_is() {
    let d = tempfile::tempdir().unwrap();
    let a = d.path().join("a.pcap");
    write_pcap(&a, &[(4, vec![1; 60]), (5, vec![2; 60])]);
    let mut r = CaptureReader::open(&a).unwrap();
    assert_eq!(r.peek_frame().unwrap().unwrap().ts_ns, 4_000);
    let junk = d.path().join("junk");
    std::fs::write(&junk, b"junk").unwrap();
    let e = CaptureReader::open(&junk).unwrap_err();
    let mut g = PcapGroup::open(
        vec![port("lan0", None)],
        vec![
            PcapInput {
                reader: Some(Err(e.clone())),
                ..PcapInput::new(&junk, 0)
            },
            PcapInput {
                reader: Some(Ok(r)),
                ..PcapInput::new(&a, 0)
            },
        ],
        PcapOptions::default(),
    )
    .unwrap();
    assert_eq!(drain(&mut g, 64), [vec![(0, 1, 1), (0, 2, 1)]]);
    let faults: Vec<_> = g.inputs().map(|i| i.fault.clone()).collect();
    assert_eq!(faults, [Some(e), None]);
}
