#!/bin/sh
# Walk-through as root: two pods on blue ping each other, DEL frees them.
# Expects nimbess-agent serve --config examples/agent.yaml to be running.
set -eu
for p in pod1 pod2; do ip netns add "$p"; done
conf='{"cniVersion":"1.1.0","name":"blue","type":"nimbess-cni"}'
for p in pod1 pod2; do
  echo "$conf" | CNI_COMMAND=ADD CNI_CONTAINERID="$p" CNI_NETNS=/run/netns/"$p" CNI_IFNAME=eth0 nimbess-cni
done
nimbess-agent ports
nimbess-agent pipelines --port port_pod1_eth0
ip netns exec pod1 ping -c 3 10.10.0.3
nimbess-agent verify
for p in pod1 pod2; do
  echo "$conf" | CNI_COMMAND=DEL CNI_CONTAINERID="$p" CNI_NETNS=/run/netns/"$p" CNI_IFNAME=eth0 nimbess-cni
  ip netns del "$p"
done
