"""ttlbelow N: a wasp match, true for IPv4 packets whose TTL is below N and IPv6 packets whose
hop limit is below N (N in 1..=255). Built into a component by build.sh (componentize-py).

The packet buffer layout is the one documented at the top of wit/plugin.wit: `count` records
of `stride` bytes, each a 32-byte little-endian header followed by the first WINDOW bytes of
the frame.
"""

import struct

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import types

# Bytes of each frame the plugin needs: Ethernet (14), a VLAN tag the device did not pop (4)
# and the IP header's first 8 or 9 bytes fit in 64.
WINDOW = 64
HEADER = 32
NO_OFFSET = 0xFFFF
NFPROTO_IPV4 = 2
NFPROTO_IPV6 = 10

# The limit of each use site. Module state, not an attribute of Plugin: componentize-py makes
# a new Plugin object for each call, so state kept on `self` would be lost between calls.
LIMITS: dict[int, int] = {}


def ttl_below(rec: bytes, limit: int) -> bool:
    """One packet record (header + window): does its TTL / hop limit fall below `limit`?"""
    # l3: u16 at 16, caplen: u16 at 20, nfproto: u8 at 23 (little-endian).
    l3, caplen = struct.unpack_from("<H2xH", rec, 16)
    nfproto = rec[23]
    if l3 == NO_OFFSET:
        return False
    if nfproto == NFPROTO_IPV4:
        at = l3 + 8  # IPv4 TTL (RFC 791)
    elif nfproto == NFPROTO_IPV6:
        at = l3 + 7  # IPv6 hop limit (RFC 8200)
    else:
        return False
    if at >= caplen or HEADER + at >= len(rec):
        return False  # truncated: the field is not there
    return rec[HEADER + at] < limit


class Plugin(exports.Plugin):
    def describe(self) -> types.Info:
        return types.Info(
            name="ttlbelow",
            version="0.1.0",
            kinds=[types.Kind.MATCH_EXPR],
            window=WINDOW,
            state_transfer=False,
        )

    def configure(self, site: int, kind: types.Kind, args: list[str]) -> None:
        if kind != types.Kind.MATCH_EXPR:
            raise Err("ttlbelow is a match")
        if len(args) != 1:
            raise Err("usage: ttlbelow N (N in 1..=255)")
        arg = args[0]
        if not (arg.isascii() and arg.isdigit()) or not 1 <= int(arg) <= 255:
            raise Err(f'ttlbelow: "{arg}" is not a number in 1..=255')
        LIMITS[site] = int(arg)

    def release(self, site: int) -> None:
        LIMITS.pop(site, None)

    def matches(self, site: int, batch: bytes, count: int, stride: int) -> bytes:
        limit = LIMITS.get(site)
        out = bytearray(count)
        if limit is None or stride < HEADER:
            return bytes(out)
        for i in range(min(count, len(batch) // stride)):
            rec = batch[i * stride : (i + 1) * stride]
            out[i] = 1 if ttl_below(rec, limit) else 0
        return bytes(out)

    # The other exports of the world, with what a plain match does.
    def apply(self, site: int, batch: bytes, count: int, stride: int) -> types.StatementResult:
        return types.StatementResult(verdicts=[types.Verdict.CONTINUE] * count, edits=[])

    def on_timer(self, key: int) -> None:
        pass

    def list_state(self, site: int) -> list[types.StateEntry]:
        return []

    def reset_state(self, site: int, elem: int) -> None:
        pass

    def export_state(self) -> bytes:
        return b""

    def import_state(self, blob: bytes) -> None:
        raise Err("no state transfer")
