#!/usr/bin/env python3
"""Print the top-level import names of WebAssembly components (no wasm-tools needed).

Usage: component-imports.py FILE.wasm...   Exit status 1 when any import is a WASI interface
(`wasi:`), so `component-imports.py plugins/*.wasm` checks that the plugins are lean.
Binary format: the component model's Binary.md (import section id 10).
"""
import sys


def leb(b, i):
    result = shift = 0
    while True:
        byte = b[i]
        i += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return result, i


def name(b, i):
    n, i = leb(b, i)
    return b[i:i + n].decode(), i + n


def imports(b):
    if b[:4] != b"\0asm" or b[6:8] != b"\x01\x00":
        raise ValueError("not a component")
    i, out = 8, []
    while i < len(b):
        sid = b[i]
        size, i = leb(b, i + 1)
        end = i + size
        if sid == 10:
            count, j = leb(b, i)
            for _ in range(count):
                kind = b[j]
                n, j = name(b, j + 1)
                if kind == 0x01:  # with a version suffix
                    _, j = name(b, j)
                out.append(n)
                sort = b[j]
                j += 1
                if sort == 0x00:  # core module: 0x11 typeidx
                    _, j = leb(b, j + 1)
                elif sort in (0x01, 0x04, 0x05):
                    _, j = leb(b, j)
                elif sort == 0x02:  # value: primitive byte or type index
                    _, j = leb(b, j)
                elif sort == 0x03:  # type bound: eq typeidx | sub resource
                    j += 1
                    if b[j - 1] == 0x00:
                        _, j = leb(b, j)
        i = end
    return out


bad = False
for path in sys.argv[1:]:
    names = imports(open(path, "rb").read())
    wasi = [n for n in names if n.startswith("wasi:")]
    bad |= bool(wasi)
    print(f"{path}: {', '.join(names) or '(no imports)'}")
sys.exit(1 if bad else 0)
