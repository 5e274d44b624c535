// Package plugin is nodeplane's CNI plugin: it gives a pod the interface the
// reference node agent (examples/nodeagent) expects, following the agent's
// pod interface convention, so agent and plugin agree without talking.
//
// # What it makes
//
// ADD creates one veth pair per attachment. The host side is named
// datastore.PodInterface(K8S_POD_NAMESPACE, K8S_POD_NAME) ("npv" and 11 hex
// digits), carries the fixed MAC HostMAC and an alias naming the network,
// the container ID and the pod-side interface (the plugin's ownership mark),
// and is brought up. The pod side is CNI_IFNAME in the pod's namespace, with
// the addresses the IPAM plugin of the configuration gives (the standard
// host-local plugin, called through invoke.DelegateAdd) as /32 and /128,
// a default route via Gateway4 (169.254.1.1, onlink) for IPv4 and via
// Gateway6 (fe80::1) for IPv6, and a permanent neighbour entry for each
// gateway to the host side's MAC, so the node needs no gateway address and
// no proxy ARP. The agent routes the pod's addresses to the host side.
//
// The MTU of both sides is the configuration's "mtu", else the number in
// its "mtuFile" (the agent writes the pod MTU to STATE_DIR/mtu), else the
// kernel's default.
//
// # How it is used
//
// A runtime executes the command built from this package (cmd/nodeplane-cni,
// installed as "nodeplane" in the CNI bin directory, which is what the
// configuration's "type" names) with the CNI environment and the network
// configuration on stdin. Main is the whole command; Funcs and Versions are
// what it hands to skel, for callers that embed the plugin. A configuration:
//
//	{
//	  "cniVersion": "1.1.0",
//	  "name": "nodeplane",
//	  "type": "nodeplane",
//	  "mtuFile": "/var/lib/nodeplane-agent/mtu",
//	  "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.244.1.0/24"}], [{"subnet": "fd00:10:244:1::/64"}]]}
//	}
//
// The commands, spec versions 1.0.0 and 1.1.0:
//
//   - ADD: as above. A failure at any step removes the veth it made and
//     releases the addresses, so a retried ADD starts from nothing. A
//     host-side name held by an earlier attachment of this network (a
//     sandbox of the same pod whose DEL never came) is replaced; one held
//     by an interface that is not the plugin's, or by this container's
//     attachment of the network (the same ADD again, or another CNI_IFNAME:
//     a pod has one host-side name), fails the ADD, before any address is
//     reserved, and is left alone. A CNI_NETNS that is the plugin's own
//     namespace is refused.
//   - DEL: deletes the host-side veth of this attachment (found by name,
//     or by its alias when CNI_ARGS lacks the pod's name; the kernel removes
//     the pod side with it) and releases the addresses. It never enters the
//     pod's namespace, so it works when that namespace is gone (after a
//     reboot), and a second DEL succeeds.
//   - CHECK: compares the host side, the pod side (its peer, MTU, addresses,
//     routes and gateway neighbours) with prevResult, and asks the IPAM
//     plugin to check its reservation.
//   - GC (1.1.0): deletes the host-side veths of this network whose
//     attachment is not in cni.dev/valid-attachments, then hands the list
//     to the IPAM plugin, which releases the other reservations.
//   - STATUS (1.1.0): ready when the MTU can be known, that is when the
//     configuration names no "mtuFile" or gives an "mtu", or when the
//     agent has written the file (code 50, "plugin not available", until
//     then); the IPAM plugin's STATUS must pass too. The agent has no other
//     on-disk readiness signal; its /readyz is not consulted.
//   - VERSION: the versions above.
//
// # What it never touches
//
// Interfaces without its alias (a foreign interface that merely bears a pod's
// name is an error, never deleted), the pod's namespace on DEL and GC, the
// node's routes (the agent's job), sysctls (but accept_dad of the host side
// it makes, turned off so that the node reaches the pod over IPv6 at once),
// and every IPAM reservation but
// through the IPAM plugin. Routes of the IPAM result ("ipam.routes") are not
// installed: a pod's only routes are the two default routes.
package plugin
