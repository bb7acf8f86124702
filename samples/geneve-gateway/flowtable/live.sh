#!/usr/bin/env bash
# samples/geneve-gateway/flowtable, live: an SSH-like TCP session from the overlay host
# 10.20.0.2 through a Geneve tunnel (VNI 11) to wasp, which ends the tunnel on its tunnel
# device gnv0 and routes to the server 10.30.0.2 on the LAN; the connection is offloaded with
# its encapsulation cached. Needs root (network namespaces, veth pairs, a TAP device,
# AF_PACKET).
#
#   peer ns                                 wasp ns                         server ns
#   gnv0 (TAP) + vtep.py <-> p0 <-veth-> trunk0 [wasp run] lan0 <-veth-> s0 (sink.py)
#   10.20.0.2            192.0.2.2       192.0.2.1      10.30.0.1          10.30.0.2
#
# The peer's tunnel end is a small VTEP in Python, vtep.py (this kernel may have no geneve
# driver): it puts the TAP's frames into Geneve VNI 11 to 192.0.2.1 and takes back only Geneve version 0,
# VNI 11, Ethernet inside, from 192.0.2.1 (anything else is counted as bad). The client sends
# 100 writes of 200 bytes; the server counts what arrived. The script prints the flow listing
# (`wasp ctl list flowtable ft`) while the session is open, the monitor's flow events, the
# connection in `wasp ctl list conntrack` after the close, and a verdict line per check; it
# exits non-zero when a check fails, and removes everything it created on any exit.
#
# WASP=path/to/wasp picks the binary (default: target/release/wasp, or under $CARGO_TARGET_DIR;
# built when missing).

here=$(cd "$(dirname "$0")" && pwd)
tag="wgf$$"
P="${tag}p" W="${tag}w" S="${tag}s"
namespaces=("$P" "$W" "$S")
# WASP, the root check, $tmp, $sock, $wasp_pid, pids, the cleanup on exit, the namespaces.
# shellcheck source=../../live-common.sh
. "$here/../../live-common.sh" geneve-flowtable

# --- topology ---------------------------------------------------------------------------
ip -n "$P" link add p0 type veth peer name trunk0 netns "$W"
ip -n "$S" link add s0 type veth peer name lan0 netns "$W"
ip -n "$P" link set p0 address 02:00:00:00:0a:02 up
ip -n "$P" addr add 192.0.2.2/24 dev p0
ip -n "$S" link set s0 address 02:00:00:00:0b:02 up
ip -n "$S" addr add 10.30.0.2/24 dev s0
ip -n "$S" route add default via 10.30.0.1
ip -n "$W" link set trunk0 address 02:00:00:00:00:0a up
ip -n "$W" link set lan0 address 02:00:00:00:00:0b up
# Segmentation offload off on the senders (wasp does not split super-frames).
for d in "$P p0" "$S s0"; do
	set -- $d
	ip netns exec "$1" ethtool -K "$2" tso off gso off >/dev/null 2>&1 || true
done

# --- the peer's VTEP and the server ----------------------------------------------------------
ip netns exec "$P" python3 "$here/vtep.py" "$tmp/bad" >"$tmp/vtep.out" &
pids+=($!)
for _ in $(seq 50); do grep -q up "$tmp/vtep.out" 2>/dev/null && break; sleep 0.1; done
ip -n "$P" link set gnv0 address 02:00:00:00:0c:02 mtu 1450 up
ip -n "$P" addr add 10.20.0.2/24 dev gnv0
ip -n "$P" route add 10.30.0.0/24 via 10.20.0.1

cat >"$tmp/sink.py" <<'EOF'
import socket, threading
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("10.30.0.2", 22))
s.listen(4)
def serve(c, a):
    c.send(("hello %s:%d\n" % a).encode())
    n = 0
    while True:
        d = c.recv(65536)
        if not d:
            break
        n += len(d)
    c.send(str(n).encode())
    c.close()
while True:
    c, a = s.accept()
    threading.Thread(target=serve, args=(c, a), daemon=True).start()
EOF
ip netns exec "$S" python3 "$tmp/sink.py" &
pids+=($!)

# --- wasp -------------------------------------------------------------------------------------
ip netns exec "$W" "$WASP" run "$here/flowtable.nft" --gateway "$here/gateway.conf" \
	--socket "$sock" --workers 2 >"$tmp/wasp.out" 2>&1 &
wasp_pid=$!
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
[ -S "$sock" ] || { cat "$tmp/wasp.out"; echo "wasp did not start" >&2; exit 1; }
ctl() { ip netns exec "$W" "$WASP" ctl --socket "$sock" "$@"; }
ctl monitor >"$tmp/monitor" 2>&1 &
pids+=($!)
sleep 0.3

# --- the session -------------------------------------------------------------------------------
cat >"$tmp/client.py" <<'EOF'
import socket, sys, time
s = socket.socket()
s.settimeout(5)
s.connect(("10.30.0.2", 22))
print(s.recv(100).decode().strip(), flush=True)
for i in range(100):
    s.send(b"g" * 200)
    time.sleep(0.01)
print("sent", flush=True)
time.sleep(float(sys.argv[1]))
s.shutdown(socket.SHUT_WR)
print("server counted", s.recv(100).decode(), flush=True)
s.close()
EOF
ip netns exec "$P" python3 "$tmp/client.py" 2 >"$tmp/client" &
client=$!
for _ in $(seq 100); do grep -q sent "$tmp/client" 2>/dev/null && break; sleep 0.1; done
sleep 0.3
echo "== wasp ctl list flowtable ft (session open)"
ctl list flowtable ft | tee "$tmp/flows"
wait "$client"
sleep 0.5
echo "== client"
cat "$tmp/client"
echo "== wasp ctl monitor"
grep "^flow" "$tmp/monitor" || true
echo "== wasp ctl list conntrack (after the close)"
ctl list conntrack | grep "dport=22" || true
ctl list flowtable ft >"$tmp/flows-after"

# --- checks ---------------------------------------------------------------------------------
fail=0
check() { # check WHAT CONDITION...
	local what=$1; shift
	if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fail=1; fi
}
check "the server sees the overlay address (no NAT)" grep -q "^hello 10.20.0.2:" "$tmp/client"
check "every byte arrived once (20000)" grep -q "^server counted 20000$" "$tmp/client"
check "one flow while the session is open" grep -q "^flowtable ft (1 flows)" "$tmp/flows"
check "the flow came in through the tunnel (vni 11)" grep -q "> 10.30.0.2:22 vni 11 reply 10.30.0.2:22 > 10.20.0.2:" "$tmp/flows"
pkts=$(sed -n 's/.* packets \([0-9]*\)\/\([0-9]*\) .*/\1 \2/p' "$tmp/flows")
check "both directions through the fast path ($pkts packets)" test "${pkts%% *}" -ge 50 -a "${pkts##* }" -ge 1
check "flow add then flow del (fin) on the monitor" bash -c "grep -q '^flow add ft tcp 10.20.0.2' '$tmp/monitor' && grep -q '^flow del (fin) ft tcp 10.20.0.2' '$tmp/monitor'"
check "no flow after the close" grep -q "^flowtable ft (0 flows)" "$tmp/flows-after"
check "the peer VTEP decapsulated every frame wasp sent" test ! -e "$tmp/bad"
exit $fail
