#!/usr/bin/env bash
# samples/idle-gateway, live: subscribers send UDP through the gateway's ruleset (idle.nft, its
# `idletimer` plugin) and go quiet; `wasp ctl monitor` shows their timers expire. Needs root
# (network namespaces, veth pairs, AF_PACKET).
#
#   subscribers ns                   wasp ns                        server ns
#   c0 10.1.0.11 alice  <-veth-> sub0 [wasp run] up0 <-veth-> s0 203.0.113.1 (UDP 443)
#      10.1.0.12 bob
#      10.1.0.13 carol
#      10.1.1.5, 10.1.2.7 the branch office (two subnets, one label)
#
# A live variant of idle.nft with short timeouts (bob and branch 4 s, carol 5 s hard; alice keeps
# her 30 s and the hotel its 15 s), plus a table `wire` that sends what the ruleset accepts on
# sub0 out of up0 (`fwd to`). alice keeps sending; the others send a little and stop (10.1.2.7
# after 10.1.1.5, so the shared label lives on). The script prints what passed and what was
# dropped (a sender outside every subscriber's range meets the policy), the `wasp ctl monitor`
# events, the rule listing with each timer's state, `wasp ctl stats`, and exits non-zero when
# the events are not what the README says: each quiet label expires exactly once (the branch
# once for both subnets), alice's never. Everything it creates is removed on any exit.
#
# WASP=path/to/wasp picks the binary (default: target/release/wasp, or under $CARGO_TARGET_DIR;
# built when missing).
# WORKERS=N runs N workers (default 2). Each worker runs its own instance of the plugin; their
# timers are shared (one timer per label across the workers, as the kernel has one per label),
# so a label expires once, when no worker has seen its traffic for the timeout.
#
# Like xt_IDLETIMER, a label's timer starts when its rule is loaded: a label that never sees a
# packet expires once after its timeout (here the hotel, 15 s after wasp starts, if the run
# lasts that long; the script shows such events but does not count them).
workers=${WORKERS:-2}

here=$(cd "$(dirname "$0")" && pwd)
tag="wid$$"
C="${tag}c" W="${tag}w" S="${tag}s"
namespaces=("$C" "$W" "$S")
# WASP, the root check, $tmp, $sock, $wasp_pid, pids, the cleanup on exit, the namespaces.
# shellcheck source=../live-common.sh
. "$here/../live-common.sh" idle

# --- topology ---------------------------------------------------------------------------
ip -n "$C" link add c0 type veth peer name sub0 netns "$W"
ip -n "$S" link add s0 type veth peer name up0 netns "$W"
for a in 10.1.0.11/16 10.1.0.12/16 10.1.0.13/16 10.1.1.5/16 10.1.2.7/16 10.9.0.9/16; do
	ip -n "$C" addr add "$a" dev c0
done
ip -n "$S" addr add 203.0.113.1/24 dev s0
for d in "$C c0" "$W sub0" "$W up0" "$S s0"; do
	set -- $d
	ip -n "$1" link set "$2" up
done
ip -n "$C" route add 203.0.113.0/24 dev c0
ip -n "$S" route add 10.0.0.0/8 dev s0
# ARP meets idle.nft's policy (it accepts subscribers' IP only): static neighbours.
smac=$(ip netns exec "$S" cat /sys/class/net/s0/address)
ip -n "$C" neigh add 203.0.113.1 lladdr "$smac" dev c0 nud permanent
# The client keeps veth's checksum offload: its UDP reaches wasp with partial checksums, which
# wasp completes (the server's stack checks them: csum_errors below).

# --- the live ruleset ------------------------------------------------------------------------
sed -E -e 's/(label "bob") timeout 20s/\1 timeout 4s/' \
	-e 's/(label "branch") timeout 10s/\1 timeout 4s/' \
	-e 's/(label "carol") timeout 60s/\1 timeout 5s/' \
	"$here/idle.nft" >"$tmp/idle-live.nft"
cat >>"$tmp/idle-live.nft" <<'EOF'

# Live only: what the isp table accepts on sub0 (priority filter = 0) goes out of up0.
table netdev wire {
	chain sub {
		type filter hook ingress device "sub0" priority 10; policy accept;
		counter fwd to "up0"
	}
}
EOF

