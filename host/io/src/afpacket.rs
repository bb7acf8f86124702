//! AF_PACKET ports on one io_uring.

use std::time::Duration;

use crate::IoError;
use crate::port::{
    FanoutMode, FanoutSpec, Frame, PortGroup, PortInfo, PortStats, RingConfig, RxMode, TxMode,
    TxSide,
};
use crate::sys::{RealSys, RingSpec, SocketSpec, Sys, TxRingSpec};
use crate::uring::{RxPath, UringPorts};

/// AF_PACKET sockets (`SOCK_RAW`, `ETH_P_ALL`), one per device, driven by one io_uring
/// (`SINGLE_ISSUER | DEFER_TASKRUN`).
///
/// Each socket is bound to its device, ignores the device's outgoing frames
/// (`PACKET_IGNORE_OUTGOING`, so our own sends never come back as receives) and, with a
/// [`FanoutSpec`], joins `PACKET_FANOUT` group `group_id + ifindex` (wrapping; the kernel ties a
/// fanout group to one device, so each device gets its own id, the same in every worker that
/// passes the same `group_id`). Receive is multishot `recvmsg` into a registered provided-buffer
/// ring or a `TPACKET_V3` ring ([`RingConfig::rx_mode`]); sends are `IORING_OP_SEND`s of
/// recycled send buffers, submitted in one batch per [`PortGroup::flush`].
///
/// Frames a local stack sent with a partial checksum (`TP_STATUS_CSUMNOTREADY`, as veth
/// delivers them) get their TCP/UDP checksum completed before they are handed over, so the
/// ruleset sees, and a forwarded copy carries, the checksum the receiver checks
/// ([`PortStats::csum_completed`]).
pub struct AfPacketGroup {
    inner: UringPorts<<RealSys as Sys>::Ring>,
    mode: RxMode,
}

impl AfPacketGroup {
    /// Opens `devs` (in this thread's network namespace).
    ///
    /// Errors: [`IoError::NoDevice`] ("no such device veth9"), [`IoError::Permission`] without
    /// `CAP_NET_RAW` ("needs CAP_NET_RAW (run as root)"), [`IoError::Config`] for an empty or
    /// repeated device list or unusable sizes, [`IoError::Device`]/[`IoError::Ring`] for other
    /// failures (each naming the device or the ring step).
    pub fn open<S: AsRef<str>>(
        devs: &[S],
        fanout: impl Into<Option<FanoutSpec>>,
        cfg: RingConfig,
    ) -> Result<AfPacketGroup, IoError> {
        Ok(AfPacketGroup {
            inner: open_with(&RealSys, devs, fanout.into(), &cfg)?,
            mode: cfg.rx_mode,
        })
    }

    /// The receive path in use.
    pub fn rx_mode(&self) -> RxMode {
        self.mode
    }
}

/// `PACKET_FANOUT` argument: `id | mode << 16` (<linux/if_packet.h>: `PACKET_FANOUT_HASH` 0,
/// `_LB` 1, `_CPU` 2).
pub(crate) fn fanout_arg(f: &FanoutSpec, ifindex: u32) -> u32 {
    let id = f.group_id.wrapping_add(ifindex as u16);
    let mode = match f.mode {
        FanoutMode::Hash => 0,
        FanoutMode::RoundRobin => 1,
        FanoutMode::Cpu => 2,
    };
    u32::from(id) | mode << 16
}

/// Name, index, MAC and MTU of `dev`.
pub(crate) fn port_info<S: Sys>(
    sys: &S,
    dev: &str,
    cap: &'static str,
) -> Result<PortInfo, IoError> {
    let ifindex = sys
        .if_index(dev)
        .map_err(|e| IoError::open(dev, "if_nametoindex", cap, e))?;
    let mac = sys
        .if_hwaddr(dev)
        .map_err(|e| IoError::open(dev, "SIOCGIFHWADDR", cap, e))?;
    let mtu = sys
        .if_mtu(dev)
        .map_err(|e| IoError::open(dev, "SIOCGIFMTU", cap, e))?;
    Ok(PortInfo {
        name: dev.to_string(),
        ifindex,
        mac,
        mtu,
    })
}

