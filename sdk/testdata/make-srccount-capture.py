#!/usr/bin/env python3
"""Write srccount.pcap: the capture the srccount examples are tested on (sdk/js, sdk/python).

Three sources send UDP datagrams to port 53, interleaved, and one ARP request has no IP header:

  packet  1  2  3  4  5  6    7  8  9  10 11 12 13
  source  A  B  A  C  A  ARP  C  A  B  C  A  C  A

A = 10.0.0.1 (6 packets), B = 10.0.0.2 (2), C = fd00::3 (4, IPv6). With `srccount 2` (true
when the source's count, this packet included, is above 2) packets 5, 8, 10, 11, 12 and 13
match; after packet 6 the counts are A 3, B 1, C 1, so a hot swap there that carries them
still matches 8, 10, 11, 12 and 13, and one that loses them would not.
"""

import struct
import sys

A = bytes([10, 0, 0, 1])
B = bytes([10, 0, 0, 2])
C = bytes([0xFD] + [0] * 14 + [3])
ORDER = [A, B, A, C, A, None, C, A, B, C, A, C, A]


def eth(ethertype: int, payload: bytes) -> bytes:
    return bytes([2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2]) + struct.pack(">H", ethertype) + payload


def udp(seq: int) -> bytes:
    return struct.pack(">HHHH", 5000 + seq, 53, 12, 0) + b"wasp"


def ipv4(src: bytes, seq: int) -> bytes:
    l4 = udp(seq)
    return (struct.pack(">BBHHHBBH", 0x45, 0, 20 + len(l4), seq, 0x4000, 64, 17, 0)
            + src + bytes([10, 0, 0, 254]) + l4)


def ipv6(src: bytes, seq: int) -> bytes:
    l4 = udp(seq)
    dst = bytes([0xFD] + [0] * 14 + [0xFE])
    return struct.pack(">IHBB", 6 << 28, len(l4), 17, 64) + src + dst + l4


def arp() -> bytes:
    return struct.pack(">HHBBH", 1, 0x0800, 6, 4, 1) + bytes(20)


def frame(seq: int, src) -> bytes:
    if src is None:
        return eth(0x0806, arp())
    if len(src) == 4:
        return eth(0x0800, ipv4(src, seq))
    return eth(0x86DD, ipv6(src, seq))


FRAMES = [frame(i + 1, s) for i, s in enumerate(ORDER)]


def pcap(frames: list) -> bytes:
    out = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
    for i, f in enumerate(frames):
        out += struct.pack("<IIII", 1_700_000_000 + i, 0, len(f), len(f)) + f
    return out


if __name__ == "__main__":
    path = sys.argv[1] if len(sys.argv) > 1 else "srccount.pcap"
    with open(path, "wb") as fh:
        fh.write(pcap(FRAMES))
