"""vtep.py BADFILE: the peer's end of the Geneve tunnel for live.sh and the live tests.

A TAP device gnv0 (its frames) and a UDP socket on 192.0.2.2:6081: frames read from gnv0 go to
192.0.2.1 in Geneve VNI 11 (no options, Ethernet inside); Geneve received is written to gnv0
without its outer headers when it is version 0, protocol 0x6558, VNI 11, from 192.0.2.1;
anything else is counted, the count written to BADFILE. Prints "up" once the TAP device and the
socket exist. This kernel may have no geneve driver (CONFIG_GENEVE), hence a script.
"""
import fcntl, os, select, socket, struct, sys

TUNSETIFF, IFF_TAP, IFF_NO_PI = 0x400454CA, 0x0002, 0x1000
fd = os.open("/dev/net/tun", os.O_RDWR)
fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", b"gnv0", IFF_TAP | IFF_NO_PI))
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.bind(("192.0.2.2", 6081))
print("up", flush=True)
bad = 0
while True:
    r, _, _ = select.select([fd, u], [], [])
    if fd in r:
        u.sendto(struct.pack("!BBHI", 0, 0, 0x6558, 11 << 8) + os.read(fd, 65536), ("192.0.2.1", 6081))
    if u in r:
        d, a = u.recvfrom(65536)
        if len(d) < 8 or d[0] >> 6 or d[2:4] != b"\x65\x58" or d[4:7] != b"\0\0\x0b" or a[0] != "192.0.2.1":
            bad += 1
            open(sys.argv[1], "w").write(str(bad))
            continue
        os.write(fd, d[8 + (d[0] & 0x3F) * 4:])