# --- traffic tools ---------------------------------------------------------------------------
cat >"$tmp/udp.py" <<'EOF'
"""udp.py send | serve OUT: subscribers' UDP to 203.0.113.1:443 (as subscribers.pcap has it).

send: at 0 s alice, bob, carol, 10.1.1.5 and 10.9.0.9 (nobody's), at 0.3 s the same but alice,
at 0.6 s bob and 10.1.2.7 (the branch's other subnet: the shared label lives on), at 0.9 and
1.2 s 10.1.2.7; alice every 0.25 s until killed."""
import collections, json, socket, sys, time
PLAN = [(0.0, ["10.1.0.12", "10.1.0.13", "10.1.1.5", "10.9.0.9"]),
        (0.3, ["10.1.0.12", "10.1.0.13", "10.1.1.5", "10.9.0.9"]),
        (0.6, ["10.1.0.12", "10.1.2.7"]), (0.9, ["10.1.2.7"]), (1.2, ["10.1.2.7"])]
if sys.argv[1] == "send":
    socks = {}
    def send(src):
        if src not in socks:
            socks[src] = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            socks[src].bind((src, 40000))
        socks[src].sendto(b"subscriber %s" % src.encode(), ("203.0.113.1", 443))
    t0, k, alice = time.time(), 0, 0.0
    while True:
        now = time.time() - t0
        while k < len(PLAN) and PLAN[k][0] <= now:
            for src in PLAN[k][1]: send(src)
            k += 1
        if now >= alice:
            send("10.1.0.11"); alice += 0.25
        time.sleep(0.01)
else:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("203.0.113.1", 443))
    got = collections.Counter()
    open(sys.argv[2] + ".ready", "w").close()
    while True:
        d, (src, _) = s.recvfrom(2048)
        got[src] += 1
        json.dump(got, open(sys.argv[2] + ".tmp", "w"))
        __import__("os").replace(sys.argv[2] + ".tmp", sys.argv[2])
EOF
ip netns exec "$S" python3 "$tmp/udp.py" serve "$tmp/got.json" &
pids+=($!)

# --- wasp ------------------------------------------------------------------------------------
echo "== wasp run $tmp/idle-live.nft (sub0 -> up0): timeouts bob 4 s, branch 4 s, carol 5 s hard"
# start_wasp: run the daemon and wait for its control socket. Should a plugin's configure call
# overrun its deadline on a loaded machine ("interrupted after ... epoch ticks"), the start is
# retried, at most twice, with a note.
start_wasp() {
	local try
	for try in 1 2 3; do
		ip netns exec "$W" "$WASP" run "$tmp/idle-live.nft" --socket "$sock" --workers "$workers" \
			>"$tmp/wasp.out" 2>"$tmp/wasp.err" &
		wasp_pid=$!
		for _ in $(seq 400); do
			[ -S "$sock" ] && return 0
			kill -0 "$wasp_pid" 2>/dev/null || break
			sleep 0.05
		done
		wait "$wasp_pid" 2>/dev/null || true
		wasp_pid=""
		if grep -q 'epoch ticks' "$tmp/wasp.err" && [ "$try" -lt 3 ]; then
			echo "note: wasp run refused to start (a plugin's configure overran its deadline), retrying:"
			grep error "$tmp/wasp.err" | sed 's/^/  /'
			continue
		fi
		echo "wasp run failed:"
		cat "$tmp/wasp.err"
		return 1
	done
}
start_wasp
ctl() { ip netns exec "$W" "$WASP" ctl --socket "$sock" "$@"; }
for _ in $(seq 100); do [ -e "$tmp/got.json.ready" ] && break; sleep 0.05; done
ctl monitor >"$tmp/monitor.txt" 2>&1 &
mon=$!
pids+=($mon)
sleep 1 # the monitor subscribes

