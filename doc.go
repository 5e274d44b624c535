// Package nodeplane is the root of a library of composable Linux dataplane
// pieces for Kubernetes CNIs and node agents. The root package holds no code;
// each subpackage does one job and can be used on its own.
//
// # Packages
//
//   - clock: the injectable time source (Real and Fake) every component takes.
//   - markbits: allocates packet-mark bits from a 32-bit mask and builds the
//     standard agent layout (accept, pass, scratch, WireGuard, endpoint block).
//   - idalloc: hands out route-table indices from ranges with exclusions, and
//     stable string→uint64 IDs for BPF sets and services.
//   - dataplane: the Manager and Driver contracts and the Loop that batches
//     updates, gates on in-sync, throttles, retries with backoff and applies
//     drivers in a fixed phase order.
//
// Later packages (ifacemonitor, mtu, ipsets, iptables, routetable, vxlan,
// ipip, wireguard, bpf) are drivers and managers that plug into that loop.
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
