// Package nodeplane is the root of a library of composable Linux dataplane
// pieces for Kubernetes CNIs and node agents. The root package holds no code;
// each subpackage does one job and can be used on its own.
//
// # Packages
//
//   - kernel: the one way to reach the kernel. It opens a network namespace
//     once and gives every driver and monitor narrow interfaces (routes,
//     neighbours and FDB in batches, links, addresses, rules, sysctls,
//     conntrack, events, binaries run inside the namespace) in nodeplane's
//     own types. kernel/kernelfake is one in-memory namespace with the
//     kernel's semantics, for unit tests.
//   - dataplane: the Manager and Driver contracts and the Loop that batches
//     updates, gates on in-sync, applies drivers in a fixed phase order,
//     owns periodic resync, and isolates failures per object and per driver;
//     a standby mode for instances that are not the leader, and metrics
//     through a small interface.
//   - netfilter: the packet-filter rule model and the Table interface
//     managers take; iptables is its xtables writer, which owns prefixed
//     chains and hash-commented rules, never anything foreign; nftables is
//     its native nftables writer over netlink, which owns one table per
//     family and adds named sets, concatenations and verdict maps.
//   - ipsets: declarative IP sets written through ipset restore.
//   - routetable: declarative routes of one table and family, owned by
//     protocol and interface patterns, with route classes, held routes for
//     missing interfaces, a grace period and conntrack cleanup.
//   - routerule: declarative policy-routing rules owned by priority and table.
//   - ifacemonitor: reports links, addresses and routes of a namespace, and
//     re-lists and diffs after every netlink overflow, so it never goes deaf.
//   - vxlan, ipip: overlays to the other nodes (the tunnel device, its FDB
//     and neighbours, routes to every node's pod blocks, always or only
//     across subnets); wireguard: encryption between nodes, with a kernel
//     or an embedded userspace device.
//   - bpf/maps: pinned BPF maps and Sync, which keeps a map equal to a
//     desired set with batched reads and writes of the difference;
//     bpf/proxy: the BPF service proxy, a kube-proxy replacement whose tc
//     programs on pod and host interfaces translate connections to cluster
//     IPs, NodePorts and external IPs, and whose pinned state survives a
//     restart.
//   - mtu: encapsulation overheads, host and pod MTU, the CNI MTU file, and a
//     monitor that re-detects on link changes.
//   - node managers, one small package each, over the drivers above and on
//     any netfilter.Table writer: endpoints (workload interfaces: routes,
//     static neighbours, per-interface sysctls, a status per endpoint),
//     masquerade (outgoing NAT of pod pools), hostips (an ip set of the
//     host's addresses), floatingips (1:1 NAT), serviceloop (service
//     traffic that would loop is dropped), sysctls (the kernel's static
//     configuration).
//   - markbits, idalloc: mark bits from a 32-bit mask and the standard agent
//     layout; route-table indices and stable string→uint64 IDs.
//   - clock, command, ipfamily: the injectable time source, the runner of
//     the few binaries drivers need, the IPv4/IPv6 family.
//
// # Assembling an agent
//
// A consumer owns its control plane (Kubernetes API, a file, etcd …) and
// turns it into typed messages. It then:
//
//  1. allocates its mark bits (markbits.NewLayout) and route tables
//     (idalloc.NewIndexAllocator), once at start;
//  2. opens its namespace with kernel.Open (or kernel.OpenCurrent) and
//     constructs drivers on it, each with an explicit ownership identity
//     (chain prefix, set prefix, route table and protocol, device names),
//     and the managers that translate its messages into desired driver
//     state;
//  3. registers them on a dataplane.Loop and runs it;
//  4. sends its messages with Loop.Send and calls Loop.DatastoreInSync once
//     its first snapshot is complete, and Loop.InterfacesInSync once the
//     interface monitor has listed the kernel. No kernel write happens
//     before both.
//
// Constructors do no I/O and start no goroutines; Run methods block, own
// their goroutines and stop with their context. Errors are returned, never
// panicked, and bad input is rejected before anything is written.
package nodeplane
