// srccount N: a stateful wasp match that counts packets per source address and is true when
// the packet's source has sent more than N packets, this one included (N in 0..=4294967295).
// Built into a component by build.sh (componentize-js). The same plugin is written in Python
// (../python/srccount.py), with the same listing and the same state blob, so a hot swap can
// hand the counts from one language's build to the other's.
//
// The counts belong to the plugin instance: one table for all its use sites (as a named
// counter is shared by the rules that name it); each use site counts the packets it sees and
// compares with its own N. Only IPv4 and IPv6 packets are counted (the source bytes of the L3
// header); others never match. At most MAX_SOURCES sources are kept: a packet of a new source
// when the table is full is not counted and its count is taken as 1.
//
// list-state: one entry per source, sorted by address (IPv4 before IPv6, then bytewise): elem
// 0, values [["packets", count]], text the address (IPv4 dotted quad; IPv6 as RFC 5952 prints
// it: lowercase, no leading zeros, the longest run of two or more zero groups as "::", the
// first such run on a tie).
// reset-state(site, 0): forget every count; another elem: nothing (no per-element state).
// State blob (export-state / import-state), all integers little-endian:
//   "WSC1" | u32 entry count | per entry: u8 address length (4 or 16), the address bytes,
//   u64 count
// with the entries in the listing's order. import-state replaces the table with the blob's;
// a malformed blob (bad magic, length, duplicate address, trailing bytes, a count above
// 2^53-1, which a JavaScript number cannot hold, or more than MAX_SOURCES entries) is refused
// and changes nothing.

const WINDOW = 64; // Ethernet, a VLAN tag, and the IPv6 source address end before 64 bytes
const HEADER = 32;
const NO_OFFSET = 0xffff;
const NFPROTO_IPV4 = 2;
const NFPROTO_IPV6 = 10;
const MAX_SOURCES = 65536;
const MAX_N = 4294967295;
const MAGIC = 'WSC1';

// N of each use site.
const limits = new Map();
// Count per source; the key is the address as a string of one char per byte (cheap to make
// per packet, and its order is the bytes' order).
let counts = new Map();

// The source address of the record at `base` as a key, or null.
function sourceKey(bytes, view, base, stride) {
  const l3 = view.getUint16(base + 16, true);
  const caplen = view.getUint16(base + 20, true);
  const nfproto = view.getUint8(base + 23);
  if (l3 === NO_OFFSET) return null;
  let at, len;
  if (nfproto === NFPROTO_IPV4) [at, len] = [l3 + 12, 4]; // RFC 791
  else if (nfproto === NFPROTO_IPV6) [at, len] = [l3 + 8, 16]; // RFC 8200
  else return null;
  if (at + len > caplen || HEADER + at + len > stride) return null; // truncated
  const start = base + HEADER + at;
  return String.fromCharCode.apply(null, bytes.subarray(start, start + len));
}

function compareKeys(a, b) {
  if (a.length !== b.length) return a.length - b.length;
  return a < b ? -1 : a > b ? 1 : 0;
}

// The address text of a key.
function addressText(key) {
  const b = Array.from(key, (c) => c.charCodeAt(0));
  if (b.length === 4) return b.join('.');
  const groups = [];
  for (let i = 0; i < 16; i += 2) groups.push((b[i] << 8) | b[i + 1]);
  // The longest run of zero groups (two or more), the first on a tie.
  let best = -1, bestLen = 0;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) { i++; continue; }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLen) [best, bestLen] = [i, j - i];
    i = j;
  }
  const hex = (gs) => gs.map((g) => g.toString(16)).join(':');
  if (bestLen < 2) return hex(groups);
  return hex(groups.slice(0, best)) + '::' + hex(groups.slice(best + bestLen));
}

function sortedKeys() {
  return Array.from(counts.keys()).sort(compareKeys);
}

export const plugin = {
  describe() {
    return {
      name: 'srccount',
      version: '0.1.0',
      kinds: ['match-expr'],
      window: WINDOW,
      stateTransfer: true,
    };
  },

  configure(site, kind, args) {
    if (kind !== 'match-expr') throw 'srccount is a match';
    if (args.length !== 1) throw 'usage: srccount N (N in 0..=4294967295)';
    const arg = args[0];
    const n = /^[0-9]{1,10}$/.test(arg) ? Number(arg) : -1;
    if (n < 0 || n > MAX_N) throw `srccount: "${arg}" is not a number in 0..=4294967295`;
    limits.set(site, n);
  },

  release(site) {
    limits.delete(site);
  },

  matches(site, batch, count, stride) {
    const out = new Uint8Array(count);
    const limit = limits.get(site);
    if (limit === undefined || stride < HEADER) return out;
    const view = new DataView(batch.buffer, batch.byteOffset, batch.byteLength);
    const n = Math.min(count, Math.floor(batch.byteLength / stride));
    for (let i = 0; i < n; i++) {
      const key = sourceKey(batch, view, i * stride, stride);
      if (key === null) continue;
      let c = counts.get(key);
      if (c !== undefined) counts.set(key, ++c);
      else if (counts.size < MAX_SOURCES) counts.set(key, (c = 1));
      else c = 1;
      out[i] = c > limit ? 1 : 0;
    }
    return out;
  },

  apply(site, batch, count, stride) {
    return { verdicts: [], edits: [] };
  },
  onTimer(key) {},

  listState(site) {
    return sortedKeys().map((k) => ({
      elem: 0,
      values: [['packets', BigInt(counts.get(k))]],
      text: addressText(k),
    }));
  },

  resetState(site, elem) {
    if (elem === 0) counts.clear();
  },

  exportState() {
    const keys = sortedKeys();
    let size = 8;
    for (const k of keys) size += 1 + k.length + 8;
    const blob = new Uint8Array(size);
    const view = new DataView(blob.buffer);
    for (let i = 0; i < 4; i++) blob[i] = MAGIC.charCodeAt(i);
    view.setUint32(4, keys.length, true);
    let at = 8;
    for (const k of keys) {
      blob[at++] = k.length;
      for (let i = 0; i < k.length; i++) blob[at++] = k.charCodeAt(i);
      view.setBigUint64(at, BigInt(counts.get(k)), true);
      at += 8;
    }
    return blob;
  },

  importState(blob) {
    const view = new DataView(blob.buffer, blob.byteOffset, blob.byteLength);
    if (blob.length < 8 || String.fromCharCode(...blob.subarray(0, 4)) !== MAGIC) {
      throw 'srccount: not a WSC1 state blob';
    }
    const entries = view.getUint32(4, true);
    if (entries > MAX_SOURCES) throw `srccount: ${entries} sources, more than ${MAX_SOURCES}`;
    const next = new Map();
    let at = 8;
    for (let e = 0; e < entries; e++) {
      if (at >= blob.length) throw 'srccount: state blob truncated';
      const len = blob[at++];
      if (len !== 4 && len !== 16) throw `srccount: address length ${len}`;
      if (at + len + 8 > blob.length) throw 'srccount: state blob truncated';
      const key = String.fromCharCode.apply(null, blob.subarray(at, at + len));
      at += len;
      const c = view.getBigUint64(at, true);
      at += 8;
      if (c > BigInt(Number.MAX_SAFE_INTEGER)) throw `srccount: count ${c} too large`;
      if (next.has(key)) throw `srccount: ${addressText(key)} twice`;
      next.set(key, Number(c));
    }
    if (at !== blob.length) throw 'srccount: state blob has trailing bytes';
    counts = next;
  },
};