# --- traffic -----------------------------------------------------------------------------------
# Timers start when the rules are loaded (as xt_IDLETIMER's): on a slow start (a loaded
# machine, a debug build) a 4 s label can expire before its first packet, also just after the
# traffic starts. Those expiries are right, but not what this run checks: only the lines that
# come after the quiet labels' last packets (1.2 s into the traffic; their timeouts are 4 s and
# more) are counted.
start=$SECONDS
ip netns exec "$C" python3 "$tmp/udp.py" send &
sender=$!
pids+=($sender)
sleep 1.3
before=$(wc -l <"$tmp/monitor.txt")
# Wait for the quiet labels' expiries (at most 15 s).
for _ in $(seq 150); do
	n=$(tail -n +$((before + 1)) "$tmp/monitor.txt" | grep -cE 'idletimer (bob|carol|branch) expired' || true)
	[ "$n" -ge 3 ] && break
	sleep 0.1
done
sleep 1 # an expiry that should not come (a second one, alice's) would show by now
printf '\n== wasp ctl monitor (%d s after the first packet)\n' $((SECONDS - start))
if [ "$before" -gt 0 ]; then
	echo "  (before the quiet labels' last packets; timers armed at load may show here:)"
	head -n "$before" "$tmp/monitor.txt" | sed 's/^/    /'
fi
tail -n +$((before + 1)) "$tmp/monitor.txt" | sed 's/^/  /'

fails=0
printf '\n== what passed (the server counted the packets by source) and what was dropped\n'
python3 - "$tmp/got.json" <<'EOF' || fails=1
import json, sys
got = json.load(open(sys.argv[1]))
sent = {"10.1.0.12": (3, "bob, ingress 4"), "10.1.0.13": (2, "carol, ingress 5"),
        "10.1.1.5": (2, "branch, ingress 6"), "10.1.2.7": (3, "branch, ingress 7"),
        "10.9.0.9": (0, "nobody's: policy drop")}
bad = 0
for src, (want, why) in sent.items():
    n = got.get(src, 0)
    print("  %-10s sent %d, arrived %d  (%s)%s" % (src, 2 if want == 0 else want, n, why,
                                                   "" if n == want else "   <-- UNEXPECTED"))
    bad += n != want
print("  %-10s sending all along, arrived so far %d  (alice, ingress 3)%s" % (
    "10.1.0.11", got.get("10.1.0.11", 0), "" if got.get("10.1.0.11", 0) > 0 else "   <-- UNEXPECTED"))
bad += got.get("10.1.0.11", 0) == 0
sys.exit(1 if bad else 0)
EOF

printf '\n== the expiries (README: each quiet label once, the branch once for both subnets, alice never)\n'
for label in bob carol branch alice; do
	n=$(tail -n +$((before + 1)) "$tmp/monitor.txt" | grep -c "idletimer $label expired" || true)
	want=1
	[ "$label" = alice ] && want=0
	mark=""
	if [ "$n" != "$want" ]; then mark="   <-- UNEXPECTED (expected $want)"; fails=$((fails + 1)); fi
	printf '  idletimer %-7s expired %d time(s)%s\n' "$label" "$n" "$mark"
done

printf '\n== wasp ctl list ruleset (the isp table: each timer'"'"'s state)\n'
ctl list ruleset | sed 's/^/  /'
# csum_errors NS: checksum errors NS's stack counted on receive (InCsumErrors of TCP, UDP and
# UDP-Lite in /proc/net/snmp): 0 when every checksum wasp passed on was complete.
csum_errors() {
	ip netns exec "$1" python3 -c 'l = open("/proc/net/snmp").read().split("\n")
print(sum(int(v) for h, x in zip(l[::2], l[1::2]) for k, v in zip(h.split(), x.split()) if k == "InCsumErrors"))'
}
n=$(csum_errors "$S")
mark=""
if [ "$n" != 0 ]; then mark="   <-- UNEXPECTED"; fails=$((fails + 1)); fi
printf '\n== checksum errors counted by the server: %s%s\n' "$n" "$mark"
printf '\n== wasp ctl stats\n'
ctl stats | sed 's/^/  /'

kill "$mon" 2>/dev/null || true
kill -TERM "$wasp_pid"
wait "$wasp_pid" || { echo "wasp run exited with $?"; fails=$((fails + 1)); }
wasp_pid=""
printf '\n== wasp run stopped (SIGTERM); its final statistics\n'
sed 's/^/  /' "$tmp/wasp.out"

if [ "$fails" -ne 0 ]; then
	printf '\nFAILED: not as the README says\n'
	exit 1
fi
printf '\nOK: the quiet subscribers'"'"' timers expired once each, as the README says\n'
