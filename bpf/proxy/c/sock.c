// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
//
// nodeplane's connect-time service translation: cgroup sock_addr programs
// for the processes of the node's own network namespace, whose packets
// never cross the ingress hooks of the tc programs (nat.c), and, when the
// loader says so, for those of the other namespaces in the cgroup (pods),
// whose connections then skip the per-packet translation.
//
//   np_connect4/6      connect(): a frontend becomes one of its backends
//   np_sendmsg4/6      sendmsg() on an unconnected UDP socket, per datagram
//   np_recvmsg4/6      recvmsg() on UDP: a backend's datagram shows the frontend
//   np_getpeername4/6  getpeername(): a translated socket shows the frontend
//
// The programs share np_fe and np_be with nat.c (the loader hands both the
// same pinned maps) and keep their own np_sk_rev: socket cookie and backend
// to the frontend the socket asked for. They count what they translate in
// np_svc_stats, as nat.c does. Only sockets of the network namespace whose
// cookie is netns_cookie are touched unless pods is set, so the programs
// may sit on a cgroup whose processes live in several namespaces.

#include <linux/bpf.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "nat.h"
#include "addr.h"
#include "service_maps.h"

char __license[] SEC("license") = "Dual BSD/GPL";

// One LRU list per CPU (BPF_F_NO_COMMON_LRU): a new entry, one per
// translated socket, then takes no lock shared by the CPUs (np_connect4 ran
// 1.1 µs instead of 1.95 µs with the common list, by the kernel's run-time
// statistics). Lookups still see every CPU's entries; each CPU evicts
// among its own.
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct np_sk_key);
	__type(value, struct np_sk_val);
	__uint(max_entries, 131072);
	__uint(map_flags, BPF_F_NO_COMMON_LRU);
} np_sk_rev SEC(".maps");

// Set by the loader: the cookie of the network namespace whose sockets are
// translated (SO_NETNS_COOKIE of a socket made in it).
volatile const __u64 netns_cookie = 0;

// Set by the loader: 1 to leave UDP alone (connect-time translation of
// TCP only). The node's datagrams to a service are then translated per
// packet by nat.c at the egress of the interface they leave by, so a flow
// whose backend goes picks another at its next datagram, connected
// socket or not.
volatile const __u32 tcp_only = 0;

// Set by the loader: 1 to translate the sockets of every other network
// namespace in the cgroup too (pods), as the tc programs would translate
// their packets. What the programs cannot decide at connect() is left to
// the tc programs: session affinity and source ranges (they need the
// client's address, which the socket may not have yet), and a service
// that has no backend for the client (the tc programs answer with a
// reset or an ICMP error where the node's sockets get EPERM).
volatile const __u32 pods = 0;

// Socket types, as in <linux/net.h> (which is not for BPF programs).
#define NP_SOCK_STREAM 1
#define NP_SOCK_DGRAM 2

// np_sk_proto returns the frontend protocol of the socket: TCP for a TCP
// stream socket, UDP for a UDP datagram socket, 0 for anything else (ping
// sockets, SCTP, raw sockets), which is left alone.
static __always_inline __u8 np_sk_proto(struct bpf_sock_addr *ctx)
{
	__u32 type = ctx->type, proto = ctx->protocol;

	if (type == NP_SOCK_STREAM && proto == IPPROTO_TCP)
		return IPPROTO_TCP;
	if (type == NP_SOCK_DGRAM && proto == IPPROTO_UDP)
		return IPPROTO_UDP;
	return 0;
}

// np_sk_get reads the user address of ctx as 16 bytes (IPv4 mapped).
static __always_inline void np_sk_get(struct bpf_sock_addr *ctx, int v6, __u8 *addr)
{
	__u32 w[4];

	if (!v6) {
		np_addr_from4(addr, ctx->user_ip4);
		return;
	}
	w[0] = ctx->user_ip6[0];
	w[1] = ctx->user_ip6[1];
	w[2] = ctx->user_ip6[2];
	w[3] = ctx->user_ip6[3];
	__builtin_memcpy(addr, w, 16);
}

// np_sk_set writes addr (16 bytes, IPv4 mapped for an IPv4 ctx) and port
// as the user address of ctx.
static __always_inline void np_sk_set(struct bpf_sock_addr *ctx, int v6, const __u8 *addr, __be16 port)
{
	__u32 w[4];

	__builtin_memcpy(w, addr, 16);
	if (v6) {
		ctx->user_ip6[0] = w[0];
		ctx->user_ip6[1] = w[1];
		ctx->user_ip6[2] = w[2];
		ctx->user_ip6[3] = w[3];
	} else {
		ctx->user_ip4 = w[3];
	}
	ctx->user_port = (__u32)port;
}

