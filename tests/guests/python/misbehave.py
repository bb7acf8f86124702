"""misbehave MODE: a Python plugin that fails on purpose in `matches`, for the tests of how wasp
contains a guest (host/wasp/tests/sdk_python.rs). Built by sdk/python/build.sh.

Modes (the use site's only argument):
  ok     matches every packet (the control: the plugin works when it behaves)
  loop   never returns (the host's epoch deadline must interrupt it)
  throw  raises an uncaught exception (a trap in the component)
  bomb   allocates 1 MiB buffers without bound and keeps them (the memory limit)
  spam   writes to stdout in a loop without end (the log's rate limit, then the deadline)
Any other argument is refused by `configure`.
"""

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import types

MODES = ["ok", "loop", "throw", "bomb", "spam"]
SITES: dict[int, str] = {}
# What `bomb` allocates stays reachable, so it is never freed.
HOARD: list[bytearray] = []


class Plugin(exports.Plugin):
    def describe(self) -> types.Info:
        return types.Info(
            name="misbehave",
            version="0.1.0",
            kinds=[types.Kind.MATCH_EXPR],
            window=64,
            state_transfer=False,
        )

    def configure(self, site: int, kind: types.Kind, args: list[str]) -> None:
        if len(args) != 1 or args[0] not in MODES:
            raise Err("usage: misbehave " + "|".join(MODES))
        SITES[site] = args[0]

    def release(self, site: int) -> None:
        SITES.pop(site, None)

    def matches(self, site: int, batch: bytes, count: int, stride: int) -> bytes:
        mode = SITES.get(site)
        if mode == "loop":
            while True:
                pass
        if mode == "throw":
            raise RuntimeError("misbehave: raised on purpose")
        if mode == "bomb":
            while True:
                HOARD.append(bytearray(b"\x01" * (1 << 20)))
        if mode == "spam":
            i = 0
            while True:
                print(f"misbehave: spam line {i}")
                i += 1
        return b"\x01" * count

    def apply(self, site: int, batch: bytes, count: int, stride: int) -> types.StatementResult:
        return types.StatementResult(verdicts=[], edits=[])

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
