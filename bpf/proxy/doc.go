// Package proxy is a BPF service proxy, a replacement for kube-proxy's
// translation of service addresses: a tc program pair attached to the
// node's interfaces translates connections to cluster IPs, node ports and
// external IPs into connections to the services' backends, and translates
// the replies back, without netfilter rules per service.
//
// # What it owns
//
// A Proxy owns one directory on a BPF file system, Options.PinDir, and in
// it:
//
//   - eight pinned maps (made with package bpf/maps): np_fe, the frontends
//     (address, port, protocol → service ID, backend counts, flags); np_be,
//     the backends (service ID, ordinal → address and port); np_ct, the
//     connections the program has seen (a hash without preallocation,
//     written by the programs and pruned by the scanner, Run); np_stats,
//     the programs' counters; np_svc_stats, their counters per service;
//     np_aff, the session affinities; np_src, the source ranges;
//     np_maglev, the Maglev tables (empty unless Options.Maglev);
//   - no pin for np_frag, the ports of the datagrams whose fragments are
//     under way (an LRU hash of the programs' own, made afresh with them:
//     see "Fragments");
//   - the directory PinDir/links and in it the pinned TCX attachments of
//     its programs, two per interface (ingress_<name> and egress_<name>;
//     attached with classic tc instead, the programs are filters on the
//     interfaces, which need no pin: see "Attach modes");
//   - with Options.Cgroup, a fourth map, np_sk_rev (the sockets the
//     connect-time programs translated, an LRU hash written by the
//     programs alone), and in PinDir/links the pinned attachments of those
//     programs to the cgroup (cgroup_<hook>, see "Connect-time
//     translation").
//
// The programs go on two kinds of interfaces: the host interfaces named in
// Options.HostInterfaces (the underlay, where traffic from other hosts
// arrives) and the host side of pod interfaces, every interface whose name
// starts with one of Options.PodInterfacePrefixes. Nothing else: one Proxy
// per PinDir, and it owns all of the maps and attachments named above in
// it (the ones a previous Proxy left are adopted). The pins keep the maps
// and the attachments alive (classic tc filters live on in their qdisc),
// so the translation goes on while no agent runs.
//
// # How it is used
//
// Open the namespace with package kernel, build the Proxy with New (which
// validates its options and does no I/O) and register it with a
// dataplane.Loop both as a manager and as a driver:
//
//	ns, err := kernel.Open("/proc/1/ns/net")
//	p, err := proxy.New(proxy.Options{Kernel: ns, PinDir: "/sys/fs/bpf/nodeplane",
//		HostInterfaces: []string{"eth0"}, PodInterfacePrefixes: []string{"cali", "veth"},
//		MasqueradeMark: 0x4000, MasqueradeMask: 0x4000})
//	_ = loop.AddManager(p)
//	_ = loop.AddDriver(p)
//	_ = loop.Send(ctx, cluster.Service{Name: "default/web:http",
//		Port: 80, ClusterIPs: []netip.Addr{cip}, Backends: backends})
//
// The messages are the cluster vocabulary's cluster.Service (declare or
// replace a service, by name), cluster.ServiceRemove and cluster.NodeAddrs
// (the node's addresses, where NodePorts answer). Interfaces come through
// the loop: the Proxy is a dataplane.InterfaceObserver, so wire the
// interface monitor to the loop once (loop.OnLink, loop.OnAddrs) and the
// loop hands it every link update; the Proxy attaches its programs to the
// wanted interfaces as they appear, and follows a name that comes back with
// a new index; while it knows no interface, or a host interface no update
// named, Status says so and the log has a warning. A cluster.Service is one
// port of a Kubernetes service; its Validate checks it before it is sent. A
// malformed message changes nothing and is reported once, by the next
// CompleteDeferredWork, with an error wrapping ErrInvalidService and
// cluster.ErrInvalid. Apply writes only the difference into the maps
// (package bpf/maps batches the writes; an Apply with nothing new makes no
// map syscall), in an order that never lets a frontend point at a missing
// backend. A service is written whole or not at all: nothing of it is
// written while it wants a frontend another service holds
// (ErrFrontendConflict), or while the frontend or the backend map has no
// room for all of its entries (ErrMapFull; see Options.Frontends and
// Options.Backends). Services are admitted in a fixed order: those that are
// served (written, or found in the maps at start) before new ones, each
// group by name, each one that fits, so a new service never takes the room
// of one that is served and a restarted Proxy admits the ones its
// predecessor served. Of two services found at start with one frontend
// between them (only one can have been served), the one whose frontends
// and backends the maps hold whole goes first, whatever the names: a
// service that claims another's address does not take it over at a
// restart. A refused service waits, without costing a syscall,
// until what held it back changes: a frontend let go, or room made by a
// service removed or shrunk, which the waiting services take in the same
// Apply. The services that wait are a dataplane.Ledger of the Proxy's, by
// name, each held (no timed retry) as a *dataplane.ObjectError (Driver
// "proxy", Op "write", Kind "service", Reason ErrFrontendConflict,
// ErrMapFull or, for want of a service ID, ErrInvalidService); while
// services wait, Apply returns a *dataplane.PartialError with one such
// error per service (those refused by this Apply failed, the others
// waiting), and Status lists each. Entries (a write the kernel refuses)
// and interfaces and cgroup hooks whose attachment fails are retried alone
// at every Apply and reported in the same PartialError, each a
// *dataplane.ObjectError kept in a dataplane.Ledger (the maps' and the
// Proxy's) that counts its attempts; the earliest end of their backoff is
// the Apply's RetryAfter. Status tells what is
// programmed, and Stats gives the dataplane.DriverStats.
//
// Plan (a dataplane.Planner) lists what the next Apply would write, from
// Apply's own decisions and without writing: the map entries ("+ entry
// key → value", in hex as package bpf/maps says them) in Apply's order,
// then the attachments ("+ attach eth0 ingress np_ingress", "-
// attach veth3 egress" for an interface gone; classic tc filters are
// named so with " (tc)" after them: "+ attach eth0 ingress
// np_ingress (tc)", which makes the interface's clsact qdisc when it
// has none, "~ … (tc)" for a program replaced in place, "- attach veth3
// egress (tc)"). State (a dataplane.Stater)
// lists the entries and attachments held, what drifts from the desired
// ones and what fails. Both need the maps the first Apply opens, and fail
// with ErrNotApplied before it.
//
// Connections from other hosts that the Proxy sends to a backend on
// another node must return through this node: with Options.MasqueradeMark
// set, the program marks them and netfilter must masquerade marked
// packets. Put MasqueradeRule in the nat table's POSTROUTING, or give the
// mark to package masquerade (masquerade.Options.Marks), whose chain then
// masquerades them. Without a mark, give such services
// ExternalTrafficLocal.
//
// Close releases the Proxy's file descriptors and leaves the dataplane
// working: a new Proxy on the same PinDir adopts the maps (service IDs
// included) and, given the same services, writes no map entry; it takes
// over the pinned attachments (or the classic tc filters) by replacing
// their program in place, so traffic is never left untranslated.
// Cleanup detaches the programs and removes the maps, everything above.
//
// # Attach modes
//
// The tc programs go on an interface in one of two ways (Options.Attach;
// Status.Attach says which one is used):
//
//   - TCX (Linux 6.6 or later): two TCX links per interface, each pinned
//     in PinDir/links (ingress_<name> and egress_<name>). The pin keeps
//     the link, and its program, attached while no agent runs; a new Proxy
//     opens the pin and replaces the link's program in place.
//   - Classic tc (AttachTC; the fallback on older kernels): on each
//     direction of the interface's clsact qdisc, made when the interface
//     has none, a direct-action bpf filter at priority TCPriority and
//     handle TCHandle (both 0x4e50), named TCFilterPrefix and its program
//     ("nodeplane-np_ingress", "nodeplane-np_egress"). Classic tc
//     filters cannot be pinned, and need no pin: the qdisc holds them, and
//     their programs, for as long as the interface lives, whether an agent
//     runs or not. A new Proxy finds its filters by priority, handle and
//     name and replaces the program of each in place (a filter replace at
//     the same priority and handle, so traffic is never left
//     untranslated); one that already runs the loaded program (found so
//     after a resync: the program IDs are compared) is not written. Filters
//     of others on the same interface, at other priorities, are left alone
//     and run before or after the Proxy's by their priority (the programs
//     pass every packet they do not translate on to the next filter); one
//     at the Proxy's priority and handle holds that interface back: it
//     fails to attach (ErrAttach) and the filter stays. Detaching deletes
//     the Proxy's filters only, and then the clsact qdisc if no filter of
//     anyone is left on it. The filters are the Proxy's by their priority,
//     handle and name, not by PinDir: in this mode, one Proxy per network
//     namespace.
//
// With AttachAuto, the zero value, the first Apply probes the kernel once,
// inside the Proxy's namespace (a TCX attachment to an interface index no
// interface has: a kernel with TCX refuses the index, one without refuses
// TCX), and uses TCX when it has it, classic tc otherwise. A Proxy whose
// mode is not its predecessor's (after a kernel upgrade, or a changed
// option) attaches in its own mode first and then removes the other mode's
// attachments: an interface's TCX pins once it has the tc filters, an
// interface's tc filters once it is attached with TCX. The filters are
// found by a sweep of every interface of the namespace with a clsact
// qdisc, at the first Apply and after a resync, which also removes the
// Proxy's filters from interfaces it does not attach to (as the pins of
// those are removed). Every netlink call runs inside the Proxy's namespace
// (Options.Kernel.Do).
//
// # How it translates
//
// On the ingress of a pod's interface (packets leaving the pod) the
// program translates the connections the pod opens to a service's cluster
// IP. On the ingress of a host interface it translates connections from
// other hosts: to a NodePort on a node address, to an external IP, and to
// a cluster IP routed to this node. A service with ExternalTrafficLocal
// sends the connections that arrive on a host interface at a NodePort or
// an external IP to this node's backends only (and drops them when there
// is none), keeping the client's address; without it, a connection from
// another host sent to a backend on another node carries the masquerade
// mark. On the egress of both kinds of interface the program finds the
// replies of translated connections and puts the frontend back as their
// source.
//
// A service's backends are numbered local ones first (of them, the
// cluster.Backend.LocalOnly ones first), then by address. The first packet
// of a connection picks one at random: among the local ones when only
// those may serve it (ExternalTrafficLocal from other hosts,
// InternalTrafficLocal), else among all but the local-only ones, which
// serve the traffic kept on this node alone. The choice is remembered in the
// connection map (with the reverse entry for the replies), so every later
// packet goes to the same backend. A UDP flow whose backend was removed
// picks another one at its next packet; a TCP connection keeps its
// backend to the end (a terminating pod finishes what it serves, as with
// kube-proxy); the connections of the backends that stay keep theirs, even
// when removing one renumbers the others (among a service's first 64
// backends; further ones may re-pick). A new TCP connection (a bare SYN)
// on a reused client port always picks afresh. A service without backends
// of a frontend's family refuses that frontend's new connections when
// Options.RejectMark is set (the program passes them on with the mark and
// package serviceloop, given RejectMark, answers TCP with a reset and UDP
// with ICMP port unreachable, as kube-proxy does), and drops them
// otherwise.
//
// A service with InternalTrafficLocal sends the connections to its
// cluster IPs to this node's backends only (dropped without one); with
// SourceRanges, its LoadBalancerIPs take new connections only from those
// networks (np_src, an LPM trie keyed by service ID and client address,
// sized by Options.SourceRanges; written before the frontends that check
// it, removed after them); with
// AffinityTimeout, a client's new connections go to the backend its last
// one went to while that one was recent enough and the backend still
// serves at the same place (np_aff, an LRU map sized by
// Options.Affinities; the node's own processes, translated at connect(),
// count as one client). Counters returns, per service, the connections
// sent, packets and bytes translated both ways, and connections refused
// (np_svc_stats, per CPU, pinned: they survive a restart of the agent).
//
// # Local redirect
//
// By default every translated packet goes the node's usual way: routed,
// through netfilter (which sees the backend's address both ways, so its
// conntrack and rules work as for a direct connection), and out of the
// interface its route names. With Options.LocalRedirect, a pod's
// connection to a backend pod on the same node takes a shorter way: once
// translated at the client's veth, its packets go straight into the
// backend pod (bpf_redirect_peer onto the veth's other end; while the
// node has no neighbour entry for the pod yet, bpf_redirect_neigh, which
// makes one), and the backend's replies get the frontend back at the
// backend's veth and go straight into the client pod. Neither direction
// is routed or seen by netfilter: such a connection costs about what a
// direct one does (BenchmarkKernelServiceConnectSideBySide measures both),
// but netfilter's rules for pod-to-pod traffic — package policy's, the
// FORWARD chain's — do not apply to it. Use it only where nothing in
// netfilter needs to see that traffic. The backend pod's veth must be one
// of the Proxy's pod interfaces (PodInterfacePrefixes) with a route to the
// pod; connections to other backends, from host interfaces, hairpinned,
// masqueraded or sent by direct server return take the usual way.
// TestKernelProxyLocalRedirect drops everything netfilter forwards
// between two pods and shows their service connection still answers.
//
// # Consistent hashing
//
// With Options.Maglev, a new connection that arrives on a host interface
// (a node port, an external or load-balancer IP) picks its backend in its
// service's Maglev table rather than at random: the slot is a hash of the
// client's address, port and protocol, and every node computes the same
// table from the same backends, whatever their order or which of them are
// its own. A load balancer in front of the nodes may so send a client's
// connections through any node — or change node between them — and reach
// the same backend; a backend that comes or goes moves about 1/N of the
// clients (N backends), not all of them. Services with
// ExternalTrafficLocal (each node serves its own backends) or
// AffinityTimeout (the affinity decides) keep the random choice, as do
// connections from pods and from the node's own processes. The topology
// it needs: every node runs the same MaglevOptions.TableSize and sees the
// same backends (the same EndpointSlices), and the client's address
// reaches the nodes unchanged (no SNAT in front). A connection that
// changes node mid-way reaches the same backend, but with masquerading
// (Options.MasqueradeMark, for backends on other nodes) under the new
// node's address, which the backend's TCP does not know: it survives only
// to a backend on the node itself or without masquerading. Each table takes
// TableSize entries of np_maglev per service and family (kernel memory is
// taken per entry written: the map is not preallocated); a change of
// backends rewrites only the slots that change owner.
//
// # Direct server return
//
// With Options.DSR, a connection from outside to a node port, external or
// load-balancer IP that this node sends to a backend on another node is
// not masqueraded: its first packet (every UDP datagram) goes to the
// backend's node with the frontend address and port in an option — an
// IPv4 option of type 0x9e, or for IPv6 a destination options header with
// an option of type 0x1e, both of the experimental ranges and ignored by
// the backend's stack. That node's program (its Proxy must have DSR on
// too) takes the option on its host interface and writes the connection's
// pair of entries, and its replies leave that node with the frontend as
// their source, straight to the client: the reply traffic skips the node
// in front, and the backend sees the client's own address. The node in
// front keeps the forward entry alone (the client's acknowledgement of
// the handshake counts as the answer for the scanner's timeouts).
//
// The topology it needs: the packet reaches the backend's node on one of
// that Proxy's host interfaces (Options.HostInterfaces: the underlay when
// the nodes route each other's pod addresses directly, as the tests do;
// behind an overlay, its device must be listed there too); the network between the backend's node and the
// client lets a packet leave with another node's address as its source
// (no reverse-path or anti-spoofing filter drops it); the path MTU from
// the client to the backend's node carries the client's packets with the
// option (8 bytes, IPv6 24; on the first packet of a TCP connection, on
// every UDP datagram's first fragment): the node in front keeps no
// reverse entry, so an ICMP error it sends about a connection (packet too
// big from an overlay of a smaller MTU, say) names the backend, which the
// client cannot match, and path-MTU discovery does not work through it;
// and the underlay is trusted: a host that can send to
// a node's host interface can make it answer from any address with the
// option. Connections within the cluster (pods, the node's processes)
// are not affected.
//
// # Connection tracking
//
// The connection map evicts nothing, so a churn of short connections never
// pushes out an idle long-lived one (an LRU map would), and the two
// entries of a connection live and go together. The programs remove a TCP
// connection as it closes: at a RST either way, or at the packet that
// acknowledges the second FIN, once each end's FIN was acknowledged by the
// other (by sequence number, so that in a simultaneous close, where both
// ends acknowledge a FIN after sending their own, the entries stay for
// the last of those acknowledgements; a packet of the connection that
// comes later still — a retransmitted FIN — finds no entry and is taken
// for a new connection). Run, the scanner, removes the rest: connections idle past
// their timeout (Options.Conntrack: TCP established 24h, unanswered 2m,
// half-closed 1h, UDP 30s), UDP flows whose backend left the service
// (their clients pick another at once; the programs would at the next
// packet), and reverse entries left without their forward one. It looks
// at Conntrack.ScanBatch entries per Conntrack.ScanInterval and reports
// each full pass in Status().Conntrack: the entries and the map's fill
// level, what it removed, and the pass's cost. A new connection that
// finds the map full (Options.Connections) is dropped — its client
// retries — and counted (ConntrackStatus.Full); the live ones go on.
//
// ICMP and ICMPv6 errors about a translated connection (port unreachable,
// fragmentation needed or packet too big, time exceeded, parameter
// problem) are translated back on the same egress: the quoted packet gets
// the frontend as its destination again, and an error the backend itself
// sent comes from the frontend, so a UDP client learns the port is closed
// and path-MTU discovery works through a service.
//
// A pod that reaches a service of which it is a backend is sent to another
// backend when there is one. When it is the only one (hairpin), the
// program translates both ends: the pod's server sees the connection come
// from the frontend's address (the cluster IP, say) with the client's
// port, the client sees the replies come from the frontend, and both
// directions go straight back out of the pod's interface, without the
// host's routing or netfilter.
//
// # Connect-time translation
//
// Processes of the node's own network namespace (hostNetwork pods, the
// kubelet) send their packets out without crossing the ingress of any
// interface the tc programs are on. Their packets to a service that leave
// by an interface the programs are on (the service addresses routed out
// of a host interface, as a node's default route does) are translated at
// that interface's egress instead: np_egress picks a backend as for a
// pod, rewrites the destination and sends the packet out of the interface
// and to the next hop the routing table has for the backend (a local
// pod's veth, another node), and the backend's replies get the frontend
// back at the ingress they arrive on. A service without backends drops
// such packets (past netfilter, the reject mark would reach no rule), and
// a backend at an address of the node itself is not reached this way.
// Nor is a packet larger than the MTU of the interface its backend is
// routed out of (a node's packets to a service are sized for the
// interface the service address is routed out of, the backend may sit
// behind a tunnel of a smaller MTU): it is dropped, and path-MTU
// discovery cannot help, as the error would name the backend. Large
// datagrams of the node's own to a service need the connect-time
// translation below, where the socket talks to the backend itself.
//
// Better, set Options.Cgroup to a cgroup v2 directory that holds those
// processes (the node's root cgroup, or the parent cgroup of the pods):
// the Proxy attaches cgroup programs there that translate at the socket
// instead of the packet. connect() to a
// frontend connects to one of its backends, picked at random among all of
// them (ExternalTrafficLocal does not apply to local clients); sendmsg()
// on an unconnected UDP socket does the same for each datagram; a service
// without backends fails connect() and sendmsg() with EPERM. Since the
// packets then carry the backend's address from the start, no connection
// tracking is needed: the programs remember, per socket and backend, the
// frontend asked for, and recvmsg() and getpeername() show it again, so a
// UDP client sees its replies come from the service's address. Only
// sockets of the Proxy's network namespace (Options.Kernel) are touched:
// the programs compare the namespace's cookie, so processes of other
// namespaces in the same cgroup, pods included, are left to the tc
// programs, unless Options.ConnectTimePods is set. TCP and UDP only.
//
// With Options.ConnectTimePods the programs translate the sockets of every
// namespace in the cgroup, pods' included (give the cgroup that holds the
// pods, or the root one): a pod's connection to a service carries the
// backend's address from its first packet, so the tc programs have no
// entry to make, keep or remove for it — it does not depend on the
// connection map's room or timeouts — and netfilter, where network policy
// is enforced, sees the backend's address, as it does after kube-proxy's
// DNAT. What connect() cannot decide stays with the tc programs, per
// packet, so that a pod sees what it would see without the option: a
// service with session affinity or source ranges (both key on the
// client's address, which the socket may not have yet) and a service with
// no backend for the client (a reset or an ICMP error, with
// Options.RejectMark, rather than EPERM). A pod's connection to its own
// service may reach the pod itself, which the tc programs avoid while
// another backend exists. On the CPU a connection costs, the option
// saves little on this project's benchmark
// (BenchmarkKernelServiceConnectSideBySide: 1.123× a direct connection's
// p50 against 1.153× per packet; on the node's side of the connection,
// BenchmarkKernelServiceNodeCPUSideBySide, 0.80× what the nftables
// verdict map costs there against 0.89×, with 1.7 µs more in the client's
// connect()): connect() spends on the socket's reverse entry much of what
// the tc programs save, and they still see every packet (a pod's packet
// they find nothing for is looked up once, at the ingress, and passed at
// the egress without a lookup).
//
// The connect-time programs count the connections they translate (every
// datagram of an unconnected UDP socket is one) and the ones they refuse
// in the service's counters (Proxy.Counters); the packets and bytes of
// those connections cross no translation and are not counted. A connected UDP socket keeps the backend
// connect() gave it, also once that backend is gone;
// Options.ConnectTimeTCPOnly leaves UDP to the egress translation above,
// per datagram, so such a socket reaches another backend with its next
// datagram (the choice Felix's connect-time load balancing "TCP" makes).
//
// The attachments are pinned and taken over after a restart like the TCX
// ones (their program is replaced in place); a hook that fails to attach
// (the cgroup does not exist, say) is a partial error wrapping ErrAttach,
// retried, and holds back neither the other hooks nor the tc programs.
// Status.Interfaces lists "cgroup:" and the directory once every hook is
// attached. A Proxy started without Options.Cgroup detaches what an
// earlier one attached there, and Cleanup does too.
//
// # Fragments
//
// A datagram larger than the path's MTU leaves its sender in fragments,
// and only the first carries its ports. The programs record those ports
// (in np_frag, keyed by the fragment's addresses, protocol and IP
// identification) when they meet a first fragment, IPv4 or IPv6, and give
// them to the datagram's later fragments, which then take the first's way:
// the same connection entry, the same backend, the same addresses (their
// L4 header is the first's, so only their addresses change), the same
// redirect. Large UDP answers (DNS over UDP with EDNS, say) thus cross a
// service both ways, also by direct server return, hairpin and local
// redirect. With direct server return the option goes in the first
// fragment alone (IPv6: a destination options header before its fragment
// header), which the path MTU must leave room for, as for any packet that
// carries it. Limits: a later fragment that arrives before its datagram's
// first passes as it is (a sender sends them in order; a reordering link
// loses that datagram); a restart of the programs forgets the datagrams in
// flight.
//
// Known limits: a pod that is its service's only backend and reaches it
// (hairpin) cannot have two such connections from one source port to two
// ports of one frontend address that lead to the same target port (the
// server would see them as one); fragments are translated as "Fragments"
// says, with its limits; IPv6 packets with extension headers (but a
// destination options header, a fragment header, or the two in this
// order) are not translated; the node's own
// processes reach a load balancer IP with source ranges only when a range
// holds one of the node's addresses (as with kube-proxy), and the
// connect-time programs keep no session affinity per client but one for
// the whole node; a socket's frontend is
// shown back by recvmsg() and
// getpeername() only while np_sk_rev still holds it (an LRU sized by
// Options.Connections). Without TCX (before Linux 6.6) the programs are
// attached with classic tc ("Attach modes"), and with Options.Attach
// AttachTCX every interface fails to attach with an error wrapping
// ErrAttach and ErrNotSupported; on other operating systems Apply fails
// with ErrNotSupported.
//
// # What it never touches
//
// Anything outside PinDir but its own attachments (to interfaces — TCX
// links, or classic tc filters at its priority and handle with the clsact
// qdisc it makes when missing — and to Options.Cgroup next to any other
// cgroup program): no netfilter rule (the agent writes MasqueradeRule, or
// package masquerade does), no route, address or link, and no other tc or
// TCX program (its attachments go next to others on the same interface). In PinDir, only its maps and the
// directory PinDir/links: put nothing else there. New does no
// I/O, and the Proxy starts no goroutine.
package proxy
