//! TAP devices on one io_uring.

use std::time::Duration;

use crate::IoError;
use crate::afpacket::{check_devs, port_info, ring_spec};
use crate::port::{Frame, PortGroup, PortInfo, PortStats, RingConfig, TxSide};
use crate::sys::{RealSys, Sys};
use crate::uring::{RxPath, UringPorts};

/// TAP devices (`/dev/net/tun`, `IFF_TAP | IFF_NO_PI`: whole Ethernet frames, no packet-info
/// prefix, no virtio-net header), so wasp can sit in front of a VM or a container. Receive is
/// one multishot `READ` per device into the group's provided-buffer ring; sends are batched
/// `WRITE`s of recycled send buffers. [`RingConfig::rx_mode`] does not apply.
///
/// Each group opens one queue of each device: devices are opened with `IFF_MULTI_QUEUE`, so
/// several groups (one per worker) opening the same names each get their own queue, and the
/// kernel spreads the frames it sends into the device over the queues by flow hash
/// (`tun_select_queue`), as PACKET_FANOUT spreads a device's frames over sockets. A device that
/// does not exist is created multi-queue (it lives while a group holds it open, unless made
/// persistent elsewhere). An existing device created without `multi_queue` (`ip tuntap add
/// NAME mode tap`) has one queue: the first group attaches to it, a second one gets an error
/// naming the device and the cause. Bring devices up (`ip link set NAME up`) for traffic to
/// flow.
///
/// Without a virtio-net header the kernel computes the checksums of what it sends into the
/// device (no offload is negotiated), and checks those of what we write.
pub struct TapGroup {
    inner: UringPorts<<RealSys as Sys>::Ring>,
    multi_queue: bool,
}

impl TapGroup {
    /// Opens (creating when missing) the TAP devices `names`.
    ///
    /// Errors: [`IoError::Permission`] without `CAP_NET_ADMIN`, [`IoError::Config`] for an empty
    /// or repeated list, [`IoError::Device`] when `name` exists but is not a TAP device (EINVAL),
    /// is a single-queue TAP device another group (or process) already holds ("NAME: TAP open
    /// (TUNSETIFF): the device has one queue ..."), or `/dev/net/tun` is missing,
    /// [`IoError::Ring`] for ring setup.
    pub fn open<S: AsRef<str>>(names: &[S], cfg: RingConfig) -> Result<TapGroup, IoError> {
        let (inner, multi_queue) = open_with(&RealSys, names, &cfg)?;
        Ok(TapGroup { inner, multi_queue })
    }

    /// True when every device of the group is multi-queue (more groups can open them); false
    /// when one of them is a single-queue device this group holds the only queue of.
    pub fn multi_queue(&self) -> bool {
        self.multi_queue
    }
}

/// Opens one queue of TAP device `name`: multi-queue, or the single queue of a device that
/// exists without `IFF_MULTI_QUEUE` (`tun_set_iff` refuses the other setting with EINVAL, and a
/// second queue of a single-queue device with EBUSY). Returns the port, the device's name and
/// whether it is multi-queue.
fn open_queue<S: Sys>(sys: &S, name: &str) -> Result<(S::Port, String, bool), IoError> {
    const WHAT: &str = "TAP open (TUNSETIFF)";
    match sys.tap_open(name, true) {
        Ok((p, real)) => Ok((p, real, true)),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => match open_single(sys, name) {
            Ok((p, real)) => Ok((p, real, false)),
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => Err(IoError::Device {
                dev: name.to_string(),
                what: WHAT,
                source: std::io::Error::other(
                    "the device has one queue (created without multi_queue) and it is already \
                     open: serve it with one worker, or recreate it with `ip tuntap add dev \
                     NAME mode tap multi_queue` for one queue per worker"
                        .replace("NAME", name),
                ),
            }),
            Err(e) => Err(IoError::open(name, WHAT, "CAP_NET_ADMIN", e)),
        },
        Err(e) => Err(IoError::open(name, WHAT, "CAP_NET_ADMIN", e)),
    }
}

/// How long opening a single-queue device waits for its queue to be let go of.
const BUSY_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// The one queue of a single-queue device. EBUSY (attached elsewhere) is retried for
/// [`BUSY_WAIT`]: a process that just exited may hold it a little longer (its io_uring is torn
/// down by a kernel worker after the exit, and keeps the queue's file until then), so a
/// daemon restarted at once on the same TAP would otherwise be refused.
fn open_single<S: Sys>(sys: &S, name: &str) -> std::io::Result<(S::Port, String)> {
    let start = std::time::Instant::now();
    loop {
        match sys.tap_open(name, false) {
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) && start.elapsed() < BUSY_WAIT => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            r => return r,
        }
    }
}

pub(crate) fn open_with<S: Sys, D: AsRef<str>>(
    sys: &S,
    names: &[D],
    cfg: &RingConfig,
) -> Result<(UringPorts<S::Ring>, bool), IoError> {
    cfg.check()?;
    check_devs(names)?;
    let mut info = Vec::new();
    let mut ports = Vec::new();
    let mut all_multi = true;
    for n in names {
        let name = n.as_ref();
        let (port, real, multi) = open_queue(sys, name)?;
        all_multi &= multi;
        let pi = port_info(sys, &real, "CAP_NET_ADMIN")?;
        crate::afpacket::check_frame_room(&pi, cfg, false)?;
        info.push(pi);
        ports.push(port);
    }
    let ring = sys
        .ring(&ring_spec(cfg), ports)
        .map_err(|e| IoError::ring("setup", e))?;
    let rx = vec![RxPath::Read; info.len()];
    Ok((
        UringPorts::new(ring, info, rx, cfg.tx_buffer_bytes),
        all_multi,
    ))
}

impl PortGroup for TapGroup {
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
        let (mut g, multi) = open_with(&sys, &["tap0"], &RingConfig::default()).unwrap();
        assert!(multi);
        g.ring.incoming[0].push_back(vec![7; 60]);
        let mut n = 0;
        g.poll(1, 64, Duration::ZERO, &mut |f, _| n += f.len())
            .unwrap();
        assert_eq!(n, 1);
        assert!(g.queue(0, &[1; 60]));
        g.flush().unwrap();
        assert_eq!(g.ring.sent[0], vec![vec![1; 60]]);
    }

    #[test]
    fn each_group_gets_its_own_queue_of_a_multi_queue_device() {
        let sys = FakeSys::with(&["tap0", "tap1"]);
        let cfg = RingConfig::default();
        for _ in 0..3 {
            let (_, multi) = open_with(&sys, &["tap0", "tap1"], &cfg).unwrap();
            assert!(multi);
        }
        let q = sys.tap_queues.borrow();
        assert_eq!(q.len(), 6);
        assert!(
            q.iter().all(|(_, mq)| *mq),
            "every queue opened IFF_MULTI_QUEUE"
        );
    }

    #[test]
    fn a_single_queue_device_serves_one_group_and_a_second_is_told_why_not() {
        let mut sys = FakeSys::with(&["tp0"]);
        sys.single_queue_taps = vec!["tp0".into()];
        let cfg = RingConfig::default();
        let (_, multi) = open_with(&sys, &["tp0"], &cfg).unwrap();
        assert!(!multi, "attached to its one queue");
        let e = open_with(&sys, &["tp0"], &cfg).err().unwrap();
        assert_eq!(
            e.to_string(),
            "tp0: TAP open (TUNSETIFF): the device has one queue (created without \
             multi_queue) and it is already open: serve it with one worker, or recreate it \
             with `ip tuntap add dev tp0 mode tap multi_queue` for one queue per worker"
        );
    }
}
