//! The port side of a vector's [`crate::datapath::Exit`], the same for `wasp run` and
//! `wasp replay`: a frame that leaves is queued on the port of its device, written in place
//! into the port group's send memory ([`TxSide::queue_with`]: an AF_PACKET ring frame, a TAP
//! send buffer, a capture file), and what became of each packet is counted. The daemon's worker
//! wraps it with its event bus and statistics ([`crate::daemon::worker`]), replay with its
//! capture clock, verdict lines, trace and summary ([`crate::replay`](mod@crate::replay)).

use wasp_gateway::{DropReason, Fate, Send, SendKind};
use wasp_io::TxSide;

/// What one vector sent and how its packets ended, counted by a [`PortExit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExitCounts {
    /// Frames queued on a port.
    pub sent: u64,
    /// Packets delivered to the host side ([`Fate::Local`]).
    pub local: u64,
    /// `reject` replies made (queued or not).
    pub rejects: u64,
    /// Packets and frames dropped, by [`DropReason`] (indexed as [`DropReason::ALL`]): a
    /// chain's verdict, the way out's reasons, and [`DropReason::TxFull`] /
    /// [`DropReason::NoPort`] for frames their port refused or that name no port.
    pub drops: [u64; DropReason::ALL.len()],
}

impl Default for ExitCounts {
    fn default() -> Self {
        ExitCounts {
            sent: 0,
            local: 0,
            rejects: 0,
            drops: [0; DropReason::ALL.len()],
        }
    }
}

impl ExitCounts {
    /// Drops counted for `reason`.
    pub fn dropped(&self, reason: DropReason) -> u64 {
        self.drops[reason.index()]
    }
}

/// Queues what a vector sends on the ports of one port group (see the module documentation).
pub struct PortExit<'a> {
    tx: &'a mut dyn TxSide,
    /// Device names by port index.
    ports: &'a [String],
    /// What was sent and how the packets ended, since [`PortExit::new`].
    pub counts: ExitCounts,
}

impl<'a> PortExit<'a> {
    /// Send on `tx`, whose ports are named `ports` (by index).
    pub fn new(tx: &'a mut dyn TxSide, ports: &'a [String]) -> Self {
        PortExit {
            tx,
            ports,
            counts: ExitCounts::default(),
        }
    }

    /// The send side, e.g. to [`TxSide::describe`] the next frames.
    pub fn tx(&mut self) -> &mut dyn TxSide {
        &mut *self.tx
    }

    /// Queue `s`, made from `frame` (the packet's frame as its walk left it), on the port of
    /// its device: one copy into the send memory, rewritten there. A full send side counts
    /// [`DropReason::TxFull`], a device that is no port [`DropReason::NoPort`].
    pub fn send(&mut self, s: &Send, frame: &[u8]) {
        if s.kind == SendKind::Reject {
            self.counts.rejects += 1;
        }
        match self.ports.iter().position(|p| **p == *s.dev) {
            Some(p) => {
                let len = s.body.len(frame);
                if self
                    .tx
                    .queue_with(p, len, &mut |buf| s.body.write(frame, buf))
                {
                    self.counts.sent += 1;
                } else {
                    self.counts.drops[DropReason::TxFull.index()] += 1;
                }
            }
            None => self.counts.drops[DropReason::NoPort.index()] += 1,
        }
    }

    /// Count how a packet ended.
    #[inline]
    pub fn done(&mut self, fate: Fate) {
        match fate {
            Fate::Local => self.counts.local += 1,
            Fate::Sent | Fate::Replied => {}
            Fate::Dropped(r) => self.counts.drops[r.index()] += 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use wasp_gateway::path::Body;

    use super::*;

    /// A send side with room for `room` frames, recording them.
    struct Side {
        room: usize,
        sent: Vec<(usize, Vec<u8>)>,
    }

    impl TxSide for Side {
        fn queue_with(&mut self, port: usize, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> bool {
            if self.room == 0 {
                return false;
            }
            self.room -= 1;
            let mut b = vec![0; len];
            fill(&mut b);
            self.sent.push((port, b));
            true
        }
    }

    fn send(dev: &str, kind: SendKind, body: Body) -> Send {
        Send {
            dev: Arc::from(dev),
            body,
            kind,
        }
    }

    #[test]
    fn frames_go_to_their_devices_port_and_what_cannot_is_counted() {
        let mut side = Side {
            room: 2,
            sent: Vec::new(),
        };
        let ports = ["lan0".to_string(), "wan0".to_string()];
        let mut exit = PortExit::new(&mut side, &ports);
        let frame = [7u8; 60];
        let whole = || Body::Input {
            len: 60,
            rewrite: None,
        };
        exit.send(&send("wan0", SendKind::Forward, whole()), &frame);
        exit.send(
            &send("lan0", SendKind::Reject, Body::Owned(vec![1, 2, 3])),
            &frame,
        );
        // No room left; a device that is no port.
        exit.send(&send("wan0", SendKind::Dup, whole()), &frame);
        exit.send(&send("dmz0", SendKind::Fwd, whole()), &frame);
        exit.done(Fate::Sent);
        exit.done(Fate::Local);
        exit.done(Fate::Dropped(DropReason::Verdict));
        exit.done(Fate::Dropped(DropReason::NoRoute));
        let c = exit.counts;
        assert_eq!((c.sent, c.local, c.rejects), (2, 1, 1));
        assert_eq!(
            [
                DropReason::TxFull,
                DropReason::NoPort,
                DropReason::Verdict,
                DropReason::NoRoute
            ]
            .map(|r| c.dropped(r)),
            [1, 1, 1, 1]
        );
        assert_eq!(c.drops.iter().sum::<u64>(), 4);
        assert_eq!(side.sent, [(1, vec![7; 60]), (0, vec![1, 2, 3])]);
    }
}
