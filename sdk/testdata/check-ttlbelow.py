#!/usr/bin/env python3
"""Check a ttlbelow component (any of the guides' languages) outside wasp, with WASI: loads it
with wasmtime-py (PyPI `wasmtime` 50.0.1, which has the component API and WASI 0.2), a fake
`wasp:plugin/host`, and checks describe, configure's refusals and the matches on ttl.pcap,
packed as wit/plugin.wit lays the batch out.

Usage: check-ttlbelow.py COMPONENT.wasm
Prints `N passed, N failed` and exits 1 on a failure. Used for the Python guide, whose
component needs WASI, which the wasp host does not offer yet (sdk/python/README.md).
"""
import os
import struct
import sys

import wasmtime
import wasmtime.component as wc

HERE = os.path.dirname(os.path.abspath(__file__))
results = {"passed": 0, "failed": 0}


def check(what, got, want):
    if got == want:
        results["passed"] += 1
    else:
        results["failed"] += 1
        print(f"FAIL {what}: got {got!r}, want {want!r}")


def frames(path):
    """The frames of a little-endian microsecond pcap."""
    data = open(path, "rb").read()[24:]
    out = []
    while data:
        caplen = struct.unpack_from("<I", data, 8)[0]
        out.append(data[16:16 + caplen])
        data = data[16 + caplen:]
    return out


def batch(fs, window):
    """The flat buffer of wit/plugin.wit for untagged Ethernet frames; returns (buf, stride)."""
    stride = (32 + window + 7) // 8 * 8
    buf = b""
    for f in fs:
        nfproto = {0x0800: 2, 0x86DD: 10}.get(struct.unpack(">H", f[12:14])[0], 0)
        l3 = 14 if nfproto else 0xFFFF
        caplen = min(len(f), window)
        hdr = struct.pack("<IIIIHHHBBII", len(f), 0, 0, 0, l3, 0xFFFF, caplen,
                          17 if nfproto else 0, nfproto, 1, 0)
        buf += hdr + f[:caplen] + bytes(stride - 32 - caplen)
    return buf, stride


def main():
    engine = wasmtime.Engine()
    store = wasmtime.Store(engine)
    store.set_wasi(wasmtime.WasiConfig())  # nothing: no files, no environment, no network
    comp = wc.Component.from_file(engine, sys.argv[1])
    linker = wc.Linker(engine)
    linker.add_wasip2()
    with linker.root() as root:
        with root.add_instance("wasp:plugin/host@0.1.3") as i:
            i.add_func("monotonic-ns", lambda s: 0)
            i.add_func("boottime-ns", lambda s: 0)
            i.add_func("timer-arm", lambda s, k, c, d: None)
            i.add_func("timer-cancel", lambda s, k: None)
            i.add_func("emit", lambda s, e: None)
            i.add_func("log", lambda s, lvl, m: None)
            i.add_func("set-contains", lambda s, n, k: False)
    inst = linker.instantiate(store, comp)
    iface = inst.get_export_index(store, "wasp:plugin/plugin@0.1.3")

    def call(name, *args):
        fn = inst.get_func(store, inst.get_export_index(store, name, iface))
        r = fn(store, *args)
        fn.post_return(store)
        return r

    info = call("describe")
    check("name", info.name, "ttlbelow")
    check("kinds", list(info.kinds), ["match-expr"])
    window = info.window
    check("configure 64", call("configure", 1, "match-expr", ["64"]), None)
    check("configure 2", call("configure", 2, "match-expr", ["2"]), None)
    for bad, msg in [("0", 'ttlbelow: "0" is not a number in 1..=255'),
                     ("256", 'ttlbelow: "256" is not a number in 1..=255'),
                     ("ten", 'ttlbelow: "ten" is not a number in 1..=255')]:
        check(f"configure {bad}", call("configure", 3, "match-expr", [bad]), msg)
    check("configure 1 2", call("configure", 3, "match-expr", ["1", "2"]),
          "usage: ttlbelow N (N in 1..=255)")
    buf, stride = batch(frames(os.path.join(HERE, "ttl.pcap")), window)
    # ttl.pcap: TTL 1, 63, 64, 200; hop limit 10, 255; ARP.
    check("matches below 64", list(call("matches", 1, buf, 7, stride)), [1, 1, 0, 0, 1, 0, 0])
    check("matches below 2", list(call("matches", 2, buf, 7, stride)), [1, 0, 0, 0, 0, 0, 0])
    check("unconfigured site", list(call("matches", 9, buf, 7, stride)), [0] * 7)
    call("release", 1)
    check("released site", list(call("matches", 1, buf, 7, stride)), [0] * 7)
    print(f"{results['passed']} passed, {results['failed']} failed")
    sys.exit(1 if results["failed"] else 0)


if __name__ == "__main__":
    main()
