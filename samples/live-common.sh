# Sourced by the samples' live.sh scripts: what each needs before its own topology.
#
#   . "$here/../live-common.sh" NAME    (with `namespaces` set to the script's namespace names)
#
# Picks the wasp binary (WASP=path/to/wasp; default target/release/wasp, or under
# $CARGO_TARGET_DIR; built when missing), refuses to run without root (network namespaces, veth
# pairs, AF_PACKET), makes `$tmp` (a temporary folder for NAME) and `$sock` (the control
# socket's path in it), and removes everything on any exit: wasp (`$wasp_pid`, SIGTERM then
# SIGKILL), the processes in `pids`, the namespaces, `$tmp`. Then it adds the namespaces, each
# with IPv6 off (no router solicitations or DAD on the wire: the frames are the script's only)
# and its loopback up.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WASP=${WASP:-${CARGO_TARGET_DIR:-$root/target}/release/wasp}
if [ ! -x "$WASP" ]; then
	echo "building $WASP" >&2
	(cd "$root" && cargo build -q --release -p wasp)
fi
if [ "$(id -u)" != 0 ]; then
	echo "live.sh needs root (network namespaces, veth pairs, AF_PACKET)" >&2
	exit 2
fi

tmp=$(mktemp -d "/tmp/wasp-$1-live.XXXXXX")
sock="$tmp/wasp.sock"
wasp_pid=""
pids=()

cleanup() {
	local rc=$?
	set +e
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	if [ -n "$wasp_pid" ] && kill -0 "$wasp_pid" 2>/dev/null; then
		kill -TERM "$wasp_pid" 2>/dev/null
		for _ in $(seq 50); do kill -0 "$wasp_pid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$wasp_pid" 2>/dev/null
	fi
	wait 2>/dev/null
	for n in "${namespaces[@]}"; do ip netns del "$n" 2>/dev/null; done
	rm -rf "$tmp"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for n in "${namespaces[@]}"; do
	ip netns add "$n"
	ip netns exec "$n" sysctl -qw net.ipv6.conf.all.disable_ipv6=1
	ip -n "$n" link set lo up
done
