// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
//
// Address helpers both objects use on the 16-byte addresses of nat.h.

#ifndef NODEPLANE_ADDR_H
#define NODEPLANE_ADDR_H

#include <linux/types.h>
#include <bpf/bpf_endian.h>

// np_addr_eq compares two 16-byte addresses.
static __always_inline int np_addr_eq(const __u8 *a, const __u8 *b)
{
	__u64 a0, a1, b0, b1;

	__builtin_memcpy(&a0, a, 8);
	__builtin_memcpy(&a1, a + 8, 8);
	__builtin_memcpy(&b0, b, 8);
	__builtin_memcpy(&b1, b + 8, 8);
	return a0 == b0 && a1 == b1;
}

// np_is_v4mapped tells whether a 16-byte address is ::ffff:a.b.c.d.
static __always_inline int np_is_v4mapped(const __u8 *a)
{
	__u64 hi;
	__u32 mid;

	__builtin_memcpy(&hi, a, 8);
	__builtin_memcpy(&mid, a + 8, 4);
	return hi == 0 && mid == bpf_htonl(0x0000ffff);
}

// np_addr_from4 writes the IPv4 address a (network byte order) as the
// 16-byte ::ffff:a.b.c.d.
static __always_inline void np_addr_from4(__u8 *addr, __be32 a)
{
	__u32 w[4] = {0, 0, bpf_htonl(0x0000ffff), a};

	__builtin_memcpy(addr, w, 16);
}

#endif
