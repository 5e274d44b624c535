#!/usr/bin/env bash
# The end-to-end test of the reference agent against real Kubernetes components
# (run through `make e2e`; needs root). It builds, once and cached under
# ${XDG_CACHE_HOME:-$HOME/.cache}/nodeplane-e2e/<version>, a released
# kube-apiserver and the etcd it pins from their Go modules (e2e/build-k8s.sh;
# cold: about 7 minutes on 2 cores here, warm: nothing to build), then runs TestE2E of the e2e
# module: etcd and kube-apiserver on loopback (RBAC on), two agents in network
# namespaces as nodes, a kubelet stand-in calling the CNI plugin, and the checks
# (pod to pod over VXLAN, a ClusterIP service through the BPF proxy, a
# NetworkPolicy, an API server outage, node re-registration, SIGTERM).
# E2E_RUN=REGEXP picks subtests (go test -run), E2E_KEEP=1 keeps the logs.
set -euo pipefail
cd "$(dirname "$0")/../e2e"
export PATH="$PATH:/usr/sbin:/sbin"
if [ "$(id -u)" -ne 0 ]; then
	echo "make e2e needs root (network namespaces, BPF)" >&2
	exit 1
fi
start=$(date +%s)
E2E_K8S_BIN="$(./build-k8s.sh)"
took=$(($(date +%s) - start))
if [ "$took" -lt 60 ]; then
	E2E_BUILD_TIME="${took}s (cached)"
else
	E2E_BUILD_TIME="${took}s (cold)"
fi
export E2E_K8S_BIN E2E_BUILD_TIME
echo "==> kube-apiserver and etcd in $E2E_K8S_BIN: $E2E_BUILD_TIME"
E2E=1 go test -count=1 -v -timeout 30m -run "TestE2E${E2E_RUN:+/$E2E_RUN}" .
