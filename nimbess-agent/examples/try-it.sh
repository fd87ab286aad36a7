#!/bin/sh
# Walk-through, as root, from the repository root: an agent of its own (socket and state in a
# temporary directory, nothing in /run or /var/lib), two pods on blue that ping each other,
# the ports, a pipeline and verify, then DEL. Everything is removed at the end, also on failure.
#
#   sudo sh nimbess-agent/examples/try-it.sh
set -eu
cargo build -p nephrite-nimbess-agent -p nephrite-nimbess-cni
PATH="$PWD/target/debug:$PATH"
WORK=$(mktemp -d)
export NIMBESS_SOCKET="$WORK/agent.sock"
nimbess-agent serve --config nimbess-agent/examples/agent.yaml --state-dir "$WORK/state" \
  > "$WORK/agent.log" 2>&1 &
AGENT=$!
cleanup() {
  for p in pod1 pod2; do ip netns del "try-$p" 2>/dev/null || true; done
  kill "$AGENT" 2>/dev/null && wait "$AGENT" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT INT TERM
while [ ! -S "$NIMBESS_SOCKET" ]; do sleep 0.1; done

conf="{\"cniVersion\":\"1.0.0\",\"name\":\"blue\",\"type\":\"nimbess-cni\",\"agentSocket\":\"$NIMBESS_SOCKET\"}"
cni() { # COMMAND POD
  echo "$conf" | CNI_COMMAND=$1 CNI_CONTAINERID="try-$2" CNI_NETNS="/run/netns/try-$2" \
    CNI_IFNAME=eth0 CNI_PATH="$PWD/target/debug" nimbess-cni
}
for p in pod1 pod2; do ip netns add "try-$p"; cni ADD "$p"; done
nimbess-agent ports
nimbess-agent pipelines --port port_try-pod1_eth0
ip netns exec try-pod1 ping -c 3 10.10.0.3
nimbess-agent verify
for p in pod1 pod2; do cni DEL "$p"; done
nimbess-agent ports
