#!/usr/bin/env python3
"""Write a capture for measuring what a plugin costs per packet in `wasp replay` (the numbers
in sdk/js/README.md and sdk/python/README.md).

Usage: make-cost-capture.py PACKETS OUT.pcap [VECTOR]

PACKETS 60-byte Ethernet/IPv4/UDP frames (64 on the wire) from 16 sources (10.0.0.1..16, in
turn), TTL 1..255 in turn; VECTOR packets (32 by default, at most 64) share each millisecond of capture time.
`wasp replay` with plugins cuts a vector where its capture time passes 1 ms, so each vector
holds exactly VECTOR packets. Replay it through a ruleset with the plugin and through the same
ruleset without it: the difference in CPU time over PACKETS is the plugin's cost per packet.
"""

import struct
import sys


def frame(i: int) -> bytes:
    src = bytes([10, 0, 0, 1 + i % 16])
    l4 = struct.pack(">HHHH", 5000, 53, 8 + 18, 0) + bytes(18)
    ip = (struct.pack(">BBHHHBBH", 0x45, 0, 20 + len(l4), i & 0xFFFF, 0x4000, 1 + i % 255, 17, 0)
          + src + bytes([10, 0, 1, 1]) + l4)
    return bytes([2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2]) + struct.pack(">H", 0x0800) + ip


def main() -> None:
    packets, out = int(sys.argv[1]), sys.argv[2]
    vector = int(sys.argv[3]) if len(sys.argv) > 3 else 32
    with open(out, "wb") as fh:
        fh.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for i in range(packets):
            f = frame(i)
            ms = i // vector
            fh.write(struct.pack("<IIII", 1_700_000_000 + ms // 1000, (ms % 1000) * 1000,
                                 len(f), len(f)) + f)


if __name__ == "__main__":
    main()
