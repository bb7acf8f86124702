//! Ports: AF_PACKET sockets and TAP devices driven by io_uring, and pcap files, behind one
//! interface ([`PortGroup`]). The only crate of wasp that makes syscalls.
//!
//! One worker owns one [`PortGroup`]: every device it serves shares one io_uring, so the worker
//! waits once for completions of all its ports (`../shared/research/io.md`: batch everything,
//! never wait for one completion at a time).
//!
//! - [`AfPacketGroup`]: AF_PACKET `SOCK_RAW`/`ETH_P_ALL` sockets bound per device, joined to a
//!   `PACKET_FANOUT` group so that several workers share a device's traffic; receive through
//!   multishot `recvmsg` with a registered provided-buffer ring ([`RxMode::Multishot`]) or a
//!   `TPACKET_V3` mmap ring polled through io_uring ([`RxMode::TpacketV3`]); batched `SEND`s.
//! - [`TapGroup`]: TAP devices (`/dev/net/tun`, `IFF_TAP | IFF_NO_PI`), multishot `READ`s into
//!   the same kind of buffer ring, batched `WRITE`s.
//! - [`PcapGroup`]: capture files as ports (`wasp replay`'s): inputs read as streams, one
//!   capture written per port; no privileges.
//! - [`capture`]: pcap and pcapng reading (streamed, faults naming file and byte offset) and
//!   writing, on the `pcap-file` crate.
//!
//! Every system call goes through one internal seam (`sys`), the only module allowed `unsafe`;
//! the ring and buffer logic (`uring`) is unit-tested against a fake of it.

#[allow(unsafe_code)]
mod sys;

mod afpacket;
pub mod capture;
mod csum;
mod error;
mod netns;
mod pcap;
mod port;
mod recvmsg;
mod tap;
mod tpacket;
mod uring;

#[cfg(test)]
mod live_tests;

pub use afpacket::AfPacketGroup;
pub use error::IoError;
pub use netns::in_netns;
pub use pcap::{Captured, InputState, PcapGroup, PcapInput, PcapOptions, PcapPort};
pub use port::{
    FanoutMode, FanoutSpec, Frame, PortGroup, PortInfo, PortStats, RingConfig, RxMode,
    TpacketConfig, TxMode, TxSide,
};
pub use tap::TapGroup;
