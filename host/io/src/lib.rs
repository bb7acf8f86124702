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
    TpacketConfig, TxMode, TxSide, Waker,
};
pub use tap::TapGroup;

/// Give the memory the allocator holds free back to the system (glibc: `malloc_trim(0)` over
/// every thread's arena; other C libraries: nothing). Returns whether any was released.
///
/// For the control side after a change that freed much (a ruleset replaced: the old engines,
/// sets and plugin instances, the copies the change was built from), never on the packet path:
/// it takes each arena's lock in turn and makes one `madvise` per free stretch of pages.
/// Without it a daemon's resident memory after a change depends on where the freed chunks
/// happened to lie in the arenas of the threads that built and dropped them (issue 17: the
/// same ruleset applied again and again settled a few MiB higher or lower from run to run).
pub fn release_free_heap() -> bool {
    sys::trim_heap()
}

/// Have the allocator map every block of [`LARGE_BLOCK`] bytes or more on its own, for the
/// rest of the process (glibc: `mallopt(M_MMAP_THRESHOLD)`, which also stops glibc's own
/// raising of that threshold; other C libraries: nothing). Returns whether it took.
///
/// For a daemon whose large blocks (a set's lookup tables, its element list, the copy an
/// element change makes) come and go: glibc raises the threshold to the size of the first
/// mapped block that is freed (up to 32 MiB), after which such blocks come from the arenas and
/// their space, once freed, stays resident behind the small chunks that outlive them (a
/// 100 000-element set left 30 MiB more resident than it used). Mapped on their own, they go
/// back to the system when dropped. Costs a `mmap`/`munmap` and fresh pages per such block.
pub fn map_large_blocks_alone() -> bool {
    sys::map_large_blocks_alone(LARGE_BLOCK)
}

/// Size from which [`map_large_blocks_alone`] has blocks mapped on their own: glibc's default
/// threshold, 128 KiB.
pub const LARGE_BLOCK: usize = 128 << 10;

/// Bytes of heap in use now, over every thread's arena, as the allocator counts them (glibc:
/// `mallinfo2`, chunks in use and blocks mapped on their own; `None` with other C libraries).
/// What a test or a benchmark reads to see whether something is kept, whatever the arenas'
/// layout (resident memory also counts free chunks the arenas hold).
pub fn heap_in_use_bytes() -> Option<u64> {
    sys::heap_in_use()
}

#[cfg(all(test, target_env = "gnu"))]
mod heap_tests {
    /// A 64 MiB block is counted while it lives (other tests of this binary may allocate
    /// meanwhile: 8 MiB of slack either way).
    #[test]
    fn heap_in_use_counts_a_block_while_it_lives() {
        const BLOCK: u64 = 64 << 20;
        const SLACK: u64 = 8 << 20;
        let before = super::heap_in_use_bytes().expect("glibc");
        let block = vec![1u8; BLOCK as usize];
        let during = super::heap_in_use_bytes().expect("glibc");
        drop(std::hint::black_box(block));
        let after = super::heap_in_use_bytes().expect("glibc");
        assert!(during + SLACK >= before + BLOCK, "{before} {during}");
        assert!(after + BLOCK <= during + SLACK, "{during} {after}");
        // Nothing to check but that it runs: what it gives back depends on the arenas.
        super::release_free_heap();
    }

    /// Once large blocks are mapped alone, blocks of 1 MiB made after a 16 MiB one was freed
    /// (which raises glibc's own threshold past them) are still mapped on their own: the
    /// bytes mapped alone grow by theirs (other tests may map or unmap meanwhile: 2 MiB of
    /// slack).
    #[test]
    fn large_blocks_stay_mapped_alone_after_a_larger_one_is_freed() {
        const SLACK: usize = 2 << 20;
        assert!(super::map_large_blocks_alone());
        drop(std::hint::black_box(vec![1u8; 16 << 20]));
        let mapped = crate::sys::real::heap_mapped_alone;
        let before = mapped();
        let blocks: Vec<Vec<u8>> = (0..8).map(|i| vec![i as u8; 1 << 20]).collect();
        let during = mapped();
        assert!(during + SLACK >= before + (8 << 20), "{before} {during}");
        drop(std::hint::black_box(blocks));
    }
}
