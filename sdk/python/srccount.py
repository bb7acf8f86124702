"""srccount N: a stateful wasp match that counts packets per source address and is true when the
packet's source has sent more than N packets, this one included (N in 0..=4294967295). Built
into a component by build.sh (componentize-py). The same plugin is written in JavaScript
(../js/srccount.js), with the same listing and the same state blob, so a hot swap can hand the
counts from one language's build to the other's.

The counts belong to the plugin instance: one table for all its use sites (as a named counter
is shared by the rules that name it); each use site counts the packets it sees and compares
with its own N. Only IPv4 and IPv6 packets are counted (the source bytes of the L3 header);
others never match. At most MAX_SOURCES sources are kept: a packet of a new source when the
table is full is not counted and its count is taken as 1.

list-state: one entry per source, sorted by address (IPv4 before IPv6, then bytewise): elem 0,
values [("packets", count)], text the address (IPv4 dotted quad; IPv6 as RFC 5952 prints it:
lowercase, no leading zeros, the longest run of two or more zero groups as "::", the first
such run on a tie).
reset-state(site, 0): forget every count; another elem: nothing (no per-element state).
State blob (export-state / import-state), all integers little-endian:
  b"WSC1" | u32 entry count | per entry: u8 address length (4 or 16), the address bytes,
  u64 count
with the entries in the listing's order. import-state replaces the table with the blob's; a
malformed blob (bad magic, length, duplicate address, trailing bytes, a count above 2^53-1,
which the JavaScript build cannot hold, or more than MAX_SOURCES entries) is refused and
changes nothing.
"""

import struct

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import types

WINDOW = 64  # Ethernet, a VLAN tag, and the IPv6 source address end before 64 bytes
HEADER = 32
NO_OFFSET = 0xFFFF
NFPROTO_IPV4 = 2
NFPROTO_IPV6 = 10
MAX_SOURCES = 65536
MAX_N = 4294967295
MAX_COUNT = 2**53 - 1
MAGIC = b"WSC1"

# Module state, not attributes of Plugin: componentize-py makes a new Plugin object per call.
LIMITS: dict[int, int] = {}  # N of each use site
COUNTS: dict[bytes, int] = {}  # count per source address (4 or 16 bytes)


def source(batch: bytes, base: int, stride: int) -> bytes | None:
    """The source address of the record at `base`, or None."""
    l3, caplen = struct.unpack_from("<H2xH", batch, base + 16)
    nfproto = batch[base + 23]
    if l3 == NO_OFFSET:
        return None
    if nfproto == NFPROTO_IPV4:
        at, size = l3 + 12, 4  # RFC 791
    elif nfproto == NFPROTO_IPV6:
        at, size = l3 + 8, 16  # RFC 8200
    else:
        return None
    if at + size > caplen or HEADER + at + size > stride:
        return None  # truncated
    start = base + HEADER + at
    return batch[start : start + size]


def address_text(addr: bytes) -> str:
    if len(addr) == 4:
        return ".".join(str(b) for b in addr)
    groups = list(struct.unpack(">8H", addr))
    # The longest run of zero groups (two or more), the first on a tie.
    best, best_len, i = -1, 0, 0
    while i < 8:
        if groups[i]:
            i += 1
            continue
        j = i
        while j < 8 and groups[j] == 0:
            j += 1
        if j - i > best_len:
            best, best_len = i, j - i
        i = j

    def hexes(gs: list[int]) -> str:
        return ":".join(f"{g:x}" for g in gs)

    if best_len < 2:
        return hexes(groups)
    return hexes(groups[:best]) + "::" + hexes(groups[best + best_len :])


def sorted_sources() -> list[bytes]:
    return sorted(COUNTS, key=lambda a: (len(a), a))


class Plugin(exports.Plugin):
    def describe(self) -> types.Info:
        return types.Info(
            name="srccount",
            version="0.1.0",
            kinds=[types.Kind.MATCH_EXPR],
            window=WINDOW,
            state_transfer=True,
        )

    def configure(self, site: int, kind: types.Kind, args: list[str]) -> None:
        if kind != types.Kind.MATCH_EXPR:
            raise Err("srccount is a match")
        if len(args) != 1:
            raise Err("usage: srccount N (N in 0..=4294967295)")
        arg = args[0]
        ok = arg.isascii() and arg.isdigit() and len(arg) <= 10 and int(arg) <= MAX_N
        if not ok:
            raise Err(f'srccount: "{arg}" is not a number in 0..=4294967295')
        LIMITS[site] = int(arg)

    def release(self, site: int) -> None:
        LIMITS.pop(site, None)

    def matches(self, site: int, batch: bytes, count: int, stride: int) -> bytes:
        out = bytearray(count)
        limit = LIMITS.get(site)
        if limit is None or stride < HEADER:
            return bytes(out)
        for i in range(min(count, len(batch) // stride)):
            addr = source(batch, i * stride, stride)
            if addr is None:
                continue
            c = COUNTS.get(addr)
            if c is not None:
                c += 1
                COUNTS[addr] = c
            elif len(COUNTS) < MAX_SOURCES:
                c = COUNTS[addr] = 1
            else:
                c = 1
            out[i] = c > limit
        return bytes(out)

    def apply(self, site: int, batch: bytes, count: int, stride: int) -> types.StatementResult:
        return types.StatementResult(verdicts=[], edits=[])

    def on_timer(self, key: int) -> None:
        pass

    def list_state(self, site: int) -> list[types.StateEntry]:
        return [
            types.StateEntry(elem=0, values=[("packets", COUNTS[a])], text=address_text(a))
            for a in sorted_sources()
        ]

    def reset_state(self, site: int, elem: int) -> None:
        if elem == 0:
            COUNTS.clear()

    def export_state(self) -> bytes:
        addrs = sorted_sources()
        out = bytearray(MAGIC + struct.pack("<I", len(addrs)))
        for a in addrs:
            out += bytes([len(a)]) + a + struct.pack("<Q", COUNTS[a])
        return bytes(out)

    def import_state(self, blob: bytes) -> None:
        if len(blob) < 8 or blob[:4] != MAGIC:
            raise Err("srccount: not a WSC1 state blob")
        (entries,) = struct.unpack_from("<I", blob, 4)
        if entries > MAX_SOURCES:
            raise Err(f"srccount: {entries} sources, more than {MAX_SOURCES}")
        table: dict[bytes, int] = {}
        at = 8
        for _ in range(entries):
            if at >= len(blob):
                raise Err("srccount: state blob truncated")
            size = blob[at]
            at += 1
            if size not in (4, 16):
                raise Err(f"srccount: address length {size}")
            if at + size + 8 > len(blob):
                raise Err("srccount: state blob truncated")
            addr = bytes(blob[at : at + size])
            (c,) = struct.unpack_from("<Q", blob, at + size)
            at += size + 8
            if c > MAX_COUNT:
                raise Err(f"srccount: count {c} too large")
            if addr in table:
                raise Err(f"srccount: {address_text(addr)} twice")
            table[addr] = c
        if at != len(blob):
            raise Err("srccount: state blob has trailing bytes")
        COUNTS.clear()
        COUNTS.update(table)
