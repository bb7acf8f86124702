#!/usr/bin/env python3
"""Write ttl.pcap: the capture the ttlbelow examples are tested on (sdk/*/README.md).

Packets (Ethernet, UDP to port 53 where IP):
  1. IPv4, TTL 1      2. IPv4, TTL 63     3. IPv4, TTL 64     4. IPv4, TTL 200
  5. IPv6, hop limit 10                   6. IPv6, hop limit 255
  7. ARP request (no IP header)
With `ttlbelow 64` packets 1, 2 and 5 match.
"""

import struct
import sys


def eth(ethertype: int, payload: bytes) -> bytes:
    return bytes([2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2]) + struct.pack(">H", ethertype) + payload


def udp() -> bytes:
    return struct.pack(">HHHH", 5000, 53, 12, 0) + b"wasp"


def ipv4(ttl: int) -> bytes:
    l4 = udp()
    return (struct.pack(">BBHHHBBH", 0x45, 0, 20 + len(l4), 1, 0x4000, ttl, 17, 0)
            + bytes([10, 0, 0, 2, 10, 0, 0, 1]) + l4)


def ipv6(hops: int) -> bytes:
    l4 = udp()
    src = bytes([0xfd] + [0] * 14 + [2])
    dst = bytes([0xfd] + [0] * 14 + [1])
    return struct.pack(">IHBB", 6 << 28, len(l4), 17, hops) + src + dst + l4


def arp() -> bytes:
    return struct.pack(">HHBBH", 1, 0x0800, 6, 4, 1) + bytes(20)


FRAMES = [eth(0x0800, ipv4(t)) for t in (1, 63, 64, 200)]
FRAMES += [eth(0x86DD, ipv6(h)) for h in (10, 255)]
FRAMES.append(eth(0x0806, arp()))


def pcap(frames: list) -> bytes:
    out = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
    for i, f in enumerate(frames):
        out += struct.pack("<IIII", 1_700_000_000 + i, 0, len(f), len(f)) + f
    return out


if __name__ == "__main__":
    path = sys.argv[1] if len(sys.argv) > 1 else "ttl.pcap"
    with open(path, "wb") as fh:
        fh.write(pcap(FRAMES))
