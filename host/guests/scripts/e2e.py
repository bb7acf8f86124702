#!/usr/bin/env python3
"""End-to-end smoke test of the bundled plugins through the component ABI, without the Rust
host: wasmtime-py (PyPI `wasmtime`, 50 or later, which has the component API) instantiates
each component with a fake `wasp:plugin/host`, packs batches as wit/plugin.wit lays them out,
and checks results, errors, listings, events and state transfer.

Usage: e2e.py PLUGIN_DIR [PCAP_DIR]
  PLUGIN_DIR: wasp_guests::plugin_dir() (e.g. target/wasm-guests/out/plugins)
  PCAP_DIR:   ../shared/pcaps (default: beside the repository)
Prints `N passed, N failed` and exits 1 on a failure.
"""
import os
import struct
import sys

import wasmtime
import wasmtime.component as wc

PLUGINS = sys.argv[1]
PCAPS = sys.argv[2] if len(sys.argv) > 2 else os.path.join(
    os.path.dirname(__file__), "../../../../shared/pcaps")
results = {"passed": 0, "failed": 0}


def check(what, got, want):
    if got == want:
        results["passed"] += 1
    else:
        results["failed"] += 1
        print(f"FAIL {what}: got {got!r}, want {want!r}")


class Host:
    """The fake host: clocks, timers, events."""

    def __init__(self):
        self.t = 0
        self.boot = 0
        self.timers = {}
        self.events = []


class Plugin:
    def __init__(self, name, host):
        self.engine = wasmtime.Engine()
        self.store = wasmtime.Store(self.engine)
        comp = wc.Component.from_file(self.engine, os.path.join(PLUGINS, name + ".wasm"))
        linker = wc.Linker(self.engine)
        h = host
        with linker.root() as root:
            with root.add_instance("wasp:plugin/host@0.1.3") as i:
                i.add_func("monotonic-ns", lambda s: h.t)
                i.add_func("boottime-ns", lambda s: h.boot)
                i.add_func("timer-arm", lambda s, k, c, d: h.timers.__setitem__(k, (c, d)))
                i.add_func("timer-cancel", lambda s, k: (h.timers.pop(k, None), None)[1])
                i.add_func("emit", lambda s, e: h.events.append(e))
                i.add_func("log", lambda s, l, m: None)
                i.add_func("set-contains", lambda s, n, k: False)
        self.inst = linker.instantiate(self.store, comp)
        self.iface = self.inst.get_export_index(self.store, "wasp:plugin/plugin@0.1.3")
        self.info = self.call("describe")

    def call(self, name, *args):
        idx = self.inst.get_export_index(self.store, name, self.iface)
        fn = self.inst.get_func(self.store, idx)
        r = fn(self.store, *args)
        fn.post_return(self.store)
        return r


def stride(window):
    return (32 + window + 7) // 8 * 8


def pack(pkts, window):
    """pkts: dicts with frame, l3, l4, l4proto, nfproto, elem. The WIT packet buffer."""
    s = stride(window)
    buf = bytearray()
    for p in pkts:
        f = p["frame"]
        cap = min(len(f), window)
        rec = bytearray(s)
        struct.pack_into("<IIIIHHHBBII", rec, 0, len(f), 0, 0, p.get("elem", 0),
                         p.get("l3", 0xffff), p.get("l4", 0xffff), cap,
                         p.get("l4proto", 0), p.get("nfproto", 0), 1, 0)
        rec[32:32 + cap] = f[:cap]
        buf += rec
    return bytes(buf), len(pkts), s


def frames(name):
    b = open(os.path.join(PCAPS, name), "rb").read()
    out = []
    if b[:4] == b"\x0a\x0d\x0d\x0a":
        i = 0
        while i + 12 <= len(b):
            ty, ln = struct.unpack_from("<II", b, i)
            if ty == 6:
                cap = struct.unpack_from("<I", b, i + 20)[0]
                out.append(b[i + 28:i + 28 + cap])
            i += ln
    else:
        i = 24
        while i + 16 <= len(b):
            cap = struct.unpack_from("<I", b, i + 8)[0]
            out.append(b[i + 16:i + 16 + cap])
            i += 16 + cap
    return out


def packet(f):
    p = {"frame": bytearray(f)}
    off = 12
    ty = struct.unpack_from(">H", f, off)[0]
    while ty in (0x8100, 0x88a8):
        off += 4
        ty = struct.unpack_from(">H", f, off)[0]
    l3 = off + 2
    p["l3"] = l3
    if ty == 0x0800:
        p["nfproto"], p["l4proto"] = 2, f[l3 + 9]
        if struct.unpack_from(">H", f, l3 + 6)[0] & 0x1fff == 0:
            p["l4"] = l3 + (f[l3] & 0x0f) * 4
    elif ty == 0x86dd:
        p["nfproto"], p["l4proto"], p["l4"] = 10, f[l3 + 6], l3 + 40
    return p