/// Refuses buffers too small for the device's largest frame (MTU + Ethernet header + one VLAN
/// tag), which the kernel would truncate on receive or `queue` would refuse to send.
pub(crate) fn check_frame_room(
    pi: &PortInfo,
    cfg: &RingConfig,
    tpacket: bool,
) -> Result<(), IoError> {
    let need = u64::from(pi.mtu) + 18;
    // TPACKET_V3 packs frames into blocks: a frame may take a whole block but its headers.
    let (rx_room, what) = if tpacket {
        (
            u64::from(cfg.tpacket.block_bytes).saturating_sub(128),
            "tpacket.block_bytes - 128",
        )
    } else {
        (u64::from(cfg.rx_buffer_bytes), "rx_buffer_bytes")
    };
    let too_small = |room: u64, what: &str| {
        IoError::Config(format!(
            "{}: MTU {} needs frames of {need} bytes, {what} is {room}",
            pi.name, pi.mtu
        ))
    };
    if rx_room < need {
        return Err(too_small(rx_room, what));
    }
    if u64::from(cfg.tx_buffer_bytes) < need {
        return Err(too_small(u64::from(cfg.tx_buffer_bytes), "tx_buffer_bytes"));
    }
    Ok(())
}

/// Checks a device list: not empty, no name twice.
pub(crate) fn check_devs<S: AsRef<str>>(devs: &[S]) -> Result<(), IoError> {
    if devs.is_empty() {
        return Err(IoError::Config(
            "a port group needs at least one device".into(),
        ));
    }
    for (i, d) in devs.iter().enumerate() {
        if devs[..i].iter().any(|e| e.as_ref() == d.as_ref()) {
            return Err(IoError::Config(format!(
                "device {} listed twice",
                d.as_ref()
            )));
        }
    }
    Ok(())
}

pub(crate) fn ring_spec(cfg: &RingConfig) -> RingSpec {
    RingSpec {
        sq_entries: cfg.sq_entries,
        rx_buffers: cfg.rx_buffers,
        rx_buffer_bytes: cfg.rx_buffer_bytes,
        tx_buffers: cfg.tx_buffers,
        tx_buffer_bytes: cfg.tx_buffer_bytes,
    }
}

pub(crate) fn open_with<S: Sys, D: AsRef<str>>(
    sys: &S,
    devs: &[D],
    fanout: Option<FanoutSpec>,
    cfg: &RingConfig,
) -> Result<UringPorts<S::Ring>, IoError> {
    cfg.check()?;
    check_devs(devs)?;
    let tp = cfg.rx_mode == RxMode::TpacketV3;
    let mut info = Vec::new();
    let mut ports = Vec::new();
    for d in devs {
        let dev = d.as_ref();
        let pi = port_info(sys, dev, "CAP_NET_RAW")?;
        check_frame_room(&pi, cfg, tp)?;
        let spec = SocketSpec {
            ifindex: pi.ifindex,
            fanout: fanout.as_ref().map(|f| fanout_arg(f, pi.ifindex)),
            rcvbuf: if tp { 0 } else { cfg.socket_rcvbuf_bytes },
            tpacket: tp.then_some(cfg.tpacket),
            tx_ring: (cfg.tx_mode == TxMode::Ring).then_some(TxRingSpec {
                frames: cfg.tx_buffers,
                frame_bytes: cfg.tx_buffer_bytes,
            }),
            auxdata: !tp,
        };
        let port = sys
            .packet_socket(&spec)
            .map_err(|(what, e)| IoError::open(dev, what, "CAP_NET_RAW", e))?;
        info.push(pi);
        ports.push(port);
    }
    let mut spec = ring_spec(cfg);
    if tp {
        // Frames arrive in the mmap rings: the provided-buffer ring is not used.
        spec.rx_buffers = 1;
        spec.rx_buffer_bytes = 64;
    } else {
        // Each buffer starts with the recvmsg header and the PACKET_AUXDATA message.
        spec.rx_buffer_bytes += crate::recvmsg::HEAD as u32;
    }
    if cfg.tx_mode == TxMode::Ring {
        // Frames leave from the sockets' TX rings: no shared send buffers.
        spec.tx_buffers = 1;
        spec.tx_buffer_bytes = 64;
    }
    let ring = sys
        .ring(&spec, ports)
        .map_err(|e| IoError::ring("setup", e))?;
    let rx = vec![if tp { RxPath::Tpacket } else { RxPath::Recv }; info.len()];
    Ok(UringPorts::new(ring, info, rx, cfg.tx_buffer_bytes))
}

impl PortGroup for AfPacketGroup {
    fn set_waker(&mut self, w: &crate::port::Waker) {
        self.inner.set_waker(w.0.clone());
    }

