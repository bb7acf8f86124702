#!/usr/bin/env python3
"""The far ends of a live wasp's ports, for tests that compare it with `wasp replay`.

Usage: peer.py DEV...   (run inside the namespace that holds the DEVs)

Reads lines "DEV DELAY_MS HEX" from standard input: each frame is sent on DEV (an AF_PACKET
socket bound to it) DELAY_MS milliseconds after the one before, in order. Meanwhile every frame
that arrives on any DEV (sent by the other end, not by this script) is kept. After the last
frame and a quiet second, prints one line "DEV HEX" per frame received, in the order each DEV
received them.
"""

import select
import socket
import sys
import time

PACKET_OUTGOING = 4
ETH_P_ALL = 0x0003


def main():
    devs = sys.argv[1:]
    socks = {}
    for d in devs:
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        s.bind((d, 0))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        socks[s.fileno()] = (d, s)
    got = []

    def drain(until):
        while True:
            left = until - time.monotonic()
            if left <= 0:
                return
            ready, _, _ = select.select(list(socks), [], [], left)
            for fd in ready:
                d, s = socks[fd]
                data, addr = s.recvfrom(65535)
                if addr[2] == PACKET_OUTGOING:
                    continue
                got.append((d, data.hex()))

    # Let the other end settle (its rings open) before the first frame.
    drain(time.monotonic() + 0.2)
    by_dev = {d: s for d, s in socks.values()}
    for line in sys.stdin:
        parts = line.split()
        if len(parts) != 3:
            continue
        dev, delay, frame = parts
        drain(time.monotonic() + float(delay) / 1000.0)
        by_dev[dev].send(bytes.fromhex(frame))
    drain(time.monotonic() + 1.0)
    for d, h in got:
        print(d, h)


if __name__ == "__main__":
    main()
