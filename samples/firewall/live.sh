#!/usr/bin/env bash
# samples/firewall, live: the office firewall between a staff PC and the rest of the wire, with
# real traffic. Needs root (network namespaces, veth pairs, AF_PACKET).
#
#   client ns                 wasp ns                        server ns
#   c0 172.16.238.10/24 <-veth-> lan0 [wasp run] wan0 <-veth-> s0 172.16.238.131/24 (ssh/ftp/web server)
#                                                                 172.16.238.2/24   (DNS resolver)
#                                                                 198.51.100.80/32  (a web/NTP server "outside")
#                                                                 203.0.113.66/32   (blocklisted)
#
# wasp is a transparent bump in the wire: the sample's ruleset (firewall.nft) with its base chain
# on both ports (`devices = { "lan0", "wan0" }`: both directions meet the same rules, as in the
# replay, where the capture holds both directions), plus a table `wire` that sends what the
# firewall accepts on to the other port (`fwd to`). The script sends ping, TCP connects and UDP
# requests, says what passed and what was dropped, shows the rule counters (`wasp ctl list
# ruleset`) and the daemon's statistics (`wasp ctl stats`), and exits non-zero when a packet
# did not end as the README says. Everything it creates is removed on exit, also on failure.
#
# WASP=path/to/wasp picks the binary (default: target/release/wasp, or under $CARGO_TARGET_DIR;
# built when missing).

here=$(cd "$(dirname "$0")" && pwd)
tag="wfw$$"
C="${tag}c" W="${tag}w" S="${tag}s"
namespaces=("$C" "$W" "$S")
# WASP, the root check, $tmp, $sock, $wasp_pid, pids, the cleanup on exit, the namespaces.
# shellcheck source=../live-common.sh
. "$here/../live-common.sh" firewall

# --- topology ---------------------------------------------------------------------------
ip -n "$C" link add c0 type veth peer name lan0 netns "$W"
ip -n "$S" link add s0 type veth peer name wan0 netns "$W"
ip -n "$C" addr add 172.16.238.10/24 dev c0
for a in 172.16.238.131/24 172.16.238.2/24 198.51.100.80/32 203.0.113.66/32; do
	ip -n "$S" addr add "$a" dev s0
done
for d in "$C c0" "$W lan0" "$W wan0" "$S s0"; do
	set -- $d
	ip -n "$1" link set "$2" up
done
# "The internet" is on the same wire: both ends reach any address directly.
ip -n "$C" route add default dev c0
ip -n "$S" route add default dev s0
# The end hosts keep veth's checksum offload: their TCP/UDP reach wasp with partial checksums
# (TP_STATUS_CSUMNOTREADY), which wasp completes before the ruleset sees them; the receivers'
# kernels check them (csum_errors below).

# --- the live ruleset ------------------------------------------------------------------------
sed 's/device "lan0"/devices = { "lan0", "wan0" }/' "$here/firewall.nft" >"$tmp/firewall-live.nft"
cat >>"$tmp/firewall-live.nft" <<'EOF'

# Live only: what the office table accepts (priority filter = 0) goes on to the other port.
table netdev wire {
	chain lan {
		type filter hook ingress device "lan0" priority 10; policy accept;
		fwd to "wan0"
	}
	chain wan {
		type filter hook ingress device "wan0" priority 10; policy accept;
		fwd to "lan0"
	}
}
EOF

# --- traffic tools ---------------------------------------------------------------------------
cat >"$tmp/serve.py" <<'EOF'
# serve.py tcp|udp:ADDR:PORT...: accept TCP connections, echo UDP datagrams (a UDP answer
# leaves from the address the request went to).
import socket, sys, threading
def tcp(addr, port):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port)); s.listen(64)
    while True:
        c, _ = s.accept(); c.sendall(b"hello\n"); c.close()
