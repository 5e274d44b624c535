// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
//
// The service maps both objects use: the frontends, the backends, the
// session affinities and the per-service counters (the layouts are in
// nat.h). nat.c and sock.c are separate objects; the loader
// gives each the same pinned maps, so the sizes here are only defaults.

#ifndef NODEPLANE_SERVICE_MAPS_H
#define NODEPLANE_SERVICE_MAPS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "nat.h"
#include "addr.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct np_fe_key);
	__type(value, struct np_fe_val);
	__uint(max_entries, 65536);
} np_fe SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct np_be_key);
	__type(value, struct np_be_val);
	__uint(max_entries, 262144);
} np_be SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct np_aff_key);
	__type(value, struct np_aff_val);
	__uint(max_entries, 65536);
} np_aff SEC(".maps");

// Per-service counters (struct np_svc_stats), by service ID.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__type(key, __u32);
	__type(value, struct np_svc_stats);
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} np_svc_stats SEC(".maps");

// np_svc_add adds packets packets of len bytes, a new connection (conn)
// and a refused one (reject) to service svc_id's counters.
static __always_inline void np_svc_add(__u32 svc_id, __u32 packets, __u32 len, int conn, int reject)
{
	struct np_svc_stats *st;

	if (svc_id == 0) // a connection direct server return brought: the service is the other node's
		return;
	st = bpf_map_lookup_elem(&np_svc_stats, &svc_id);
	if (!st) {
		struct np_svc_stats zero = {};

		bpf_map_update_elem(&np_svc_stats, &svc_id, &zero, BPF_NOEXIST);
		st = bpf_map_lookup_elem(&np_svc_stats, &svc_id);
		if (!st)
			return;
	}
	st->packets += packets;
	st->bytes += len;
	st->conns += conn;
	st->rejects += reject;
}

// How many of a service's backends a remembered backend is looked for
// among when it is no longer at its ordinal.
#define NP_BACKEND_SEARCH 64

// np_search_backend returns the ordinal of backend a0a1a2a3:port (the
// address as four 32-bit words, the port in the low 16 bits of svc_port,
// the service ID in its high 32) among the service's first
// NP_BACKEND_SEARCH ordinals, or -1. A global function: the verifier checks
// it once, not at every place it is called from (which would cost it a
// state per iteration and call site).
__attribute__((noinline)) int np_search_backend(__u64 svc_port, __u32 a0, __u32 a1, __u32 a2, __u32 a3)
{
	struct np_be_key bk = {.svc_id = (__u32)(svc_port >> 32)};
	__be16 port = (__be16)(svc_port & 0xffff);
	struct np_be_val *be;
	__u32 w[4];

	for (__u32 i = 0; i < NP_BACKEND_SEARCH; i++) {
		bk.ordinal = i;
		be = bpf_map_lookup_elem(&np_be, &bk);
		if (!be)
			return -1;
		__builtin_memcpy(w, be->addr, 16);
		if (be->port == port && w[0] == a0 && w[1] == a1 && w[2] == a2 && w[3] == a3)
			return i;
	}
	return -1;
}

// np_first_backend is the first ordinal of the backends that traffic
// spread over the cluster picks among: after the local-only ones.
static __always_inline __u32 np_first_backend(const struct np_fe_val *fe)
{
	return fe->flags >> NP_FE_LOCAL_ONLY_SHIFT;
}

// np_affine sets *ordinal to the backend that the last new connection of
// client to service fe went to, when the service has session affinity,
// that connection is recent enough, and the backend is still among the
// n from ordinal first on of the service: at the ordinal remembered, or
// else (the backends were renumbered: one added or removed before it)
// found among the service's first NP_BACKEND_SEARCH ordinals, whose place
// it then remembers. It returns 1 then, else 0.
static __always_inline int np_affine(const struct np_fe_val *fe, __u32 first, __u32 n, const __u8 *client, __u64 now,
				     __u32 *ordinal)
{
	struct np_aff_key ak = {.svc_id = fe->svc_id};
	struct np_be_key bk = {.svc_id = fe->svc_id};
	struct np_aff_val *av;
	struct np_be_val *be;
	__u32 w[4];
	int i;

	if (!fe->affinity)
		return 0;
	__builtin_memcpy(ak.client, client, 16);
	av = bpf_map_lookup_elem(&np_aff, &ak);
	if (!av || now - av->last > (__u64)fe->affinity * 1000000000ULL)
		return 0;
	if (av->ordinal >= first && av->ordinal - first < n) {
		bk.ordinal = av->ordinal;
		be = bpf_map_lookup_elem(&np_be, &bk);
		if (be && be->port == av->port && np_addr_eq(be->addr, av->addr)) {
			*ordinal = bk.ordinal;
			return 1;
		}
	}
	__builtin_memcpy(w, av->addr, 16);
	i = np_search_backend(((__u64)fe->svc_id << 32) | av->port, w[0], w[1], w[2], w[3]);
	if (i < 0 || (__u32)i < first || (__u32)i - first >= n)
		return 0;
	av->ordinal = i;
	*ordinal = i;
	return 1;
}

// np_remember records that client's new connection to service fe went to
// backend be at ordinal, when the service has session affinity.
static __always_inline void np_remember(const struct np_fe_val *fe, const __u8 *client, const struct np_be_val *be,
					__u32 ordinal, __u64 now)
{
	struct np_aff_key ak = {.svc_id = fe->svc_id};
	struct np_aff_val av = {};

	if (!fe->affinity)
		return;
	__builtin_memcpy(ak.client, client, 16);
	__builtin_memcpy(av.addr, be->addr, 16);
	av.port = be->port;
	av.ordinal = ordinal;
	av.last = now;
	bpf_map_update_elem(&np_aff, &ak, &av, BPF_ANY);
}

#endif
