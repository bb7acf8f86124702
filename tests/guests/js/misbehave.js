// misbehave MODE: a JavaScript plugin that fails on purpose in `matches`, for the tests of
// how wasp contains a guest (host/wasp/tests/sdk_js.rs). Built by sdk/js/build.sh.
//
// Modes (the use site's only argument):
//   ok     matches every packet (the control: the plugin works when it behaves)
//   loop   never returns (the host's epoch deadline must interrupt it)
//   throw  throws an uncaught exception (a trap in the component)
//   bomb   allocates 1 MiB buffers without bound and keeps them (the memory limit)
//   spam   writes to stdout in a loop without end (the log's rate limit, then the deadline)
// Any other argument is refused by `configure`.

const MODES = ['ok', 'loop', 'throw', 'bomb', 'spam'];
const modes = new Map();
// What `bomb` allocates stays reachable, so the garbage collector cannot take it back.
const hoard = [];

export const plugin = {
  describe() {
    return {
      name: 'misbehave',
      version: '0.1.0',
      kinds: ['match-expr'],
      window: 64,
      stateTransfer: false,
    };
  },
  configure(site, kind, args) {
    if (args.length !== 1 || !MODES.includes(args[0])) {
      throw `usage: misbehave ${MODES.join('|')}`;
    }
    modes.set(site, args[0]);
  },
  release(site) {
    modes.delete(site);
  },
  matches(site, batch, count, stride) {
    switch (modes.get(site)) {
      case 'loop':
        for (;;) {}
      case 'throw':
        throw new Error('misbehave: thrown on purpose');
      case 'bomb':
        for (;;) hoard.push(new Uint8Array(1 << 20).fill(1));
      case 'spam':
        for (let i = 0; ; i++) console.log(`misbehave: spam line ${i}`);
      default:
        return new Uint8Array(count).fill(1);
    }
  },
  apply(site, batch, count, stride) {
    return { verdicts: [], edits: [] };
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