def ipv4_ok(h):
    s = sum(struct.unpack(">%dH" % (len(h) // 2), h))
    while s > 0xffff:
        s = (s & 0xffff) + (s >> 16)
    return s == 0xffff


def counter():
    h = Host()
    p = Plugin("counter", h)
    check("counter describe", (p.info.kinds, p.info.window, getattr(p.info, "state-transfer")),
          (["stateful", "statement"], 0, True))
    check("counter configure", p.call("configure", 0, "stateful", []), None)
    check("counter bad arg", p.call("configure", 1, "stateful", ["frobs", "3"]),
          'counter: unknown argument "frobs" (expected name, packets or bytes)')
    buf, n, s = pack([{"frame": bytes(60)}, {"frame": bytes(100)}, {"frame": bytes(200), "elem": 4}], 0)
    r = p.call("apply", 0, buf, n, s)
    check("counter verdicts", (r.verdicts, r.edits), (["continue"] * 3, []))
    listing = [(e.elem, e.values) for e in p.call("list-state", 0)]
    want = [(0, [("packets", 2), ("bytes", 160)]), (4, [("packets", 1), ("bytes", 200)])]
    check("counter list", listing, want)
    blob = p.call("export-state")
    q = Plugin("counter", h)
    q.call("configure", 0, "stateful", [])
    check("counter import", q.call("import-state", blob), None)
    check("counter after swap", [(e.elem, e.values) for e in q.call("list-state", 0)], want)
    q.call("reset-state", 0, 4)
    check("counter reset elem", [e.elem for e in q.call("list-state", 0)], [0])


GENEVE_COUNTS = [
    ("tcpdump-geneve.pcap", "present", 19), ("tcpdump-geneve.pcap", "vni 11", 20),
    ("tcpdump-geneve.pcap", "opt class 0 type 0x80 critical data 0x0000000c", 19),
    ("tcpdump-geneve-gcp.pcap", "opt class 0x0132 type 2", 1),
    ("zeek-geneve-many-options.pcap", "opt class 0x0100 type 3", 10),
    ("zeek-geneve-tagged-udp-packet.pcap", "opt class 0xff72 type 0x7f", 4),
    ("zeek-geneve-truncated.pcapng", "opt class 0 type 0 data 0x0000000a", 1),
    ("zeek-geneve-ipv6.pcap", "vni 0x123456", 2),
    ("tcpdump-gso-ipv6-geneve-ipv6.pcap", "vni 0x1389", 1),
]


def geneve():
    h = Host()
    p = Plugin("geneve", h)
    w = p.info.window
    check("geneve describe", (p.info.kinds, w), (["match-expr", "statement"], 336))
    for site, (pcap, args, want) in enumerate(GENEVE_COUNTS):
        check(f"geneve configure {args}", p.call("configure", site, "match-expr", args.split()), None)
        pk = [packet(f) for f in frames(pcap)]
        out = p.call("matches", site, *pack(pk, w))
        check(f"geneve {pcap} {args}", sum(out), want)
    for args, want in [
        ("opt class 0x824212", "geneve: class 0x824212 is more than 0xffff"),
        ("opt type 0x4224", "geneve: type 0x4224 is more than 0xff"),
        ("opt data 0x4288", "geneve: data 0x4288 is 2 bytes, not a multiple of 4"),
        ("opt data 0x" + "00" * 128, "geneve: data 0x" + "00" * 128 + " is 128 bytes, more than 124"),
    ]:
        check(f"geneve error {args[:30]}", p.call("configure", 99, "match-expr", args.split()), want)
    site = 50
    check("geneve add configure", p.call("configure", site, "statement",
                                         "add opt class 0x0102 type 0x80 data 0x00880022".split()), None)
    pk = [packet(f) for f in frames("tcpdump-geneve.pcap")]
    r = p.call("apply", site, *pack(pk, w))
    check("geneve add verdicts", r.verdicts, ["continue"] * len(pk))
    for e in r.edits:
        f = pk[e.packet]["frame"]
        op = e.op
        tag, val = op.tag, op.payload
        if tag == "set":
            f[e.offset:e.offset + len(val)] = val
        elif tag == "insert":
            f[e.offset:e.offset] = val
        else:
            del f[e.offset:e.offset + val]
    ok = 0
    for a, b in zip(pk, frames("tcpdump-geneve.pcap")):
        f, l3, l4 = a["frame"], a["l3"], a["l4"]
        good = (len(f) == len(b) + 8 and ipv4_ok(bytes(f[l3:l3 + 20]))
                and struct.unpack_from(">H", f, l3 + 2)[0] == len(f) - l3
                and struct.unpack_from(">H", f, l4 + 4)[0] == len(f) - l4
                and f[l4 + 8] & 0x3f == (b[l4 + 8] & 0x3f) + 2)
        ok += good
    check("geneve add rewrites every packet", ok, len(pk))
    # VLAN-range to VNI-range encapsulation (C30) and decapsulation back.
    check("geneve encap configure", p.call("configure", 60, "statement",
          "encap vlan 1-10 vni 5000-5009 src 192.0.2.1 dst 192.0.2.2".split()), None)
    check("geneve C30 sizes", p.call("configure", 61, "statement",
          "encap vlan 100-199 vni 5000-5050 src 192.0.2.1 dst 192.0.2.2".split()),
          "geneve: vlan 100-199 and vni 5000-5050 are ranges of different sizes")
    check("geneve decap configure", p.call("configure", 62, "statement", ["decap"]), None)
    orig = frames("sv-eve-flow-vlan-02.pcap")
    pk = [packet(f) for f in orig]
    apply_all(pk, p.call("apply", 60, *pack(pk, w)).edits)
    vnis = [int.from_bytes(bytes(a["frame"][46:49]), "big") for a in pk]
    check("geneve encap vnis", vnis, [5005, 5000, 5000])
    pk = [packet(bytes(a["frame"])) for a in pk]
    apply_all(pk, p.call("apply", 62, *pack(pk, w)).edits)
    check("geneve decap gives the untagged frames", [bytes(a["frame"]) for a in pk],
          [f[:12] + f[16:] for f in orig])


def apply_all(pk, edits):
    for e in edits:
        f = pk[e.packet]["frame"]
        tag, val = e.op.tag, e.op.payload
        if tag == "set":
            f[e.offset:e.offset + len(val)] = val
        elif tag == "insert":
            f[e.offset:e.offset] = val
        else:
            del f[e.offset:e.offset + val]


def idletimer():
    h = Host()
    p = Plugin("idletimer", h)
    check("idletimer configure", p.call("configure", 0, "statement",
                                        ["label", '"wlan0"', "timeout", "10s"]), None)
    check("idletimer armed", list(h.timers.values()), [("monotonic", 10 * 10**9)])
    check("idletimer C24", p.call("configure", 1, "statement", "label wlan0 timeout 10 hard".split()),
          'idletimer: label "wlan0" is a plain timer: same label and different timer type')
    check("idletimer C25", p.call("configure", 1, "statement", "label power timeout 10".split()),
          'idletimer: label "power" is reserved')
    h.t = 4 * 10**9
    p.call("apply", 0, *pack([{"frame": bytes(60)}], 0))
    check("idletimer restarted", list(h.timers.values()), [("monotonic", 14 * 10**9)])
    check("idletimer list", [e.text for e in p.call("list-state", 0)], ['label "wlan0" remaining 10000 ms'])
    blob = p.call("export-state")

    def advance(plugin, t):
        h.t = t
        for k, (_, d) in sorted(h.timers.items(), key=lambda kv: kv[1][1]):
            if d <= t:
                del h.timers[k]
                plugin.call("on-timer", k)
        ev, h.events[:] = list(h.events), []
        return ev

    check("idletimer not yet", advance(p, 13 * 10**9), [])
    check("idletimer expired", advance(p, 14 * 10**9), ["idletimer wlan0 expired"])
    # A new version takes the deadline over.
    h.t = 5 * 10**9
    q = Plugin("idletimer", h)
    q.call("configure", 0, "statement", "label wlan0 timeout 10s".split())
    check("idletimer import", q.call("import-state", blob), None)
    check("idletimer deadline kept", [e.text for e in q.call("list-state", 0)],
          ['label "wlan0" remaining 9000 ms'])
    check("idletimer expired after swap", advance(q, 14 * 10**9), ["idletimer wlan0 expired"])


for t in (counter, geneve, idletimer):
    try:
        t()
    except Exception as e:  # a trap or an API error fails the plugin's test
        results["failed"] += 1
        print(f"FAIL {t.__name__}: {type(e).__name__}: {e}")
print(f"{results['passed']} passed, {results['failed']} failed")
sys.exit(1 if results["failed"] else 0)
