// ttlbelow N: a wasp match, true for IPv4 packets whose TTL is below N and IPv6 packets whose
// hop limit is below N (N in 1..=255). Built into a component by build.sh (componentize-js).
//
// The packet buffer layout is the one documented at the top of wit/plugin.wit: `count`
// records of `stride` bytes, each a 32-byte little-endian header followed by the first WINDOW
// bytes of the frame. WIT names become camelCase (`on-timer` -> onTimer), enums are strings
// ('match-expr'), list<u8> is a Uint8Array, u64 a BigInt, and an error result is a throw.

// Bytes of each frame the plugin needs: Ethernet (14), a VLAN tag the device did not pop (4)
// and the IP header's first 8 or 9 bytes fit in 64.
const WINDOW = 64;
const HEADER = 32;
const NO_OFFSET = 0xffff;
const NFPROTO_IPV4 = 2;
const NFPROTO_IPV6 = 10;

// The limit of each use site.
const limits = new Map();

// One packet record (header + window) of `view` at `base`: does its TTL / hop limit fall
// below `limit`?
function ttlBelow(view, base, stride, limit) {
  const l3 = view.getUint16(base + 16, true);
  const caplen = view.getUint16(base + 20, true);
  const nfproto = view.getUint8(base + 23);
  if (l3 === NO_OFFSET) return false;
  let at;
  if (nfproto === NFPROTO_IPV4) at = l3 + 8; // IPv4 TTL (RFC 791)
  else if (nfproto === NFPROTO_IPV6) at = l3 + 7; // IPv6 hop limit (RFC 8200)
  else return false;
  if (at >= caplen || HEADER + at >= stride) return false; // truncated: not there
  return view.getUint8(base + HEADER + at) < limit;
}

export const plugin = {
  describe() {
    return {
      name: 'ttlbelow',
      version: '0.1.0',
      kinds: ['match-expr'],
      window: WINDOW,
      stateTransfer: false,
    };
  },

  configure(site, kind, args) {
    if (kind !== 'match-expr') throw 'ttlbelow is a match';
    if (args.length !== 1) throw 'usage: ttlbelow N (N in 1..=255)';
    const arg = args[0];
    const n = /^[0-9]{1,3}$/.test(arg) ? Number(arg) : 0;
    if (n < 1 || n > 255) throw `ttlbelow: "${arg}" is not a number in 1..=255`;
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
      out[i] = ttlBelow(view, i * stride, stride, limit) ? 1 : 0;
    }
    return out;
  },

  // The other exports of the world, with what a plain match does.
  apply(site, batch, count, stride) {
    return { verdicts: new Array(count).fill('continue'), edits: [] };
  },
  onTimer(key) {},
  listState(site) {
    return [];
  },
  resetState(site, elem) {},
  exportState() {
    return new Uint8Array(0);
  },
  importState(blob) {
    throw 'no state transfer';
  },
};