def udp(addr, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind((addr, port))
    while True:
        d, peer = s.recvfrom(2048); s.sendto(d, peer)
for spec in sys.argv[1:]:
    kind, addr, port = spec.split(":")
    threading.Thread(target=tcp if kind == "tcp" else udp, args=(addr, int(port)), daemon=True).start()
threading.Event().wait()
EOF
cat >"$tmp/probe.py" <<'EOF'
# probe.py tcp|udp HOST PORT [SRC]: prints "open"/"answered" (exit 0), "refused" (exit 0: a RST
# came back, so the packets passed) or "timeout" (exit 1) after $WAIT seconds.
import os, socket, sys
kind, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
src = sys.argv[4] if len(sys.argv) > 4 else None
wait = float(os.environ.get("WAIT", "1"))
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM if kind == "tcp" else socket.SOCK_DGRAM)
s.settimeout(wait)
if src: s.bind((src, 0))
try:
    if kind == "tcp":
        s.connect((host, port)); s.recv(16); print("open")
    else:
        s.sendto(b"wasp live probe", (host, port)); s.recvfrom(2048); print("answered")
except ConnectionRefusedError:
    print("refused")
except (socket.timeout, TimeoutError):
    print("timeout"); sys.exit(1)
EOF
ip netns exec "$S" python3 "$tmp/serve.py" tcp:0.0.0.0:21 tcp:0.0.0.0:22 tcp:0.0.0.0:25 \
	tcp:0.0.0.0:80 tcp:0.0.0.0:443 tcp:0.0.0.0:3389 \
	udp:172.16.238.2:53 udp:198.51.100.80:123 udp:172.16.238.131:17500 &
pids+=($!)
ip netns exec "$C" python3 "$tmp/serve.py" tcp:0.0.0.0:22 &
pids+=($!)

# --- wasp ------------------------------------------------------------------------------------
echo "== wasp run $tmp/firewall-live.nft (lan0 <-> wan0)"
ip netns exec "$W" "$WASP" run "$tmp/firewall-live.nft" --socket "$sock" --workers 2 \
	>"$tmp/wasp.out" 2>"$tmp/wasp.err" &
wasp_pid=$!
for _ in $(seq 200); do
	[ -S "$sock" ] && break
	kill -0 "$wasp_pid" 2>/dev/null || { echo "wasp run failed:"; cat "$tmp/wasp.err"; exit 1; }
	sleep 0.05
done
[ -S "$sock" ] || { echo "no control socket after 10 s"; cat "$tmp/wasp.err"; exit 1; }
ctl() { ip netns exec "$W" "$WASP" ctl --socket "$sock" "$@"; }
# The first ping also fills the ARP caches (ARP passes: ingress `ether type arp accept`).
for _ in $(seq 20); do
	ip netns exec "$C" ping -c 1 -W 1 172.16.238.131 >/dev/null 2>&1 && break
done

# --- traffic -----------------------------------------------------------------------------------
fails=0
printf '\n== traffic: what passed and what was dropped\n'
printf '%-8s %-54s %-9s %s\n' expect test observed "why (README)"
# check EXPECT NS WHY DESCRIPTION CMD...: run CMD in NS; exit 0 = passed.
check() {
	local expect=$1 ns=$2 why=$3 what=$4 got out mark=""
	shift 4
	# What should pass gets 3 s (a loaded machine is slow), what should be dropped 1 s.
	local wait=1
	[ "$expect" = passed ] && wait=3
	if out=$(WAIT=$wait ip netns exec "$ns" "$@" 2>&1); then got=passed; else got=dropped; fi
	case "$out" in *refused*) got="passed (refused by the host)" ;; esac
	if [ "${got%% *}" != "$expect" ]; then mark="   <-- UNEXPECTED"; fails=$((fails + 1)); fi
	printf '%-8s %-54s %-9s %s%s\n' "$expect" "$what" "${got%% *}" "$why" "$mark"
}
P="python3 $tmp/probe.py"
check passed "$C" "lan_out: icmp echo-request/reply" "ping staff -> server 172.16.238.131" \
	ping -c 2 -i 0.2 -W 3 172.16.238.131
