// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
//
// The service maps both objects read: the frontends and the backends (the
// layouts are in nat.h). nat.c and sock.c are separate objects; the loader
// gives each the same pinned maps, so the sizes here are only defaults.

#ifndef NODEPLANE_SERVICE_MAPS_H
#define NODEPLANE_SERVICE_MAPS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "nat.h"

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

#endif
