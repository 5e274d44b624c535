// Package nodeplane is the root of a library of composable Linux dataplane
// pieces for Kubernetes CNIs and node agents. The root package holds no code;
// each subpackage does one job and can be used on its own.
//
// # Packages
//
//   - clock: the injectable time source (Real and Fake) every component takes.
//   - command: the Runner through which drivers run their few binaries.
//   - ipfamily: the IPv4/IPv6 Family every driver and manager is built for.
//   - markbits: allocates packet-mark bits from a 32-bit mask and builds the
//     standard agent layout (accept, pass, scratch, WireGuard, endpoint block).
//   - idalloc: hands out route-table indices from ranges with exclusions, and
//     stable string→uint64 IDs for BPF sets and services.
//   - dataplane: the Manager and Driver contracts and the Loop that batches
//     updates, gates on in-sync, throttles, retries with backoff and applies
//     drivers in a fixed phase order.
//   - ifacemonitor: reports links, addresses and routes of a namespace, and
//     re-lists and diffs after every netlink overflow, so it never goes deaf.
//   - mtu: encapsulation overheads, host and pod MTU, the CNI MTU file, and a
//     monitor that re-detects on link changes.
//   - ipsets: declarative IP sets written through one ipset restore per apply.
//   - iptables: a typed rule model and a declarative table writer that owns
//     prefixed chains and hash-commented rules, never anything foreign.
//   - routerule: declarative policy-routing rules owned by priority and table.
//   - routetable: declarative routes of one table and family, owned by
//     protocol and interface patterns, with route classes, held routes for
//     missing interfaces, a grace period and conntrack cleanup.
//
// Each kernel-facing package ships a public fake (ipsets/ipsetsfake,
// iptables/iptablesfake, routerule/routerulefake, routetable/routetablefake,
// ifacemonitor/ifacemonitorfake, mtu.FakeLister) that
// behaves like the kernel for what the package emits, so consumers can unit
// test their managers without root.
//
// # Assembling an agent
//
// A consumer owns its control plane (Kubernetes API, a file, etcd …) and
// turns it into typed messages. It then:
//
//  1. allocates its mark bits (markbits.NewLayout) and route tables
//     (idalloc.NewIndexAllocator), once at start;
//  2. constructs drivers, each with an explicit ownership identity (chain
//     prefix, set prefix, route table and protocol, device names), and the
//     managers that translate its messages into desired driver state;
//  3. registers them on a dataplane.Loop and runs it;
//  4. sends its messages with Loop.Send and calls Loop.DatastoreInSync once
//     its first snapshot is complete, and Loop.InterfacesInSync once the
//     interface monitor has listed the kernel. No kernel write happens
//     before both.
//
// Constructors do no I/O and start no goroutines; Run/Start methods own
// goroutines and stop with their context. Errors are returned, never
// panicked, and bad input is rejected before anything is written.
package nodeplane
