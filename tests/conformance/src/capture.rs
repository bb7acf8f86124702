//! Reading captures (pcap and pcapng, Ethernet) and writing the frames actually sent as pcap.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read};
use std::path::Path;
use std::time::Duration;

use pcap_file::DataLink;
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapReader, PcapWriter};
use pcap_file::pcapng::{Block, PcapNgReader};

use crate::error::{Error, Result};
use crate::netns::VETH_MTU;

/// Ethernet header length in bytes (the shortest frame an AF_PACKET socket sends).
pub const ETH_HLEN: usize = 14;

/// Why a frame is not sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unsendable {
    /// Shorter than an Ethernet header: `sendto` on AF_PACKET refuses it (EINVAL).
    TooShort,
    /// Longer than the MTU + 14 (+ 4 with an outer 802.1Q tag): the packet socket refuses
    /// it (EMSGSIZE), as measured on the veth pair (802.1ad outer tags get no extra 4).
    TooLong,
}

/// Whether the veth pair carries `frame` unchanged to the ingress hook; see [`Unsendable`].
pub fn check_sendable(frame: &[u8]) -> std::result::Result<(), Unsendable> {
    if frame.len() < ETH_HLEN {
        return Err(Unsendable::TooShort);
    }
    let tagged = frame[12..14] == [0x81, 0x00];
    let max = VETH_MTU + ETH_HLEN + if tagged { 4 } else { 0 };
    if frame.len() > max {
        return Err(Unsendable::TooLong);
    }
    Ok(())
}

fn is_ethernet(dl: DataLink) -> bool {
    match dl {
        DataLink::ETHERNET => true,
        // Link-type field with FCS bits set in its upper half (e.g. tcpdump's
        // udp-length-heapoverflow.pcap): the lower 16 bits still say Ethernet.
        DataLink::Unknown(n) => n & 0xffff == 1,
        _ => false,
    }
}

/// Reads the captured bytes of every Ethernet frame of a pcap or pcapng file, in order.
///
/// # Errors
/// [`Error::Capture`] when the file is not a capture, is truncated, or is not Ethernet.
pub fn read_frames(path: &Path) -> Result<Vec<Vec<u8>>> {
    let err = |detail: String| Error::Capture {
        path: path.to_path_buf(),
        detail,
    };
    let mut file = BufReader::new(File::open(path).map_err(|e| err(e.to_string()))?);
    let mut magic = [0u8; 4];
    file.read_exact(&mut magic)
        .map_err(|e| err(e.to_string()))?;
    let file = BufReader::new(File::open(path).map_err(|e| err(e.to_string()))?);
    let mut frames = Vec::new();
    if magic == [0x0a, 0x0d, 0x0d, 0x0a] {
        let mut r = PcapNgReader::new(file).map_err(|e| err(e.to_string()))?;
        let mut linktypes = Vec::new();
        while let Some(block) = r.next_block() {
            let block = block.map_err(|e| err(format!("after {} frames: {e}", frames.len())))?;
            match block {
                Block::InterfaceDescription(i) => linktypes.push(i.linktype),
                Block::EnhancedPacket(p) => {
                    let linktype = linktypes.get(p.interface_id as usize).copied();
                    if !linktype.is_some_and(is_ethernet) {
                        return Err(err(format!("interface link type {linktype:?}")));
                    }
                    frames.push(p.data.into_owned());
                }
                Block::SimplePacket(p) => frames.push(p.data.into_owned()),
                _ => {}
            }
        }
    } else {
        let mut r = PcapReader::new(file).map_err(|e| err(e.to_string()))?;
        if !is_ethernet(r.header().datalink) {
            return Err(err(format!("link type {:?}", r.header().datalink)));
        }
        // Raw records: some captures (fuzzer output) have orig_len > snaplen, which the
        // checked reader refuses; the captured bytes are what matters here.
        while let Some(p) = r.next_raw_packet() {
            let p = p.map_err(|e| err(format!("after {} frames: {e}", frames.len())))?;
            frames.push(p.data.into_owned());
        }
    }
    Ok(frames)
}

/// Writes `frames` as an Ethernet pcap, one packet per frame, 1 ms apart from t = 1 s.
///
/// # Errors
/// [`Error::Capture`] when the file cannot be written.
pub fn write_pcap(path: &Path, frames: &[&[u8]]) -> Result<()> {
    let err = |detail: String| Error::Capture {
        path: path.to_path_buf(),
        detail,
    };
    let file = BufWriter::new(File::create(path).map_err(|e| err(e.to_string()))?);
    let header = PcapHeader {
        snaplen: 65535,
        datalink: DataLink::ETHERNET,
        ..PcapHeader::default()
    };
    let mut w = PcapWriter::with_header(file, header).map_err(|e| err(e.to_string()))?;
    for (i, f) in frames.iter().enumerate() {
        let ts = Duration::from_secs(1) + Duration::from_millis(i as u64);
        w.write_packet(&PcapPacket::new(ts, f.len() as u32, f))
            .map_err(|e| err(e.to_string()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sendable_limits_match_the_veth_measurement() {
        assert_eq!(check_sendable(&[0; 13]), Err(Unsendable::TooShort));
        assert_eq!(check_sendable(&[0; 14]), Ok(()));
        assert_eq!(check_sendable(&[0; 9014]), Ok(()));
        assert_eq!(check_sendable(&[0; 9015]), Err(Unsendable::TooLong));
        let mut tagged = vec![0; 9018];
        tagged[12] = 0x81;
        assert_eq!(check_sendable(&tagged), Ok(()));
        tagged.push(0);
        assert_eq!(check_sendable(&tagged), Err(Unsendable::TooLong));
        let mut qinq = vec![0; 9018];
        qinq[12] = 0x88;
        qinq[13] = 0xa8;
        assert_eq!(check_sendable(&qinq), Err(Unsendable::TooLong));
    }

    #[test]
    fn pcap_round_trip() {
        let dir = std::env::temp_dir().join(format!("wasp-conf-cap-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("t.pcap");
        let a = [1u8; 20];
        let b = [2u8; 60];
        write_pcap(&p, &[&a, &b]).unwrap();
        let frames = read_frames(&p).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(frames, vec![a.to_vec(), b.to_vec()]);
    }
}
