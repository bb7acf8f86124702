//! TAP devices on one io_uring.

use std::time::Duration;

use crate::IoError;
use crate::afpacket::{check_devs, port_info, ring_spec};
use crate::port::{Frame, PortGroup, PortInfo, PortStats, RingConfig};
use crate::sys::{RealSys, Sys};
use crate::uring::{RxPath, UringPorts};

/// TAP devices (`/dev/net/tun`, `IFF_TAP | IFF_NO_PI`: whole Ethernet frames, no packet-info
/// prefix), so wasp can sit in front of a VM or a container. Receive is one multishot `READ`
/// per device into the group's provided-buffer ring; sends are batched `WRITE`s of recycled
/// send buffers. [`RingConfig::rx_mode`] does not apply.
///
/// A device that does not exist is created (it lives while the group holds it open, unless made
/// persistent elsewhere); an existing one is attached to. Bring it up (`ip link set NAME up`)
/// for traffic to flow.
pub struct TapGroup {
    inner: UringPorts<<RealSys as Sys>::Ring>,
}

impl TapGroup {
    /// Opens (creating when missing) the TAP devices `names`.
    ///
    /// Errors: [`IoError::Permission`] without `CAP_NET_ADMIN`, [`IoError::Config`] for an empty
    /// or repeated list, [`IoError::Device`] when `name` exists but is not a TAP device (EINVAL)
    /// or `/dev/net/tun` is missing, [`IoError::Ring`] for ring setup.
    pub fn open<S: AsRef<str>>(names: &[S], cfg: RingConfig) -> Result<TapGroup, IoError> {
        Ok(TapGroup {
            inner: open_with(&RealSys, names, &cfg)?,
        })
    }
}

pub(crate) fn open_with<S: Sys, D: AsRef<str>>(
    sys: &S,
    names: &[D],
    cfg: &RingConfig,
) -> Result<UringPorts<S::Ring>, IoError> {
    cfg.check()?;
    check_devs(names)?;
    let mut info = Vec::new();
    let mut ports = Vec::new();
    for n in names {
        let name = n.as_ref();
        let (port, real) = sys
            .tap_open(name)
            .map_err(|e| IoError::open(name, "TAP open (TUNSETIFF)", "CAP_NET_ADMIN", e))?;
        let pi = port_info(sys, &real, "CAP_NET_ADMIN")?;
        crate::afpacket::check_frame_room(&pi, cfg, false)?;
        info.push(pi);
        ports.push(port);
    }
    let ring = sys
        .ring(&ring_spec(cfg), ports)
        .map_err(|e| IoError::ring("setup", e))?;
    let rx = vec![RxPath::Read; info.len()];
    Ok(UringPorts::new(ring, info, rx, cfg.tx_buffer_bytes))
}

impl PortGroup for TapGroup {
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
        self.inner.poll(min, max, timeout, on_rx)
    }
    fn queue(&mut self, port: usize, frame: &[u8]) -> bool {
        self.inner.queue(port, frame)
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
    fn missing_privilege_names_cap_net_admin() {
        let mut sys = FakeSys::with(&["tap0"]);
        sys.open_errno = Some(libc::EPERM);
        let e = open_with(&sys, &["tap0"], &RingConfig::default())
            .err()
            .unwrap();
        assert_eq!(
            e.to_string(),
            "tap0: TAP open (TUNSETIFF): needs CAP_NET_ADMIN (run as root)"
        );
    }

    #[test]
    fn tap_ports_read_and_write() {
        let sys = FakeSys::with(&["tap0"]);
        let mut g = open_with(&sys, &["tap0"], &RingConfig::default()).unwrap();
        g.ring.incoming[0].push_back(vec![7; 60]);
        let mut n = 0;
        g.poll(1, 64, Duration::ZERO, &mut |f| n += f.len())
            .unwrap();
        assert_eq!(n, 1);
        assert!(g.queue(0, &[1; 60]));
        g.flush().unwrap();
        assert_eq!(g.ring.sent[0], vec![vec![1; 60]]);
    }
}