check passed "$C" "lan_out 31, replies lan_out 33" "tcp staff -> server :22 (ssh)" $P tcp 172.16.238.131 22
check passed "$C" "lan_out 31/33" "tcp staff -> server :21 (ftp)" $P tcp 172.16.238.131 21
check passed "$C" "lan_out 31/33" "tcp staff -> server :80 (web)" $P tcp 172.16.238.131 80
check dropped "$C" "lan_out 40: end of lan_out" "tcp staff -> server :25 (smtp)" $P tcp 172.16.238.131 25
check dropped "$C" "lan_out 40" "tcp staff -> server :3389 (rdp)" $P tcp 172.16.238.131 3389
check passed "$C" "lan_out 28, answer lan_out 29" "udp staff -> resolver 172.16.238.2 :53 (dns)" \
	$P udp 172.16.238.2 53
check passed "$C" "lan_out 34 (@web_ports), replies lan_in 42" "tcp staff -> 198.51.100.80 :443 (https)" \
	$P tcp 198.51.100.80 443
check passed "$C" "lan_out 35, reply lan_in 43" "udp staff -> 198.51.100.80 :123 (ntp)" \
	$P udp 198.51.100.80 123
check dropped "$C" "lan_out 37: lan sync" "udp staff -> server :17500 (dropbox lan sync)" \
	$P udp 172.16.238.131 17500
check dropped "$C" "ingress 19: @blocklist" "ping staff -> 203.0.113.66 (blocklisted)" \
	ping -c 1 -W 1 203.0.113.66
check dropped "$S" "lan_in 41: syn without ack" "tcp 198.51.100.80 -> staff :22 (inbound connection)" \
	$P tcp 172.16.238.10 22 198.51.100.80
check dropped "$S" "lan_in 46: end of lan_in" "ping 198.51.100.80 -> staff (inbound echo request)" \
	ping -c 1 -W 1 -I 198.51.100.80 172.16.238.10

# --- what wasp counted -----------------------------------------------------------------------
printf '\n== wasp ctl list ruleset (rules that counted packets)\n'
ctl list ruleset >"$tmp/ruleset.txt"
grep -E 'counter packets [1-9]' "$tmp/ruleset.txt" | sed -E 's/^[[:space:]]+/  /' || true
# rule_count 'RULE TEXT': the packets its counter saw.
rule_count() {
	grep -F -- "$1" "$tmp/ruleset.txt" | head -1 | sed -nE 's/.*counter packets ([0-9]+).*/\1/p' || true
}
expect_counted() {
	local n
	n=$(rule_count "$1")
	if [ -z "$n" ] || [ "$n" = 0 ]; then
		echo "  UNEXPECTED: rule '$1' counted nothing"
		fails=$((fails + 1))
	fi
}
expect_counted 'ip daddr @blocklist counter'
expect_counted 'udp dport 17500 counter'
expect_counted 'tcp flags syn / syn,ack counter'
expect_counted 'ip daddr 172.16.238.2 udp dport 53 counter'
expect_counted 'ether type arp counter'
expect_counted 'ip saddr 172.16.238.2 udp sport 53 counter'
expect_counted 'udp sport 123 counter'

# csum_errors NS: checksum errors NS's stack counted on receive (InCsumErrors of TCP, UDP and
# UDP-Lite in /proc/net/snmp): 0 when every checksum wasp passed on was complete.
csum_errors() {
	ip netns exec "$1" python3 -c 'l = open("/proc/net/snmp").read().split("\n")
print(sum(int(v) for h, x in zip(l[::2], l[1::2]) for k, v in zip(h.split(), x.split()) if k == "InCsumErrors"))'
}
for ns in "$C" "$S"; do
	n=$(csum_errors "$ns")
	mark=""
	if [ "$n" != 0 ]; then mark="   <-- UNEXPECTED"; fails=$((fails + 1)); fi
	printf '  checksum errors counted by %s: %s%s\n' "$ns" "$n" "$mark"
done

printf '\n== wasp ctl stats\n'
ctl stats | sed 's/^/  /'

kill -TERM "$wasp_pid"
wait "$wasp_pid" || { echo "wasp run exited with $?"; fails=$((fails + 1)); }
wasp_pid=""
printf '\n== wasp run stopped (SIGTERM); its final statistics\n'
sed 's/^/  /' "$tmp/wasp.out"

if [ "$fails" -ne 0 ]; then
	printf '\nFAILED: %d result(s) not as the README says\n' "$fails"
	exit 1
fi
printf '\nOK: every packet ended as the README says\n'
