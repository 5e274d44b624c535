#!/usr/bin/env bash
# nodeplane's demo (run through `make demo`): three "nodes" (network
# namespaces on a bridge underlay) with two "pods" each, one reference agent
# (examples/nodeagent) per node on a cluster file, and checks printed step by
# step. Everything lives in namespaces the demo creates and deletes, also on
# Ctrl-C or failure; the host's links, routes and firewall are not touched.
#
# It needs root; on a fresh Debian machine it installs what is missing
# (iproute2, ping, ipset, iptables, conntrack, nftables), builds the agent and runs the demo.
# Extra arguments go to the demo (examples/demo), e.g. --resync 5s.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
	echo "make demo needs root: it creates network namespaces and runs one agent in each." >&2
	echo "Run: sudo make demo    (or sudo env PATH=\"\$PATH\" make demo if sudo loses Go)" >&2
	exit 1
fi
if ! command -v go >/dev/null 2>&1; then
	echo "make demo needs Go 1.26 in PATH (sudo may have reset PATH: sudo env PATH=\"\$PATH\" make demo)" >&2
	exit 1
fi
export PATH="$PATH:/usr/sbin:/sbin"

# What the demo uses: command → Debian package.
declare -A NEEDED=([ip]=iproute2 [ping]=iputils-ping [ipset]=ipset [iptables]=iptables [conntrack]=conntrack [nft]=nftables)
missing=()
for c in "${!NEEDED[@]}"; do
	command -v "$c" >/dev/null 2>&1 || missing+=("${NEEDED[$c]}")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "==> installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

echo "==> building the agent (examples/nodeagent) and the demo (examples/demo)"
(cd examples && go build -o bin/nodeagent ./nodeagent && go build -o bin/demo ./demo)
echo
exec examples/bin/demo --agent "$PWD/examples/bin/nodeagent" "$@"