    fn ports(&self) -> &[PortInfo] {
        self.inner.ports()
    }
    fn poll(
        &mut self,
        min: usize,
        max: usize,
        timeout: Duration,
        on_rx: &mut dyn FnMut(&[Frame<'_>]),
    ) -> Result<usize, IoError> {
        self.inner
            .poll(min, max, timeout, &mut |frames, _| on_rx(frames))
    }
    fn poll_tx(
        &mut self,
        min: usize,
        max: usize,
        timeout: Duration,
        on_rx: &mut dyn FnMut(&[Frame<'_>], &mut dyn TxSide),
    ) -> Result<usize, IoError> {
        self.inner.poll(min, max, timeout, on_rx)
    }
    fn queue(&mut self, port: usize, frame: &[u8]) -> bool {
        self.inner.queue(port, frame)
    }
    fn queue_with(&mut self, port: usize, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> bool {
        self.inner.queue_with(port, len, fill)
    }
    fn flush(&mut self) -> Result<(), IoError> {
        self.inner.flush()
    }
    fn stats(&self) -> Vec<PortStats> {
        self.inner.stats()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::fake::FakeSys;

    #[test]
    fn missing_device_is_named() {
        let sys = FakeSys::with(&["veth0"]);
        let e = open_with(&sys, &["veth0", "veth9"], None, &RingConfig::default())
            .err()
            .unwrap();
        assert_eq!(e.to_string(), "no such device veth9");
    }

    #[test]
    fn missing_privilege_says_which_capability() {
        let mut sys = FakeSys::with(&["veth0"]);
        sys.open_errno = Some(libc::EPERM);
        let e = open_with(&sys, &["veth0"], None, &RingConfig::default())
            .err()
            .unwrap();
        assert_eq!(
            e.to_string(),
            "veth0: AF_PACKET socket: needs CAP_NET_RAW (run as root)"
        );
    }

    #[test]
    fn bad_lists_and_sizes_are_refused() {
        let sys = FakeSys::with(&["a", "b"]);
        let cfg = RingConfig::default();
        let e = open_with::<_, &str>(&sys, &[], None, &cfg).err().unwrap();
        assert!(e.to_string().contains("at least one device"), "{e}");
        let e = open_with(&sys, &["a", "b", "a"], None, &cfg).err().unwrap();
        assert_eq!(e.to_string(), "device a listed twice");
        let bad = RingConfig {
            rx_buffers: 1000,
            ..cfg
        };
        let e = open_with(&sys, &["a"], None, &bad).err().unwrap();
        assert!(e.to_string().contains("power of two"), "{e}");
    }

    #[test]
    fn buffers_smaller_than_the_mtu_are_refused() {
        let mut sys = FakeSys::with(&["jumbo"]);
        sys.devs[0].mtu = 9000;
        let e = open_with(&sys, &["jumbo"], None, &RingConfig::default())
            .err()
            .unwrap();
        assert_eq!(
            e.to_string(),
            "jumbo: MTU 9000 needs frames of 9018 bytes, tx_buffer_bytes is 2048"
        );
        let mut cfg = RingConfig {
            rx_mode: RxMode::Multishot,
            rx_buffer_bytes: 9018,
            tx_buffer_bytes: 9018,
            ..RingConfig::default()
        };
        assert!(open_with(&sys, &["jumbo"], None, &cfg).is_ok());
        cfg.rx_buffer_bytes = 9017;
        let e = open_with(&sys, &["jumbo"], None, &cfg).err().unwrap();
        assert_eq!(
            e.to_string(),
            "jumbo: MTU 9000 needs frames of 9018 bytes, rx_buffer_bytes is 9017"
        );
    }

    #[test]
    fn ports_carry_the_devices_facts() {
        let sys = FakeSys::with(&["a", "b"]);
        let g = open_with(&sys, &["b", "a"], None, &RingConfig::default()).unwrap();
        let p = g.ports();
        assert_eq!(p[0].name, "b");
        assert_eq!(p[0].ifindex, 11);
        assert_eq!(p[0].mac, [2, 0, 0, 0, 0, 1]);
        assert_eq!(p[1].ifindex, 10);
        assert_eq!(p[1].mtu, 1500);
    }

    #[test]
    fn fanout_ids_differ_per_device_and_carry_the_mode() {
        let f = FanoutSpec {
            group_id: 0x100,
            mode: FanoutMode::Hash,
        };
        assert_eq!(fanout_arg(&f, 3), 0x103);
        let f = FanoutSpec {
            group_id: 0xffff,
            mode: FanoutMode::Cpu,
        };
        assert_eq!(fanout_arg(&f, 2), 1 | 2 << 16);
    }
}