// np_sk_forward turns a destination that is a frontend into one of its
// backends, picked at random among all of them (a client inside the
// cluster has no externalTrafficPolicy), and remembers the frontend for
// the reverse programs. It returns 1 to let the call go on, 0 to fail it
// with EPERM: the service has no backend for a socket of the node, or
// none of the socket's family.
static __always_inline int np_sk_forward(struct bpf_sock_addr *ctx, int v6)
{
	struct np_fe_key fk = {};
	struct np_fe_val *fe;
	struct np_be_key bk = {};
	struct np_be_val *be;
	struct np_sk_key rk = {};
	struct np_sk_val rv = {};
	__u8 proto;
	__u32 count, first;
	__u64 now = 0;
	__u8 node_client[16] = {};
	int node = bpf_get_netns_cookie(ctx) == netns_cookie;

	if (!node && !pods)
		return 1;
	proto = np_sk_proto(ctx);
	if (!proto || (proto == IPPROTO_UDP && tcp_only))
		return 1;
	np_sk_get(ctx, v6, fk.addr);
	// user_port holds the port in network byte order in its low 16 bits.
	fk.port = (__be16)ctx->user_port;
	fk.proto = proto;
	fe = bpf_map_lookup_elem(&np_fe, &fk);
	if (!fe)
		return 1;
	if (!node && (fe->affinity || (fe->flags & NP_FE_SOURCE_RANGES) || fe->count == 0 ||
		      ((fe->flags & NP_FE_INTERNAL_LOCAL) && fe->local_count == 0)))
		return 1; // a pod's, left to the tc programs (see pods)
	// A load balancer IP with source ranges: the node's processes may
	// reach it when a range holds one of the node's addresses (the
	// socket has none yet to check).
	if ((fe->flags & (NP_FE_SOURCE_RANGES | NP_FE_SOURCE_NODE)) == NP_FE_SOURCE_RANGES)
		return 0;
	// internalTrafficPolicy Local: this node's backends only; else those
	// after the local-only ones.
	first = 0;
	count = fe->local_count;
	if (!(fe->flags & NP_FE_INTERNAL_LOCAL)) {
		first = np_first_backend(fe);
		count = fe->count > first ? fe->count - first : 0;
	}
	if (count == 0) {
		np_svc_add(fe->svc_id, 0, 0, 0, 1);
		return 0;
	}
	bk.svc_id = fe->svc_id;
	// Session affinity: the node's processes are one client (the socket
	// has no source address yet at connect()). The clock is read only for
	// it.
	if (fe->affinity)
		now = bpf_ktime_get_coarse_ns();
	if (!np_affine(fe, first, count, node_client, now, &bk.ordinal))
		bk.ordinal = first + bpf_get_prandom_u32() % count;
	be = bpf_map_lookup_elem(&np_be, &bk);
	if (!be)
		return 0;
	np_remember(fe, node_client, be, bk.ordinal, now);
	__builtin_memcpy(rk.addr, be->addr, 16);
	rk.port = be->port;
	// An IPv4 destination (also one mapped on an IPv6 socket) needs an
	// IPv4 backend, an IPv6 one an IPv6 backend.
	if (np_is_v4mapped(rk.addr) != np_is_v4mapped(fk.addr))
		return 0;
	rk.cookie = bpf_get_socket_cookie(ctx);
	__builtin_memcpy(rv.addr, fk.addr, 16);
	rv.port = fk.port;
	bpf_map_update_elem(&np_sk_rev, &rk, &rv, BPF_ANY);
	np_sk_set(ctx, v6, rk.addr, rk.port);
	// A connected socket's connection; an unconnected UDP socket's
	// datagram counts as one too, as each is a new choice of backend.
	np_svc_add(fe->svc_id, 0, 0, 1, 0);
	return 1;
}

// np_sk_reverse shows the frontend in place of the backend a translated
// socket talks to. It always lets the call go on.
static __always_inline int np_sk_reverse(struct bpf_sock_addr *ctx, int v6)
{
	struct np_sk_key rk = {};
	struct np_sk_val *rv;
	__u8 addr[16];
	__be16 port;

	if (!pods && bpf_get_netns_cookie(ctx) != netns_cookie)
		return 1;
	rk.cookie = bpf_get_socket_cookie(ctx);
	np_sk_get(ctx, v6, rk.addr);
	rk.port = (__be16)ctx->user_port;
	rv = bpf_map_lookup_elem(&np_sk_rev, &rk);
	if (!rv)
		return 1;
	__builtin_memcpy(addr, rv->addr, 16);
	port = rv->port;
	if (np_is_v4mapped(addr) != np_is_v4mapped(rk.addr))
		return 1;
	np_sk_set(ctx, v6, addr, port);
	return 1;
}

SEC("cgroup/connect4")
int np_connect4(struct bpf_sock_addr *ctx)
{
	return np_sk_forward(ctx, 0);
}

SEC("cgroup/connect6")
int np_connect6(struct bpf_sock_addr *ctx)
{
	return np_sk_forward(ctx, 1);
}

SEC("cgroup/sendmsg4")
int np_sendmsg4(struct bpf_sock_addr *ctx)
{
	return np_sk_forward(ctx, 0);
}

SEC("cgroup/sendmsg6")
int np_sendmsg6(struct bpf_sock_addr *ctx)
{
	return np_sk_forward(ctx, 1);
}

SEC("cgroup/recvmsg4")
int np_recvmsg4(struct bpf_sock_addr *ctx)
{
	return np_sk_reverse(ctx, 0);
}

SEC("cgroup/recvmsg6")
int np_recvmsg6(struct bpf_sock_addr *ctx)
{
	return np_sk_reverse(ctx, 1);
}

SEC("cgroup/getpeername4")
int np_getpeername4(struct bpf_sock_addr *ctx)
{
	return np_sk_reverse(ctx, 0);
}

SEC("cgroup/getpeername6")
int np_getpeername6(struct bpf_sock_addr *ctx)
{
	return np_sk_reverse(ctx, 1);
}
