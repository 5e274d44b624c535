// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
//
// The maps shared by nodeplane's service NAT program and its Go side
// (bpf/proxy/layout.go). Every address is 16 bytes: an IPv6 address as it
// is, an IPv4 address as an IPv4-mapped IPv6 address (::ffff:a.b.c.d), so
// one map serves both families. Ports are in network byte order. Every
// struct is packed by hand (explicit pad fields, no compiler padding) and
// its size is checked against the Go side by a test.

#ifndef NODEPLANE_NAT_H
#define NODEPLANE_NAT_H

#include <linux/types.h>

// A service frontend: a cluster IP, a node address with a node port, an
// external IP. Key of the frontend map.
struct np_fe_key {
	__u8 addr[16];
	__be16 port;
	__u8 proto; // IPPROTO_TCP, IPPROTO_UDP, IPPROTO_SCTP
	__u8 pad;
}; // 20 bytes

// np_fe_val.flags
#define NP_FE_EXTERNAL_LOCAL 0x1 // traffic from a host interface uses local backends only
#define NP_FE_NODEPORT 0x2       // frontend is a node address (reached from outside)
#define NP_FE_INTERNAL_LOCAL 0x4 // a cluster IP that uses local backends only (internalTrafficPolicy Local)
#define NP_FE_SOURCE_RANGES 0x8  // a load balancer IP that admits clients of np_src only
#define NP_FE_MAGLEV 0x10        // traffic from a host interface picks its backend in np_maglev
#define NP_FE_DSR 0x20           // traffic from a host interface to another node's backend goes there by DSR
#define NP_FE_SOURCE_NODE 0x40   // with NP_FE_SOURCE_RANGES: the ranges hold a node address (the node may connect)
// The flags' upper 16 bits: how many of the first backends serve the
// traffic kept on this node alone (a local terminating endpoint under
// externalTrafficPolicy Local while other nodes have ready ones):
// traffic spread over the cluster picks among the backends after them.
#define NP_FE_LOCAL_ONLY_SHIFT 16

// What a frontend leads to: the service ID and its backends. Backends
// 0..local_count-1 run on this node, local_count..count-1 elsewhere; of
// the local ones, the first flags >> NP_FE_LOCAL_ONLY_SHIFT serve the
// traffic kept on this node only.
// count == 0: the service has no ready backend and its packets are dropped.
struct np_fe_val {
	__u32 svc_id;
	__u32 count;
	__u32 local_count;
	__u32 flags;
	__u32 affinity; // session affinity timeout in seconds (sessionAffinity ClientIP); 0: none
}; // 20 bytes

// Key of the backend map: backend number ordinal of service svc_id.
struct np_be_key {
	__u32 svc_id;
	__u32 ordinal;
}; // 8 bytes

struct np_be_val {
	__u8 addr[16];
	__be16 port;
	__u16 flags; // np_maglev only: NP_BE_LOCAL
}; // 20 bytes

// A service's Maglev lookup table: slot (a hash of the client's address,
// port and protocol, modulo the table size) of service svc_id to a backend
// (struct np_be_val, with NP_BE_LOCAL for a backend on this node). Every
// node computes the same table from the same backends, so a client's
// connection reaches the same backend through whichever node it arrives
// at.
struct np_maglev_key {
	__u32 svc_id;
	__u32 slot;
}; // 8 bytes

#define NP_BE_LOCAL 0x1

// A connection tracked by the program, in the connection tracking map (a
// hash map without preallocation: nothing is evicted; a new connection
// that finds it full is dropped and counted). A forward entry is keyed by the client's packet as it arrived
// (client -> frontend) and holds the backend chosen for it; a reverse entry
// is keyed by the backend's reply (backend -> client) and holds the
// frontend to put back as the reply's source.
struct np_ct_key {
	__u8 src[16];
	__u8 dst[16];
	__be16 sport;
	__be16 dport;
	__u8 proto;
	__u8 pad[3];
}; // 40 bytes

