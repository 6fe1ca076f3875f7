# Two simulated nodes for the benchmarks that need a slow link (sourced: bench/nodes,
# bench/moe/nodes): two network namespaces joined by a veth pair whose egress is rate-limited
# (tc tbf: this kernel has no netem), torn down on exit. Node 0 has 10.78.0.1 on cvnode0,
# node 1 10.78.0.2 on cvnode1; ranks in a node talk over its loopback (each binding its
# node's veth address through GLOO_SOCKET_IFNAME: a node's own address routes over lo), and
# only traffic between the nodes crosses the shaped veth.
#
# The caller sets: `name` (its messages' prefix), `rate` (tc's, as "100mbit"), `work` (a
# directory, made here; empty: a new one under /tmp), `test_mode` (1: where the experiment cannot run, exit 77, skipped; else 2).
# Needs root, iproute2 and tc (installed when missing). Defines node_ns N, node_if N,
# sent_bytes (what both veth ends have sent so far), and sets intra_link and inter_link:
# {"latency_s", "bandwidth_Bps"} of the loopback within a node and of the veth between them
# (TCP ping-pong latency, bulk bandwidth).
# Where the experiment cannot run: skipped (77) in test mode, an error otherwise.
unavailable() {
  echo "$name: $* (network namespaces unavailable here)" >&2
  ((test_mode)) && exit 77
  exit 2
}
[[ $(id -u) == 0 ]] || unavailable "needs root"
if ! command -v tc >/dev/null || ! command -v ip >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q iproute2 >/dev/null ||
    unavailable "iproute2 could not be installed"
fi
[[ -n "$work" ]] || work="$(mktemp -d "/tmp/conveyor-$name.XXXXXX")"
mkdir -p "$work"

a="cvnode-a-$$"
b="cvnode-b-$$"
# Removes both namespaces: first whatever still runs in them, then each name, retried for up
# to 5 s (a namespace some process still holds is refused as busy; it was left behind once).
teardown() {
  local ns pids
  for ns in "$a" "$b"; do
    pids=$(ip netns pids "$ns" 2>/dev/null || true)  # none made yet: nothing (set -e)
    [[ -n "$pids" ]] && kill -KILL $pids 2>/dev/null
  done
  for ns in "$a" "$b"; do
    for _ in $(seq 1 50); do
      ip netns list 2>/dev/null | grep -qw -- "$ns" || continue 2
      ip netns del "$ns" 2>/dev/null || sleep 0.1
    done
    echo "$name: could not remove the network namespace $ns: $(ip netns del "$ns" 2>&1)" >&2
  done
}
trap teardown EXIT
trap 'exit 130' INT  # through the EXIT trap
trap 'exit 143' TERM
# Inside a chroot (scripts/check-debian13) namespaces can be made but not entered: `ip netns
# exec` remounts / as a slave, and a chroot's / is no mount point.
mountpoint -q / || unavailable "/ is no mount point (a chroot?), so ip netns cannot enter namespaces"
ip netns add "$a" 2>/dev/null || unavailable "ip netns add failed"
ip netns add "$b"
ip link add cvnode0 type veth peer name cvnode1 2>/dev/null || unavailable "no veth pairs"
ip link set cvnode0 netns "$a"
ip link set cvnode1 netns "$b"
ip -n "$a" addr add 10.78.0.1/24 dev cvnode0
ip -n "$b" addr add 10.78.0.2/24 dev cvnode1
for ns in "$a" "$b"; do ip -n "$ns" link set lo up; done
ip -n "$a" link set cvnode0 up
ip -n "$b" link set cvnode1 up
# The slow link between the nodes: a token bucket on each end's egress. The queue holds
# 200 ms at RATE so that TCP bursts wait rather than drop.
ip netns exec "$a" tc qdisc add dev cvnode0 root tbf rate "$rate" burst 32kb latency 200ms ||
  unavailable "tc could not shape the link"
ip netns exec "$b" tc qdisc add dev cvnode1 root tbf rate "$rate" burst 32kb latency 200ms
node_ns() { if (($1 == 0)); then echo "$a"; else echo "$b"; fi; }
node_if() { echo "cvnode$1"; }
sent_bytes() {  # bytes both veth ends have sent so far
  local n0 n1
  n0=$(ip netns exec "$a" tc -s qdisc show dev cvnode0 | sed -n 's/^ *Sent \([0-9]*\) bytes.*/\1/p' | head -1)
  n1=$(ip netns exec "$b" tc -s qdisc show dev cvnode1 | sed -n 's/^ *Sent \([0-9]*\) bytes.*/\1/p' | head -1)
  echo $((n0 + n1))
}

# Links: a TCP server on node A's address; a client on node A (loopback) and one on node B
# (the shaped veth). Each prints {"latency_s", "bandwidth_Bps"}: half the median round trip
# of 1-byte messages, and 4 MiB sent / (best of 10 times to an acknowledgement - one round trip).
probe_py='
import socket, statistics, struct, sys, time
mode, addr, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
def recv_exact(c, n):
    buf = bytearray(n); view = memoryview(buf); got = 0
    while got < n:
        k = c.recv_into(view[got:])
        if k == 0: raise EOFError
        got += k
    return buf
if mode == "serve":
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port)); s.listen(2); print("ready", flush=True)
    for _ in range(2):
        c, _ = s.accept(); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while True:
            n = struct.unpack("!Q", recv_exact(c, 8))[0]
            if n == 0: break
            recv_exact(c, n); c.sendall(b"k")
        c.close()
    sys.exit(0)
c = socket.create_connection((addr, port)); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
bulk = 4 << 20
payload = memoryview(bytes(bulk))  # allocated once: fresh pages are slow in a VM
def exchange(n):
    t = time.perf_counter(); c.sendall(struct.pack("!Q", n)); c.sendall(payload[:n]); recv_exact(c, 1)
    return time.perf_counter() - t
rtt = statistics.median(exchange(1) for _ in range(200))
best = min(exchange(bulk) for _ in range(10))
c.sendall(struct.pack("!Q", 0))
# On a busy machine the round trip can outlast the best bulk exchange: then the bulk time
# alone. Both kept within what conveyor plan accepts ((0, 1e15] bytes/s, [0, 1e15] s).
span = best - rtt if best > rtt else best
bandwidth = min(max(bulk / max(span, 1e-9), 1.0), 1e14)
latency = min(max(rtt / 2, 0.0), 1e3)
print("{\"latency_s\": %.6g, \"bandwidth_Bps\": %.6g}" % (latency, bandwidth))
'
probe_port=$((31000 + RANDOM % 2000))
ip netns exec "$a" timeout 120 python3 -c "$probe_py" serve 10.78.0.1 "$probe_port" >"$work/probe-server.out" 2>&1 &
probe_pid=$!
for _ in $(seq 1 100); do grep -q ready "$work/probe-server.out" 2>/dev/null && break; sleep 0.1; done
intra_link="$(ip netns exec "$a" python3 -c "$probe_py" client 10.78.0.1 "$probe_port")"
inter_link="$(ip netns exec "$b" python3 -c "$probe_py" client 10.78.0.1 "$probe_port")"
wait "$probe_pid"
echo "$name: within a node (loopback) $intra_link; between nodes (veth, tbf $rate) $inter_link" >&2