// np_ct_val.flags
#define NP_CT_REVERSE 0x1 // a reverse entry
#define NP_CT_MASQ 0x2    // the connection is masqueraded by netfilter (mark set)
#define NP_CT_HAIRPIN 0x4 // a pod reaching itself through its service (see nat.c)
#define NP_CT_FIN 0x8      // a TCP FIN was seen in this entry's direction
#define NP_CT_REPLIED 0x10 // reverse: a reply was translated (the backend answered); DSR forward: the client acknowledged
#define NP_CT_DSR 0x20     // direct server return: forward on the node in front (no reverse entry there), both on the backend's node
#define NP_CT_NODE 0x40    // a connection of the node's own processes, translated at a host interface's egress
#define NP_CT_FIN_ACKED 0x80 // the other direction acknowledged this direction's FIN (fin_ack)

// The loopback interface's index, in every network namespace.
#define NP_LOOPBACK_IFINDEX 1

// Direct server return: the node in front sends a connection's first
// packet (every UDP datagram) to the backend's node with the frontend in
// an option: IPv4, an IP option (type NP_DSR_OPT4, 8 bytes: type, length,
// port, address); IPv6, a destination options header (8 + 24 bytes: next
// header, length 2, then option NP_DSR_OPT6 of 18 bytes: port, address,
// then a PadN of 2). Both types are of the experimental ranges (RFC 4727),
// the IPv6 one of the "skip if unknown" kind, so the backend's stack
// ignores them.
#define NP_DSR_OPT4 0x9e
#define NP_DSR_OPT4_LEN 8
#define NP_DSR_OPT6 0x1e
#define NP_DSR_OPT6_LEN 18
#define NP_DSR_HDR6_LEN 24

// A service's source range (loadBalancerSourceRanges): key of the LPM trie
// np_src, matched with the service ID (big-endian, so that it is the
// first 32 bits of every prefix) and the client's address.
struct np_src_key {
	__u32 prefixlen; // 32 + the range's length in the 16-byte address
	__be32 svc_id;
	__u8 addr[16];
}; // 24 bytes

// Session affinity: the backend a client's last new connection to a
// service went to, and when. Key and value of the affinity map np_aff
// (LRU: forgetting an affinity only makes a client pick afresh).
struct np_aff_key {
	__u32 svc_id;
	__u8 client[16];
}; // 20 bytes

struct np_aff_val {
	__u8 addr[16];
	__be16 port;
	__u16 pad;
	__u32 ordinal; // where the backend was then
	__u64 last;    // bpf_ktime_get_coarse_ns() of the client's last new connection
}; // 32 bytes

// A service's counters, per CPU, in np_svc_stats (keyed by service ID):
// the connections the programs sent to a backend, the packets and bytes
// they translated both ways, and the connections refused for want of a
// ready backend.
struct np_svc_stats {
	__u64 conns;
	__u64 packets;
	__u64 bytes;
	__u64 rejects;
}; // 32 bytes

// The counters of np_stats (a per-CPU array of __u64).
#define NP_STAT_CT_FULL 0x0 // new connections dropped: np_ct had no room
#define NP_STAT_CLOSED 0x1  // connections removed by the programs when they closed
#define NP_STAT_COUNT 0x2

struct np_ct_val {
	__u8 addr[16];  // forward: the backend; reverse: the frontend
	__be16 port;    // forward: the backend port; reverse: the frontend port
	__u16 pad;
	__u32 svc_id;   // the service (forward: to check the backend still exists)
	union {
		__u32 ordinal; // UDP forward: the backend's ordinal
		__u32 fin_ack; // TCP, once NP_CT_FIN is set: the acknowledgement number that acknowledges this direction's FIN
	};
	__u32 flags;
	__u64 last_seen; // bpf_ktime_get_coarse_ns() of the last packet
}; // 40 bytes

// Connect-time translation (sock.c): the cgroup programs rewrite a socket's
// destination from a frontend to a backend at connect() or sendmsg(), and
// remember, per socket (its cookie) and backend, which frontend it was, so
// recvmsg() and getpeername() can show the frontend again. Key of the
// socket reverse map np_sk_rev (LRU).
struct np_sk_key {
	__u64 cookie;   // bpf_get_socket_cookie() of the socket
	__u8 addr[16];  // the backend
	__be16 port;    // the backend port
	__u16 pad;
	__u32 pad2;
}; // 32 bytes

// The frontend the socket asked for.
struct np_sk_val {
	__u8 addr[16];
	__be16 port;
	__u16 pad;
}; // 20 bytes

#endif
