// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
//
// nodeplane's service NAT: a tc program pair that replaces kube-proxy's
// DNAT for cluster IPs, node ports and external IPs.
//
//   np_ingress  ingress of a pod's host-side veth (packets leaving a pod) and
//               of a host interface (packets from other nodes; np_ifs tells
//               the two kinds apart)
//   np_egress   egress of both: puts the frontend back on replies
//
// One program serves both kinds of ingress, so the verifier checks the
// forward NAT once for them (its work is most of the proxy's start).
// np_ingress picks a backend for a new connection, remembers the choice in
// np_ct (a forward entry for the client's direction, a reverse entry for
// the backend's replies) and rewrites the destination. np_egress finds the
// reverse entry of a reply and rewrites its source. A pod whose connection
// goes to itself (it is its service's only backend) is hairpinned by
// np_ingress alone: see np_hairpin. All headers are read with
// bpf_skb_load_bytes into the stack and written back with
// bpf_skb_store_bytes, so non-linear skbs work and the verifier needs no
// packet bounds proofs. The map layouts are in nat.h.

#include <stddef.h>
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "nat.h"
#include "addr.h"
#include "service_maps.h"

char __license[] SEC("license") = "Dual BSD/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct np_ct_key);
	__type(value, struct np_ct_val);
	__uint(max_entries, 131072);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} np_ct SEC(".maps");

// Fragments: only a datagram's first fragment carries its ports, which the
// programs need to find its connection. np_parse records them, keyed by
// the fragment's addresses, protocol and identification, when it meets a
// first fragment, and gives them to the later fragments of the same
// datagram, which then follow the first: translated the same way, their
// addresses only (their L4 header is in the first). A later fragment that
// arrives before its first (they leave a sender in order) passes as it
// is. LRU: a datagram's entry outlives its fragments and is pushed out by
// newer ones. Not pinned: a restart loses the datagrams in flight only.
struct np_frag_key {
	__u8 src[16];
	__u8 dst[16];
	__be32 id;
	__u8 proto;
	__u8 pad[3];
};

struct np_frag_ports {
	__be16 sport;
	__be16 dport;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct np_frag_key);
	__type(value, struct np_frag_ports);
	__uint(max_entries, 8192);
} np_frag SEC(".maps");

// The services' source ranges (struct np_src_key → 1).
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__type(key, struct np_src_key);
	__type(value, __u8);
	__uint(max_entries, 16384);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} np_src SEC(".maps");

// The Maglev lookup tables (struct np_maglev_key → struct np_be_val) of
// the services whose frontends have NP_FE_MAGLEV.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct np_maglev_key);
	__type(value, struct np_be_val);
	__uint(max_entries, 262144);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} np_maglev SEC(".maps");

// The interfaces the programs are on (ifindex -> NP_IF_HOST or NP_IF_POD),
// written by the agent before it attaches them: what arrives on a host
// interface comes from outside the node (externalTrafficPolicy Local,
// Maglev, direct server return and masquerading apply), and a pod
// interface is where local_redirect may send a packet straight to.
#define NP_IF_HOST 1
#define NP_IF_POD 2
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, 4096);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} np_ifs SEC(".maps");

// Set by the loader: the size of every Maglev table (a prime); 0 when the
// tables are off.
volatile const __u32 maglev_size = 0;

// Counters the agent reads (NP_STAT_* in nat.h).
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, NP_STAT_COUNT);
} np_stats SEC(".maps");

// Set by the loader (CollectionSpec.Variables): the mark bits that make
// netfilter masquerade a connection sent to a backend on another node.
// masq_mark == 0 turns masquerading off.
volatile const __u32 masq_mark = 0;
volatile const __u32 masq_mask = 0;

// Set by the loader too: the mark bits that make netfilter reject a
// connection to a service without a ready backend (TCP with a reset,
// others with ICMP port unreachable), as kube-proxy does. reject_mark == 0
// drops such packets instead.
volatile const __u32 reject_mark = 0;
volatile const __u32 reject_mask = 0;

// Set by the loader: 1 when direct server return is on — the frontends
// with NP_FE_DSR send their connections to backends on other nodes with
// the frontend in an option, and a host interface's program takes such
// options as the frontend to answer from.
volatile const __u32 dsr_enabled = 0;

// Set by the loader: 1 when a pod's connection to a backend pod on this
// node, and its replies, go from one pod's interface to the other's
// straight (bpf_redirect_peer, or bpf_redirect_neigh while the neighbour
// is not known), past the node's routing and netfilter.
volatile const __u32 local_redirect = 0;

#define NP_L3_OFF ETH_HLEN
#define NP_TCP_CSUM_OFF 16 // offsetof(struct tcphdr, check)
#define NP_UDP_CSUM_OFF 6  // offsetof(struct udphdr, check)
#define NP_TCP_FLAGS_OFF 13
#define NP_TCP_FIN 0x01
#define NP_TCP_SYN 0x02
#define NP_TCP_RST 0x04
#define NP_TCP_ACK 0x10
#define NP_IPV4_FRAG_OFFSET 0x1fff
#define NP_IPV4_MF 0x2000
#define NP_IPPROTO_DSTOPTS 60
#define NP_IPPROTO_FRAGMENT 44
#define NP_IPV6_FRAG_OFFSET 0xfff8
#define NP_IPV6_MF 0x0001

// np_pkt.frag
#define NP_FRAG_FIRST 1 // the first fragment of a datagram: its L4 header is there
#define NP_FRAG_LATER 2 // a later fragment: no L4 header; its ports are its first's

// BPF_F_IPV6 for bpf_l4_csum_replace (Linux 6.16+): tells the helper that a
// size-0 pseudo-header update is IPv6, so it keeps skb->csum right on
// CHECKSUM_COMPLETE skbs. Older headers lack it, and older kernels reject it
// with -EINVAL, in which case the update is made again without it.
#define NP_F_IPV6 (1ULL << 7)

// What the programs need to know about a packet once it is parsed.
struct np_pkt {
	struct np_ct_key key; // the packet's own tuple, addresses as 16 bytes
	__u32 l4_off;         // offset of the TCP/UDP header
	__u32 csum_off;       // offset of the TCP/UDP checksum
	__u8 v6;              // IPv6 (else IPv4)
	__u8 tcp_flags;       // TCP flags byte, 0 for UDP
	__u8 opt_len;         // IPv4: the options' length; IPv6: the extension headers' (destination options, fragment)
	__u8 frag;            // NP_FRAG_FIRST, NP_FRAG_LATER, or 0 for a whole packet
	__u16 ip_check;       // IPv4: the header checksum, as in the packet
	__u32 ack;            // TCP: the acknowledgement number (host order)
	__u32 fin_ack;        // TCP: the acknowledgement number that acknowledges this packet's FIN
};

// np_frag_fn records the ports of p, a datagram's first fragment whose
// identification is id, in np_frag, or (a later fragment) gives p the
// ports recorded for its datagram. It returns 0, or -1 for a later
// fragment whose first this program never saw. A global function: its
// stack stays out of np_forward's (see there).
__attribute__((noinline)) int np_frag_fn(struct np_pkt *p, __u32 id)
{
	struct np_frag_key k = {};
	struct np_frag_ports ports, *known;

	if (!p)
		return -1;
	__builtin_memcpy(k.src, p->key.src, 16);
	__builtin_memcpy(k.dst, p->key.dst, 16);
	k.id = id;
	k.proto = p->key.proto;
	if (p->frag == NP_FRAG_FIRST) {
		ports.sport = p->key.sport;
		ports.dport = p->key.dport;
		bpf_map_update_elem(&np_frag, &k, &ports, BPF_ANY);
		return 0;
	}
	known = bpf_map_lookup_elem(&np_frag, &k);
	if (!known)
		return -1;
	p->key.sport = known->sport;
	p->key.dport = known->dport;
	return 0;
}

// np_read_tcp fills p from th, the first 14 bytes of its TCP header (in
// the packet or a copy), l4_len the TCP segment's length: the ports, the
// flags, the acknowledgement number and the one that acknowledges this
// segment's FIN (its sequence number follows the segment's data).
static __always_inline void np_read_tcp(struct np_pkt *p, const __u8 *th, __u32 l4_len)
{
	__be32 seq, ack;

	__builtin_memcpy(&p->key.sport, th, 4);
	p->tcp_flags = th[NP_TCP_FLAGS_OFF];
	__builtin_memcpy(&seq, th + 4, 4);
	__builtin_memcpy(&ack, th + 8, 4);
	p->ack = bpf_ntohl(ack);
	p->fin_ack = bpf_ntohl(seq) + l4_len - (th[12] >> 4) * 4 + 1;
}

// np_parse_direct is np_parse for the common shapes, read in place from
// the packet's linear data (no helper calls): an IPv4 header without
// options that is no fragment, or an IPv6 header whose next header is TCP
// or UDP, and the TCP/UDP header after it, all in the linear part. It
// returns 0 with p filled, or 1 for a packet of any other shape, which
// np_parse then reads piece by piece (p is left for it to clear).
static __always_inline int np_parse_direct(struct __sk_buff *skb, struct np_pkt *p)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	__u8 *l4;
	__u32 l4_len;
	__u8 proto;

	if ((void *)(eth + 1) > end || eth->h_proto != skb->protocol)
		return 1;
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);

		if ((void *)(ip + 1) > end)
			return 1;
		if (ip->version != 4 || ip->ihl != 5 || (ip->frag_off & bpf_htons(NP_IPV4_FRAG_OFFSET | NP_IPV4_MF)))
			return 1;
		proto = ip->protocol;
		p->ip_check = ip->check;
		l4_len = bpf_ntohs(ip->tot_len) - sizeof(*ip);
		np_addr_from4(p->key.src, ip->saddr);
		np_addr_from4(p->key.dst, ip->daddr);
		l4 = (void *)(ip + 1);
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);

		if ((void *)(ip6 + 1) > end || ip6->version != 6)
			return 1;
		proto = ip6->nexthdr;
		p->v6 = 1;
		l4_len = bpf_ntohs(ip6->payload_len);
		__builtin_memcpy(p->key.src, &ip6->saddr, 16);
		__builtin_memcpy(p->key.dst, &ip6->daddr, 16);
		l4 = (void *)(ip6 + 1);
	} else {
		return 1;
	}
	p->l4_off = (__u32)(l4 - (__u8 *)data);
	if (proto == IPPROTO_TCP) {
		if (l4 + NP_TCP_FLAGS_OFF + 1 > (__u8 *)end)
			return 1;
		p->csum_off = p->l4_off + NP_TCP_CSUM_OFF;
		np_read_tcp(p, l4, l4_len);
	} else if (proto == IPPROTO_UDP) {
		if (l4 + 4 > (__u8 *)end)
			return 1;
		p->csum_off = p->l4_off + NP_UDP_CSUM_OFF;
		__builtin_memcpy(&p->key.sport, l4, 4);
	} else {
		return 1;
	}
	p->key.proto = proto;
	return 0;
}

// np_parse reads the Ethernet, IP and TCP/UDP headers. It returns 0 for a
// packet the programs handle and -1 for one to pass untouched: not IP, an
// IPv6 packet with extension headers other than a destination options
// header (which direct server return uses) and a fragment header, a
// protocol other than TCP and UDP, a truncated packet, or a later fragment
// of a datagram whose first fragment it did not see (np_frag_fn).
static __always_inline int np_parse(struct __sk_buff *skb, struct np_pkt *p)
{
	__be16 eth_proto;
	__u32 l4_len, frag_id = 0;
	__u8 proto;

	__builtin_memset(p, 0, sizeof(*p));
	if (np_parse_direct(skb, p) == 0)
		return 0;
	__builtin_memset(p, 0, sizeof(*p));
	// Read from the packet, not taken from skb->protocol: on an interface
	// without an Ethernet header (a tunnel's) the headers are not where the
	// programs look, and the two then differ.
	if (bpf_skb_load_bytes(skb, offsetof(struct ethhdr, h_proto), &eth_proto, sizeof(eth_proto)) < 0 ||
	    eth_proto != skb->protocol)
		return -1;
	if (eth_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr ip;

		if (bpf_skb_load_bytes(skb, NP_L3_OFF, &ip, sizeof(ip)) < 0)
			return -1;
		if (ip.version != 4 || ip.ihl < 5)
			return -1;
		if (ip.frag_off & bpf_htons(NP_IPV4_FRAG_OFFSET))
			p->frag = NP_FRAG_LATER;
		else if (ip.frag_off & bpf_htons(NP_IPV4_MF))
			p->frag = NP_FRAG_FIRST;
		frag_id = ip.id;
		proto = ip.protocol;
		p->l4_off = NP_L3_OFF + ip.ihl * 4;
		p->opt_len = (ip.ihl - 5) * 4;
		p->ip_check = ip.check;
		l4_len = bpf_ntohs(ip.tot_len) - ip.ihl * 4;
		np_addr_from4(p->key.src, ip.saddr);
		np_addr_from4(p->key.dst, ip.daddr);
	} else if (eth_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr ip6;

		if (bpf_skb_load_bytes(skb, NP_L3_OFF, &ip6, sizeof(ip6)) < 0)
			return -1;
		if (ip6.version != 6)
			return -1;
		// No extension headers but a destination options header, a
		// fragment header, or the two in this order (direct server return
		// puts its option before a fragment header): the next header must
		// be TCP or UDP.
		proto = ip6.nexthdr;
		p->l4_off = NP_L3_OFF + sizeof(ip6);
		if (proto == NP_IPPROTO_DSTOPTS) {
			__u8 h[2];

			if (bpf_skb_load_bytes(skb, p->l4_off, h, sizeof(h)) < 0)
				return -1;
			proto = h[0];
			p->opt_len = (h[1] + 1) * 8;
			p->l4_off += p->opt_len;
		}
		if (proto == NP_IPPROTO_FRAGMENT) {
			// Next header, reserved, offset and M flag, identification.
			struct {
				__u8 next;
				__u8 res;
				__be16 off;
				__be32 id;
			} fh;

			if (bpf_skb_load_bytes(skb, p->l4_off, &fh, sizeof(fh)) < 0)
				return -1;
			proto = fh.next;
			p->opt_len += sizeof(fh);
			p->l4_off += sizeof(fh);
			if (fh.off & bpf_htons(NP_IPV6_FRAG_OFFSET))
				p->frag = NP_FRAG_LATER;
			else if (fh.off & bpf_htons(NP_IPV6_MF))
				p->frag = NP_FRAG_FIRST;
			// (Neither: an atomic fragment, a whole datagram.)
			frag_id = fh.id;
		}
		p->v6 = 1;
		l4_len = bpf_ntohs(ip6.payload_len) - p->opt_len;
		__builtin_memcpy(p->key.src, &ip6.saddr, 16);
		__builtin_memcpy(p->key.dst, &ip6.daddr, 16);
	} else {
		return -1;
	}
	if (proto != IPPROTO_TCP && proto != IPPROTO_UDP)
		return -1;
	p->key.proto = proto;
	// A later fragment has no L4 header: its ports are its first's.
	if (p->frag == NP_FRAG_LATER)
		return np_frag_fn(p, frag_id);

	// Source and destination port are the first four bytes of both
	// headers; TCP's flags are byte 13 of its header: one read each.
	if (proto == IPPROTO_TCP) {
		__u8 th[NP_TCP_FLAGS_OFF + 1];

		p->csum_off = p->l4_off + NP_TCP_CSUM_OFF;
		if (bpf_skb_load_bytes(skb, p->l4_off, th, sizeof(th)) < 0)
			return -1;
		np_read_tcp(p, th, l4_len);
	} else {
		p->csum_off = p->l4_off + NP_UDP_CSUM_OFF;
		if (bpf_skb_load_bytes(skb, p->l4_off, &p->key.sport, 4) < 0)
			return -1;
	}
	if (p->frag == NP_FRAG_FIRST)
		np_frag_fn(p, frag_id);
	return 0;
}

// np_csum_replace4 is an IPv4 header checksum (as in the packet) after a
// 32-bit word of the header went from from to to (RFC 1624): the sum is
// of 16-bit words in whatever byte order they are read, which leaves a
// one's complement sum the same.
static __always_inline __u16 np_csum_replace4(__u16 check, __be32 from, __be32 to)
{
	__u32 sum = (__u16)~check;

	sum += (__u16)~(from & 0xffff) + (__u16)~(from >> 16) + (to & 0xffff) + (to >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (__u16)~sum;
}

// np_rewrite replaces the packet's destination (dst != 0) or source address
// and port with addr/port, fixing the IPv4 header checksum and the TCP/UDP
// checksum (whose pseudo header covers the addresses). The checksum helpers
// also do the right thing on CHECKSUM_PARTIAL skbs, where the L4 checksum
// field only holds the pseudo-header sum. For UDP, BPF_F_MARK_MANGLED_0
// leaves a zero (absent) checksum zero and turns a computed zero into 0xffff.
// The addresses and the ports are written back in one piece when they are
// adjacent (no IPv4 options, no IPv6 extension header): the IPv4 checksum,
// both addresses and both ports. A later fragment (no L4 header) gets its
// addresses only. Returns 0, or -1 when a helper failed.
//
// A global function, which the verifier checks once rather than at each of
// the places that call it (np_rewrite is its front): the new address comes
// as two 64-bit halves, the direction and the port as one word.
__attribute__((noinline)) int np_rewrite_fn(struct __sk_buff *skb, const struct np_pkt *p, __u32 dst_port,
					    __u64 addr_hi, __u64 addr_lo)
{
	int dst = dst_port >> 16;
	__be16 port = (__be16)(dst_port & 0xffff);
	// The header as it is to be: IPv4 from its checksum to the ports
	// (bytes 10 to 23), IPv6 from the source address to the ports (from
	// byte 8 on).
	union {
		struct {
			__u16 check;
			__be32 addrs[2];
			__be16 ports[2];
		} __attribute__((packed)) v4;
		struct {
			__u8 addrs[2][16];
			__be16 ports[2];
		} v6;
	} h;
	__u64 mangled;
	__be16 old_port;
	int changed, l4;

	if (!p)
		return -1;
	// A later fragment has no L4 header: its addresses only.
	l4 = p->frag != NP_FRAG_LATER;
	mangled = p->key.proto == IPPROTO_UDP ? BPF_F_MARK_MANGLED_0 : 0;
	old_port = dst ? p->key.dport : p->key.sport;
	if (!p->v6) {
		__be32 from, to = (__be32)(addr_lo >> 32);

		if (dst)
			__builtin_memcpy(&from, p->key.dst + 12, 4);
		else
			__builtin_memcpy(&from, p->key.src + 12, 4);
		changed = from != to;
		if (!changed && (old_port == port || !l4))
			return 0;
		if (changed && l4 &&
		    bpf_l4_csum_replace(skb, p->csum_off, from, to, BPF_F_PSEUDO_HDR | mangled | sizeof(to)) < 0)
			return -1;
		if (l4 && old_port != port &&
		    bpf_l4_csum_replace(skb, p->csum_off, old_port, port, mangled | sizeof(port)) < 0)
			return -1;
		h.v4.check = np_csum_replace4(p->ip_check, from, to);
		__builtin_memcpy(&h.v4.addrs[0], p->key.src + 12, 4);
		__builtin_memcpy(&h.v4.addrs[1], p->key.dst + 12, 4);
		if (dst)
			h.v4.addrs[1] = to;
		else
			h.v4.addrs[0] = to;
		h.v4.ports[0] = dst ? p->key.sport : port;
		h.v4.ports[1] = dst ? port : p->key.dport;
		if (p->opt_len == 0 && l4)
			return bpf_skb_store_bytes(skb, NP_L3_OFF + offsetof(struct iphdr, check), &h.v4, sizeof(h.v4), 0) < 0 ? -1 : 0;
		if (bpf_skb_store_bytes(skb, NP_L3_OFF + offsetof(struct iphdr, check), &h.v4, 10, 0) < 0)
			return -1;
	} else {
		const __u8 *old_addr;
		__u8 *new_addr;

		__builtin_memcpy(h.v6.addrs[0], p->key.src, 16);
		__builtin_memcpy(h.v6.addrs[1], p->key.dst, 16);
		if (dst) {
			old_addr = p->key.dst;
			new_addr = h.v6.addrs[1];
		} else {
			old_addr = p->key.src;
			new_addr = h.v6.addrs[0];
		}
		__builtin_memcpy(new_addr, &addr_hi, 8);
		__builtin_memcpy(new_addr + 8, &addr_lo, 8);
		h.v6.ports[0] = dst ? p->key.sport : port;
		h.v6.ports[1] = dst ? port : p->key.dport;
		changed = !np_addr_eq(new_addr, old_addr);
		if (!changed && (old_port == port || !l4))
			return 0;
		if (changed && l4) {
			__s64 diff = bpf_csum_diff((__be32 *)old_addr, 16, (__be32 *)new_addr, 16, 0);

			if (diff < 0)
				return -1;
			if (bpf_l4_csum_replace(skb, p->csum_off, 0, diff, BPF_F_PSEUDO_HDR | NP_F_IPV6 | mangled) < 0 &&
			    bpf_l4_csum_replace(skb, p->csum_off, 0, diff, BPF_F_PSEUDO_HDR | mangled) < 0)
				return -1;
		}
		if (l4 && old_port != port &&
		    bpf_l4_csum_replace(skb, p->csum_off, old_port, port, mangled | sizeof(port)) < 0)
			return -1;
		if (p->opt_len == 0 && l4)
			return bpf_skb_store_bytes(skb, NP_L3_OFF + offsetof(struct ipv6hdr, saddr), &h.v6, sizeof(h.v6), 0) < 0 ? -1 : 0;
		if (changed && bpf_skb_store_bytes(skb, NP_L3_OFF + offsetof(struct ipv6hdr, saddr), &h.v6, 32, 0) < 0)
			return -1;
	}
	if (l4 && old_port != port &&
	    bpf_skb_store_bytes(skb, p->l4_off + (dst ? 2 : 0), &port, sizeof(port), 0) < 0)
		return -1;
	return 0;
}

// np_rewrite is np_rewrite_fn's front: the destination (dst != 0) or the
// source of p becomes addr (16 bytes) and port.
static __always_inline int np_rewrite(struct __sk_buff *skb, const struct np_pkt *p, int dst,
				      const __u8 *addr, __be16 port)
{
	__u64 hi, lo;

	__builtin_memcpy(&hi, addr, 8);
	__builtin_memcpy(&lo, addr + 8, 8);
	return np_rewrite_fn(skb, p, ((__u32)(dst != 0) << 16) | port, hi, lo);
}

// np_swap_mac swaps the Ethernet source and destination: a frame the pod
// sent to the host veth goes back to the pod. Returns 0, or -1.
static __always_inline int np_swap_mac(struct __sk_buff *skb)
{
	__u8 mac[2 * ETH_ALEN], swapped[2 * ETH_ALEN];

	if (bpf_skb_load_bytes(skb, 0, mac, sizeof(mac)) < 0)
		return -1;
	__builtin_memcpy(swapped, mac + ETH_ALEN, ETH_ALEN);
	__builtin_memcpy(swapped + ETH_ALEN, mac, ETH_ALEN);
	if (bpf_skb_store_bytes(skb, 0, swapped, sizeof(swapped), 0) < 0)
		return -1;
	return 0;
}

// Hairpin: a pod that is the only backend of a service it connects to
// (client P:cp, frontend F:sp, backend P:tp) would get a packet from and
// to its own address, and could not tell the reply apart. np_ingress
// rewrites both ends instead and sends the packet straight back out of the
// same veth, never through the host's routing:
//
//   client -> server  P:cp -> F:sp  becomes  F:cp -> P:tp
//   server -> client  P:tp -> F:cp  becomes  F:sp -> P:cp
//
// The forward entry (keyed P:cp -> F:sp, flag NP_CT_HAIRPIN) and a hairpin
// reverse entry (keyed P:tp -> F:cp, flags NP_CT_REVERSE|NP_CT_HAIRPIN,
// holding F:sp) make both directions known. np_egress then sees the
// rewritten packets on the veth's egress; their tuples are no reverse
// entry's (those are keyed backend -> client), so it leaves them alone.

// np_hairpin rewrites the packet p's destination to dst:dport and its
// source to src:sport, swaps the MAC addresses and redirects the packet to
// the egress of the interface it came in on. p follows the first rewrite,
// which the second one writes back with its own.
static __always_inline int np_hairpin(struct __sk_buff *skb, struct np_pkt *p, const __u8 *dst,
				      __be16 dport, const __u8 *src, __be16 sport)
{
	__be32 from, to;

	if (np_rewrite(skb, p, 1, dst, dport) < 0)
		return TC_ACT_SHOT;
	__builtin_memcpy(&from, p->key.dst + 12, 4);
	__builtin_memcpy(&to, dst + 12, 4);
	if (!p->v6)
		p->ip_check = np_csum_replace4(p->ip_check, from, to);
	__builtin_memcpy(p->key.dst, dst, 16);
	p->key.dport = dport;
	if (np_rewrite(skb, p, 0, src, sport) < 0)
		return TC_ACT_SHOT;
	if (np_swap_mac(skb) < 0)
		return TC_ACT_SHOT;
	return bpf_redirect(skb->ifindex, 0);
}

// np_count adds one to counter idx of np_stats.
static __always_inline void np_count(__u32 idx)
{
	__u64 *n = bpf_map_lookup_elem(&np_stats, &idx);

	if (n)
		*n += 1;
}

// np_svc_count adds a packet of len bytes to service svc_id's counters,
// and a new connection (conn) or a refused one (reject).
static __always_inline void np_svc_count(__u32 svc_id, __u32 len, int conn, int reject)
{
	np_svc_add(svc_id, 1, len, conn, reject);
}

// np_rev_key fills rkey with the reverse entry's key of the connection
// whose client packet is key and whose backend is backend: the backend's
// replies, to the client (to the frontend address when hairpinned).
static __always_inline void np_rev_key(struct np_ct_key *rkey, const struct np_ct_key *key,
				       const struct np_be_val *backend, int hairpin)
{
	__builtin_memset(rkey, 0, sizeof(*rkey));
	__builtin_memcpy(rkey->src, backend->addr, 16);
	if (hairpin)
		__builtin_memcpy(rkey->dst, key->dst, 16);
	else
		__builtin_memcpy(rkey->dst, key->src, 16);
	rkey->sport = backend->port;
	rkey->dport = key->sport;
	rkey->proto = key->proto;
}

// np_fwd_key fills fkey with the forward entry's key of the (not
// hairpinned) connection whose reply is rkey and whose frontend is
// rev->addr:rev->port.
static __always_inline void np_fwd_key(struct np_ct_key *fkey, const struct np_ct_key *rkey,
				       const struct np_ct_val *rev)
{
	__builtin_memset(fkey, 0, sizeof(*fkey));
	__builtin_memcpy(fkey->src, rkey->dst, 16);
	__builtin_memcpy(fkey->dst, rev->addr, 16);
	fkey->sport = rkey->dport;
	fkey->dport = rev->port;
	fkey->proto = rkey->proto;
}

// np_closes says whether TCP packet p closes its connection, given the
// entry of its own direction (mine) and the key of the other direction's:
// a RST, or the packet that acknowledges the second of the two FINs — when
// each direction's FIN (NP_CT_FIN, with the acknowledgement number that
// acknowledges it in fin_ack) was acknowledged by the other
// (NP_CT_FIN_ACKED). Counting acknowledgements, not packets, keeps the
// entries until the last packet of a simultaneous close too, where each
// side acknowledges the other's FIN after sending its own. The programs
// then translate the packet and remove both entries.
static __always_inline int np_closes(const struct np_pkt *p, struct np_ct_val *mine, const struct np_ct_key *other)
{
	struct np_ct_val *o;

	if (p->tcp_flags & NP_TCP_RST)
		return 1;
	if (p->tcp_flags & NP_TCP_FIN) {
		mine->flags |= NP_CT_FIN;
		mine->fin_ack = p->fin_ack;
	}
	// Until this direction sent its FIN, nothing it acknowledges can be
	// the last packet.
	if (!(p->tcp_flags & NP_TCP_ACK) || !(mine->flags & NP_CT_FIN))
		return 0;
	o = bpf_map_lookup_elem(&np_ct, other);
	if (!o || !(o->flags & NP_CT_FIN))
		return 0;
	if (!(o->flags & NP_CT_FIN_ACKED) && (__s32)(p->ack - o->fin_ack) >= 0)
		o->flags |= NP_CT_FIN_ACKED;
	return (o->flags & NP_CT_FIN_ACKED) && (mine->flags & NP_CT_FIN_ACKED);
}

// np_set_masq marks the packet for netfilter's masquerade rule.
static __always_inline void np_set_masq(struct __sk_buff *skb)
{
	skb->mark = (skb->mark & ~masq_mask) | masq_mark;
}

// np_known_backend returns the backend of a known connection: the entry at
// its ordinal when it still holds the same backend, or else the same
// backend at another of the service's first NP_BACKEND_SEARCH ordinals —
// the agent numbers backends in order, so removing one moves those after
// it (np_be holds ordinals 0..count-1 with no gap: a miss ends the search).
// It records the new ordinal in ct. NULL: the backend is gone.
static __always_inline struct np_be_val *np_known_backend(struct np_ct_val *ct)
{
	struct np_be_key bk = {.svc_id = ct->svc_id, .ordinal = ct->ordinal};
	struct np_be_val *be;
	__u32 w[4];
	int i;

	be = bpf_map_lookup_elem(&np_be, &bk);
	if (be && be->port == ct->port && np_addr_eq(be->addr, ct->addr))
		return be;
	__builtin_memcpy(w, ct->addr, 16);
	i = np_search_backend(((__u64)ct->svc_id << 32) | ct->port, w[0], w[1], w[2], w[3]);
	if (i < 0)
		return NULL;
	bk.ordinal = i;
	be = bpf_map_lookup_elem(&np_be, &bk);
	if (be)
		ct->ordinal = i;
	return be;
}

// np_maglev_hash mixes the client's address, port and protocol into 32
// bits (the Go side's maglevHash computes the same). Only the client's
// side of the connection: every node in front of the service sees it the
// same, while the destination (a node address) differs.
static __always_inline __u32 np_maglev_hash(const struct np_ct_key *k)
{
	__u32 w[4], h = 0x9e3779b9;

	__builtin_memcpy(w, k->src, 16);
#pragma unroll
	for (int i = 0; i < 4; i++) {
		h ^= w[i];
		h *= 0x85ebca6b;
		h ^= h >> 13;
	}
	h ^= ((__u32)k->sport << 8) | k->proto;
	h *= 0xc2b2ae35;
	h ^= h >> 16;
	return h;
}

// np_maglev_pick returns the backend service svc_id's Maglev table holds
// for the client of key k, or NULL (no table, or tables off).
static __always_inline struct np_be_val *np_maglev_pick(__u32 svc_id, const struct np_ct_key *k)
{
	struct np_maglev_key mk = {.svc_id = svc_id};

	if (maglev_size == 0)
		return NULL;
	mk.slot = np_maglev_hash(k) % maglev_size;
	return bpf_map_lookup_elem(&np_maglev, &mk);
}

// np_dsr_insert adds the frontend fe:port in a direct server return
// option to packet p, after its fixed IP header (see nat.h). The IPv4
// header checksum follows. Returns 0, or -1: no room (IPv4 options of
// more than 32 bytes, an IPv6 packet that has a destination options
// header already) or a helper failed.
static __always_inline int np_dsr_insert(struct __sk_buff *skb, const struct np_pkt *p, const __u8 *fe, __be16 port)
{
	if (!p->v6) {
		__u8 old[4], hdr[12];
		__u16 tot;
		__s64 diff;

		if (p->opt_len > 40 - NP_DSR_OPT4_LEN || bpf_skb_load_bytes(skb, NP_L3_OFF, old, sizeof(old)) < 0)
			return -1;
		// Version and header length, TOS, total length; then the option.
		hdr[0] = old[0] + NP_DSR_OPT4_LEN / 4;
		hdr[1] = old[1];
		tot = ((__u16)old[2] << 8 | old[3]) + NP_DSR_OPT4_LEN;
		hdr[2] = tot >> 8;
		hdr[3] = tot & 0xff;
		hdr[4] = NP_DSR_OPT4;
		hdr[5] = NP_DSR_OPT4_LEN;
		__builtin_memcpy(hdr + 6, &port, 2);
		__builtin_memcpy(hdr + 8, fe + 12, 4);
		diff = bpf_csum_diff((__be32 *)old, sizeof(old), (__be32 *)hdr, sizeof(hdr), 0);
		if (diff < 0 || bpf_skb_adjust_room(skb, NP_DSR_OPT4_LEN, BPF_ADJ_ROOM_NET, 0) < 0)
			return -1;
		if (bpf_skb_store_bytes(skb, NP_L3_OFF, hdr, 4, 0) < 0 ||
		    bpf_skb_store_bytes(skb, NP_L3_OFF + sizeof(struct iphdr), hdr + 4, NP_DSR_OPT4_LEN, 0) < 0 ||
		    bpf_l3_csum_replace(skb, NP_L3_OFF + offsetof(struct iphdr, check), 0, diff, 0) < 0)
			return -1;
		return 0;
	}
	{
		__u8 h[NP_DSR_HDR6_LEN] = {}, fixed[8];
		__u16 plen;

		// Before a fragment header (the first fragment of a datagram),
		// else where nothing is.
		if (p->opt_len != (p->frag ? 8 : 0) || bpf_skb_load_bytes(skb, NP_L3_OFF, fixed, sizeof(fixed)) < 0)
			return -1;
		h[0] = fixed[6]; // the next header moves into ours
		h[1] = NP_DSR_HDR6_LEN / 8 - 1;
		h[2] = NP_DSR_OPT6;
		h[3] = NP_DSR_OPT6_LEN;
		__builtin_memcpy(h + 4, &port, 2);
		__builtin_memcpy(h + 6, fe, 16);
		h[22] = 1; // PadN of 0 bytes of data
		plen = ((__u16)fixed[4] << 8 | fixed[5]) + NP_DSR_HDR6_LEN;
		fixed[4] = plen >> 8;
		fixed[5] = plen & 0xff;
		fixed[6] = NP_IPPROTO_DSTOPTS;
		if (bpf_skb_adjust_room(skb, NP_DSR_HDR6_LEN, BPF_ADJ_ROOM_NET, 0) < 0 ||
		    bpf_skb_store_bytes(skb, NP_L3_OFF, fixed, sizeof(fixed), 0) < 0 ||
		    bpf_skb_store_bytes(skb, NP_L3_OFF + sizeof(struct ipv6hdr), h, sizeof(h), 0) < 0)
			return -1;
		return 0;
	}
}

// np_dsr_accept takes packet p, which a host interface received and no
// connection entry knows, as a connection that another node sent here by
// direct server return when it carries the option: it writes the pair of
// entries a translated connection has, keyed by the frontend the option
// names (forward: client to frontend, leading to the packet's destination;
// reverse: its replies), so that np_egress gives the replies the frontend
// as their source. It returns -1 when p carries no such option (the
// caller goes on), else the packet's verdict.
static __always_inline int np_dsr_accept(struct __sk_buff *skb, const struct np_pkt *p, __u64 now)
{
	struct np_ct_val fwd = {}, rev = {};
	struct np_ct_key fkey = {}, rkey;
	struct np_be_val backend = {};

	if (!p->v6) {
		__u8 o[NP_DSR_OPT4_LEN];

		if (p->opt_len < NP_DSR_OPT4_LEN ||
		    bpf_skb_load_bytes(skb, NP_L3_OFF + sizeof(struct iphdr), o, sizeof(o)) < 0 ||
		    o[0] != NP_DSR_OPT4 || o[1] != NP_DSR_OPT4_LEN)
			return -1;
		__builtin_memcpy(&fkey.dport, o + 2, 2);
		np_addr_from4(fkey.dst, *(__be32 *)(o + 4));
	} else {
		__u8 h[NP_DSR_HDR6_LEN];

		// (With a fragment header after it: a datagram's first fragment.)
		if (p->opt_len != NP_DSR_HDR6_LEN + (p->frag ? 8 : 0) ||
		    bpf_skb_load_bytes(skb, NP_L3_OFF + sizeof(struct ipv6hdr), h, sizeof(h)) < 0 ||
		    h[2] != NP_DSR_OPT6 || h[3] != NP_DSR_OPT6_LEN)
			return -1;
		__builtin_memcpy(&fkey.dport, h + 4, 2);
		__builtin_memcpy(fkey.dst, h + 6, 16);
	}
	// The frontend must be of the packet's family.
	if (np_is_v4mapped(fkey.dst) == p->v6)
		return TC_ACT_SHOT;
	__builtin_memcpy(fkey.src, p->key.src, 16);
	fkey.sport = p->key.sport;
	fkey.proto = p->key.proto;
	__builtin_memcpy(backend.addr, p->key.dst, 16);
	backend.port = p->key.dport;
	__builtin_memcpy(fwd.addr, backend.addr, 16);
	fwd.port = backend.port;
	fwd.flags = NP_CT_DSR;
	fwd.last_seen = now;
	np_rev_key(&rkey, &fkey, &backend, 0);
	__builtin_memcpy(rev.addr, fkey.dst, 16);
	rev.port = fkey.dport;
	rev.flags = NP_CT_REVERSE | NP_CT_DSR;
	rev.last_seen = now;
	if (bpf_map_update_elem(&np_ct, &fkey, &fwd, BPF_ANY) < 0) {
		np_count(NP_STAT_CT_FULL);
		return TC_ACT_SHOT;
	}
	if (bpf_map_update_elem(&np_ct, &rkey, &rev, BPF_ANY) < 0) {
		bpf_map_delete_elem(&np_ct, &fkey);
		np_count(NP_STAT_CT_FULL);
		return TC_ACT_SHOT;
	}
	return TC_ACT_UNSPEC;
}

// np_if_kind is the kind np_ifs has for the interface the packet is on:
// NP_IF_HOST, NP_IF_POD, or 0 for one it does not know.
static __always_inline __u32 np_if_kind(struct __sk_buff *skb)
{
	__u32 ifindex = skb->ifindex;
	__u32 *kind = bpf_map_lookup_elem(&np_ifs, &ifindex);

	return kind ? *kind : 0;
}

// np_from_host says whether the packet arrived on a host interface
// (np_ifs): it comes from outside the node. It returns a bit of the map's
// value rather than a constant, so that the verifier checks what follows
// once for an unknown value, not once per value.
static __always_inline __u32 np_from_host(struct __sk_buff *skb)
{
	return np_if_kind(skb) & NP_IF_HOST;
}

// np_route_fn looks up where dst, the packet's destination as it is to
// leave, is routed from the interface the packet is on, as a router would
// (an ingress lookup: an egress one would be held to that interface).
//
// node: the packet is one of the node's own, whose destination np_forward
// just rewrote at an egress; it returns the verdict that sends it out of
// the interface and to the next hop the routing table has for its new
// destination (a pod's veth, another host), as if routed so from the
// start (the packet must not be for the node itself).
//
// Else, for local_redirect: it returns the index of that interface when
// it is a pod's that the programs are on (np_ifs), with the packet's MAC
// addresses set for the pod (bpf_redirect_peer); its negative when the
// pod's neighbour entry is not there yet (bpf_redirect_neigh resolves it);
// 0 when the packet is not for a pod of this node.
//
// A global function (its lookup's 64 bytes of stack stay out of the
// programs' own, which the rewrite's add to), the destination as two
// 64-bit halves.
__attribute__((noinline)) int np_route_fn(struct __sk_buff *skb, const struct np_pkt *p, __u64 dst_hi,
					  __u64 dst_lo, int node)
{
	struct bpf_fib_lookup fib = {};
	__u32 *kind, ifindex;
	long rc;

	if (!p)
		return node ? TC_ACT_SHOT : 0;
	fib.l4_protocol = p->key.proto;
	fib.ifindex = skb->ifindex;
	if (!p->v6) {
		fib.family = 2; // AF_INET
		__builtin_memcpy(&fib.ipv4_src, p->key.src + 12, 4);
		__builtin_memcpy(&fib.ipv4_dst, (__u8 *)&dst_lo + 4, 4);
	} else {
		fib.family = 10; // AF_INET6
		__builtin_memcpy(fib.ipv6_src, p->key.src, 16);
		__builtin_memcpy(fib.ipv6_dst, &dst_hi, 8);
		__builtin_memcpy((__u8 *)fib.ipv6_dst + 8, &dst_lo, 8);
	}
	rc = bpf_fib_lookup(skb, &fib, sizeof(fib), 0);
	if (rc != BPF_FIB_LKUP_RET_SUCCESS && rc != BPF_FIB_LKUP_RET_NO_NEIGH)
		return node ? TC_ACT_SHOT : 0;
	if (node)
		return bpf_redirect_neigh(fib.ifindex, NULL, 0, 0);
	ifindex = fib.ifindex;
	kind = bpf_map_lookup_elem(&np_ifs, &ifindex);
	if (!kind || *kind != NP_IF_POD || ifindex == skb->ifindex)
		return 0;
	if (rc == BPF_FIB_LKUP_RET_NO_NEIGH)
		return -(int)ifindex;
	if (bpf_skb_store_bytes(skb, 0, fib.dmac, ETH_ALEN, 0) < 0 ||
	    bpf_skb_store_bytes(skb, ETH_ALEN, fib.smac, ETH_ALEN, 0) < 0)
		return 0;
	return (int)ifindex;
}

// np_route is np_route_fn's front.
static __always_inline int np_route(struct __sk_buff *skb, const struct np_pkt *p, const __u8 *dst, int node)
{
	__u64 hi, lo;

	__builtin_memcpy(&hi, dst, 8);
	__builtin_memcpy(&lo, dst + 8, 8);
	return np_route_fn(skb, p, hi, lo, node);
}

// np_local_send sends the packet to the pod interface np_route found
// (target).
static __always_inline int np_local_send(int target)
{
	if (target > 0)
		return bpf_redirect_peer(target, 0);
	return bpf_redirect_neigh(-target, NULL, 0, 0);
}

// np_to_node hands a reply to a connection of the node's own, which a
// local backend pod sent and np_reverse gave the frontend back as its
// source, to the node's stack through the loopback interface: arriving on
// the pod's veth, strict reverse-path filtering there (package endpoints
// sets it on pod interfaces, against spoofing) would drop it, as the
// frontend is not routed through that veth. The destination MAC becomes
// loopback's (zero), so that the stack takes the frame as its own.
static __always_inline int np_to_node(struct __sk_buff *skb)
{
	const __u8 zero[ETH_ALEN] = {};

	if (bpf_skb_store_bytes(skb, 0, zero, ETH_ALEN, 0) < 0)
		return TC_ACT_SHOT;
	return bpf_redirect(NP_LOOPBACK_IFINDEX, BPF_F_INGRESS);
}

// np_reverse puts the frontend back as the source of p, a backend's reply
// whose reverse entry is ct, and removes the connection when p closes it;
// fkey is room for the forward entry's key (the callers' stack is short).
// It returns TC_ACT_UNSPEC, or TC_ACT_SHOT for a reply it cannot rewrite.
static __always_inline int np_reverse(struct __sk_buff *skb, struct np_pkt *p, struct np_ct_val *ct, __u64 now,
				      struct np_ct_key *fkey)
{
	__u8 fe_addr[16];
	int closing = 0;

	ct->last_seen = now;
	if (!(ct->flags & NP_CT_REPLIED))
		ct->flags |= NP_CT_REPLIED; // the scanner's timeouts see an answered connection
	np_svc_count(ct->svc_id, skb->len, 0, 0);
	np_fwd_key(fkey, &p->key, ct);
	if (p->key.proto == IPPROTO_TCP)
		closing = np_closes(p, ct, fkey);
	__builtin_memcpy(fe_addr, ct->addr, 16);
	if (np_is_v4mapped(fe_addr) == p->v6 || np_rewrite(skb, p, 0, fe_addr, ct->port) < 0)
		return TC_ACT_SHOT;
	if (closing) {
		bpf_map_delete_elem(&np_ct, &p->key);
		bpf_map_delete_elem(&np_ct, fkey);
		np_count(NP_STAT_CLOSED);
	}
	return TC_ACT_UNSPEC;
}

// NP_TC_TRANSLATED in skb->tc_index: np_ingress translated this packet of
// a client to its backend, so np_egress, where it leaves, has nothing to
// undo and skips its lookup. np_ingress writes it and clears it on every
// other packet that carries it; np_egress clears it. (tc_index is tc's own
// field, which no other part of the kernel reads since Linux 6.3, when the
// tcindex classifier and the dsmark qdisc went.)
#define NP_TC_TRANSLATED 0x4e50

// NP_TC_UNTRACKED in skb->tc_index: np_ingress found nothing of ours for
// this packet of a pod (no connection entry, no frontend), so np_egress,
// where it leaves, skips its lookup too: only netfilter rewriting the
// packet in between could make a reverse entry match it there, and the
// rewrite the programs rely on (the masquerading of connections from
// outside) is undone on packets that arrive on a host interface, never
// marked. Written, read and cleared as NP_TC_TRANSLATED is.
#define NP_TC_UNTRACKED 0x4e51

// np_forward is the forward NAT of the programs. It runs at an interface's
// ingress: a pod's (packets from a pod) or a host's (np_from_host: packets
// from other hosts, with the host interface's rules — externalTrafficPolicy
// Local, Maglev, direct server return and masquerading of connections sent
// to a backend on another node), which it looks up only where they apply;
// or at an interface's egress for a packet of the node's own processes
// that nothing translated (node: the connect-time programs absent, or
// leaving UDP alone), which it sends where its new destination is routed.
//
// The verifier allows a program 512 bytes of stack together with the global
// functions it calls: np_ingress, np_forward inlined, takes 416 of them and
// np_rewrite_fn the rest. Keep new locals out of np_forward (or in a global
// function); a load that fails with "combined stack size" says so.
static __always_inline int np_forward(struct __sk_buff *skb, int node)
{
	int from_host = 0, pod = 0;
	struct np_pkt p;
	struct np_ct_val *ct;
	struct np_fe_key fk = {};
	struct np_fe_val *fe;
	struct np_be_key bk = {};
	struct np_be_val *be;
	struct np_be_val backend;
	struct np_ct_key rkey;
	struct np_ct_val cv;
	__u64 now;
	__u32 count, local_count, ordinal, n, first;
	int masq, hairpin, self, local, dsr = 0, closing = 0, new_conn = 0;
	__u32 svc_id;

	if (np_parse(skb, &p) < 0)
		return TC_ACT_UNSPEC;

	// A known connection keeps its backend as long as the backend is still
	// one of the service's (np_known_backend). A bare SYN starts a new connection (a
	// reused client port) and picks afresh.
	ct = bpf_map_lookup_elem(&np_ct, &p.key);

	// A connection another node sent here by direct server return.
	if (!ct && !node && dsr_enabled && p.opt_len && np_from_host(skb)) {
		int verdict = np_dsr_accept(skb, &p, bpf_ktime_get_coarse_ns());

		if (verdict >= 0)
			return verdict;
	}

	// A server's reply on a hairpinned connection (np_hairpin): back to
	// the client with the frontend as source, the client's port restored.
	if (!node && ct && (ct->flags & (NP_CT_REVERSE | NP_CT_HAIRPIN)) == (NP_CT_REVERSE | NP_CT_HAIRPIN) &&
	    !np_from_host(skb)) {
		__u8 fe_addr[16];
		__u8 client[16];
		__be16 fe_port = ct->port;

		ct->last_seen = bpf_ktime_get_coarse_ns();
		if (!(ct->flags & NP_CT_REPLIED))
			ct->flags |= NP_CT_REPLIED; // the scanner's timeouts see an answered connection
		np_svc_count(ct->svc_id, skb->len, 0, 0); // a reply, counted as np_reverse counts one
		__builtin_memcpy(fe_addr, ct->addr, 16);
		__builtin_memcpy(client, p.key.src, 16);
		if (np_is_v4mapped(fe_addr) == p.v6)
			return TC_ACT_SHOT;
		return np_hairpin(skb, &p, client, p.key.dport, fe_addr, fe_port);
	}

	// A backend's reply. To a connection of the node's own processes: it
	// is delivered on this node, so it gets the frontend back here, at the
	// ingress (np_egress never sees it). With local_redirect, to a client
	// pod of this node: it gets the frontend back here and goes straight to
	// the client's interface (np_egress is not on the way). Any other is
	// np_egress's to translate, where it leaves: no frontend to look up.
	if (ct && (ct->flags & NP_CT_REVERSE)) {
		int target = 0, verdict, to_node = (ct->flags & NP_CT_NODE) != 0;

		if (node)
			return TC_ACT_UNSPEC;
		if (!to_node) {
			if (!local_redirect || (ct->flags & (NP_CT_HAIRPIN | NP_CT_MASQ | NP_CT_DSR)))
				return TC_ACT_UNSPEC;
			target = np_route(skb, &p, p.key.dst, 0);
			if (!target)
				return TC_ACT_UNSPEC;
		}
		verdict = np_reverse(skb, &p, ct, bpf_ktime_get_coarse_ns(), &rkey);
		if (verdict != TC_ACT_UNSPEC)
			return verdict;
		if (to_node && !p.v6 && !np_from_host(skb))
			return np_to_node(skb);
		if (!target)
			return verdict;
		return np_local_send(target);
	}

	// A TCP connection keeps its backend even once the backend left the
	// service (a terminating pod finishes what it serves, as with
	// kube-proxy); a UDP flow picks another.
	if (ct && !(ct->flags & NP_CT_REVERSE) &&
	    !(p.key.proto == IPPROTO_TCP && (p.tcp_flags & (NP_TCP_SYN | NP_TCP_ACK)) == NP_TCP_SYN)) {
		// (TCP keeps its backend whatever the service holds: no lookup.)
		be = p.key.proto == IPPROTO_TCP ? NULL : np_known_backend(ct);
		if (be || p.key.proto == IPPROTO_TCP) {
			ct->last_seen = bpf_ktime_get_coarse_ns();
			masq = (ct->flags & NP_CT_MASQ) != 0;
			hairpin = (ct->flags & NP_CT_HAIRPIN) != 0;
			dsr = (ct->flags & NP_CT_DSR) != 0;
			// No reply crosses this node: the client's acknowledgement
			// (an ACK without SYN) says the connection was answered.
			if (dsr && (p.tcp_flags & (NP_TCP_SYN | NP_TCP_ACK)) == NP_TCP_ACK && !(ct->flags & NP_CT_REPLIED))
				ct->flags |= NP_CT_REPLIED;
			if (be) {
				__builtin_memcpy(&backend, be, sizeof(backend));
			} else {
				__builtin_memset(&backend, 0, sizeof(backend));
				__builtin_memcpy(backend.addr, ct->addr, 16);
				backend.port = ct->port;
			}
			if (p.key.proto == IPPROTO_TCP && !hairpin) {
				np_rev_key(&rkey, &p.key, &backend, 0);
				closing = np_closes(&p, ct, &rkey);
			}
			svc_id = ct->svc_id;
			goto dnat;
		}
	}

	// A later fragment follows its first, which found no connection to
	// translate (or one whose backend went away): nothing to start here.
	if (p.frag == NP_FRAG_LATER)
		return TC_ACT_UNSPEC;

	// A new connection (or one whose backend went away): is the
	// destination a service frontend?
	__builtin_memcpy(fk.addr, p.key.dst, 16);
	fk.port = p.key.dport;
	fk.proto = p.key.proto;
	fe = bpf_map_lookup_elem(&np_fe, &fk);
	// (from_host holds the interface's kind for a moment: no new local,
	// see the stack budget above.)
	if (!node)
		from_host = np_if_kind(skb);
	if (!fe) {
		// Only on an interface np_ifs knows as a pod's.
		if (!ct && from_host == NP_IF_POD)
			skb->tc_index = NP_TC_UNTRACKED;
		return TC_ACT_UNSPEC;
	}
	from_host &= NP_IF_HOST;
	pod = !from_host && !node;
	// A load balancer IP with source ranges admits their clients only.
	if (fe->flags & NP_FE_SOURCE_RANGES) {
		struct np_src_key sk = {.prefixlen = 32 + 128, .svc_id = bpf_htonl(fe->svc_id)};

		__builtin_memcpy(sk.addr, p.key.src, 16);
		if (!bpf_map_lookup_elem(&np_src, &sk))
			return TC_ACT_SHOT;
	}
	count = fe->count;
	local_count = fe->local_count;
	if (count == 0) {
		// No ready backend: netfilter answers the client (or, without a
		// reject mark, the packet is dropped).
		np_svc_count(fe->svc_id, skb->len, 0, 1);
		// (At an egress, past netfilter, a mark would reach no rule.)
		if (!reject_mark || node)
			return TC_ACT_SHOT;
		skb->mark = (skb->mark & ~reject_mask) | reject_mark;
		return TC_ACT_UNSPEC;
	}

	// Pick among the local backends only (externalTrafficPolicy Local,
	// traffic from outside; internalTrafficPolicy Local), or among those
	// after the local-only ones: n from ordinal first on.
	first = 0;
	n = local_count;
	if (!((from_host && (fe->flags & NP_FE_EXTERNAL_LOCAL)) || (fe->flags & NP_FE_INTERNAL_LOCAL))) {
		first = np_first_backend(fe);
		n = count > first ? count - first : 0;
	}
	if (n == 0)
		return TC_ACT_SHOT;
	// The backend the client's last connection went to (session
	// affinity), the one the service's Maglev table names for a client
	// from outside, or one at random.
	bk.svc_id = fe->svc_id;
	be = NULL;
	local = 0;
	now = bpf_ktime_get_coarse_ns();
	if (np_affine(fe, first, n, p.key.src, now, &ordinal)) {
		;
	} else if (from_host && (fe->flags & NP_FE_MAGLEV) && first + n == count && !fe->affinity &&
		   (be = np_maglev_pick(fe->svc_id, &p.key)) != NULL) {
		// Its ordinal is looked up by the connection's next packet
		// (np_known_backend): count is no ordinal.
		ordinal = count;
		local = (be->flags & NP_BE_LOCAL) != 0;
	} else {
		ordinal = first + bpf_get_prandom_u32() % n;
	}
	if (!be) {
		bk.ordinal = ordinal;
		be = bpf_map_lookup_elem(&np_be, &bk);
		if (!be)
			return TC_ACT_SHOT;
		local = ordinal < local_count;
	}
	// A pod that reaches its own service cannot be its own backend (the
	// reply would come from and go to the same address): take the next
	// backend when there is another (else np_hairpin).
	self = np_addr_eq(be->addr, p.key.src);
	if (self && n > 1) {
		ordinal = first + (ordinal - first + 1) % n;
		bk.ordinal = ordinal;
		be = bpf_map_lookup_elem(&np_be, &bk);
		if (!be)
			return TC_ACT_SHOT;
		self = np_addr_eq(be->addr, p.key.src);
		local = ordinal < local_count;
	}
	// Traffic from outside sent to another node must come back through
	// this node: netfilter masquerades it when it sees the mark.
	// Sent to another node by direct server return, which answers the
	// client itself; or the reply must come back through this node:
	// netfilter masquerades it when it sees the mark.
	dsr = from_host && !local && (fe->flags & NP_FE_DSR);
	masq = from_host && !local && !dsr && masq_mark != 0;
	// Still the client pod itself (it is the only backend): hairpin. The
	// node's own connection to itself is left alone (it is not routed
	// through an interface).
	if (node && self)
		return TC_ACT_UNSPEC;
	hairpin = pod && self;
	__builtin_memcpy(&backend, be, sizeof(backend));
	np_remember(fe, p.key.src, &backend, ordinal, now);

	// Remember the choice for the rest of the connection... (one value on
	// the stack for both entries: the stack is short)
	__builtin_memset(&cv, 0, sizeof(cv));
	__builtin_memcpy(cv.addr, backend.addr, 16);
	cv.port = backend.port;
	cv.svc_id = bk.svc_id;
	cv.ordinal = ordinal;
	cv.flags = (masq ? NP_CT_MASQ : 0) | (hairpin ? NP_CT_HAIRPIN : 0) | (dsr ? NP_CT_DSR : 0) | (node ? NP_CT_NODE : 0);
	cv.last_seen = now;
	// No room: the map never evicts a live connection to make some; the
	// new one is dropped (its client retries) and counted.
	if (bpf_map_update_elem(&np_ct, &p.key, &cv, BPF_ANY) < 0) {
		np_count(NP_STAT_CT_FULL);
		return TC_ACT_SHOT;
	}
	// ...and how to undo it on the backend's replies, which a hairpinned
	// connection's server sends to the frontend address (none by direct
	// server return: the backend's node answers).
	if (!dsr) {
		np_rev_key(&rkey, &p.key, &backend, hairpin);
		__builtin_memcpy(cv.addr, p.key.dst, 16);
		cv.port = p.key.dport;
		cv.ordinal = 0;
		cv.flags = NP_CT_REVERSE | (masq ? NP_CT_MASQ : 0) | (hairpin ? NP_CT_HAIRPIN : 0) | (node ? NP_CT_NODE : 0);
		if (bpf_map_update_elem(&np_ct, &rkey, &cv, BPF_ANY) < 0) {
			bpf_map_delete_elem(&np_ct, &p.key);
			np_count(NP_STAT_CT_FULL);
			return TC_ACT_SHOT;
		}
	}

	svc_id = bk.svc_id;
	new_conn = 1;
dnat:
	np_svc_count(svc_id, skb->len, new_conn, 0);
	// A backend of the other family cannot be reached by rewriting
	// addresses: the service is misconfigured, drop rather than mangle.
	if (np_is_v4mapped(backend.addr) == p.v6)
		return TC_ACT_SHOT;
	if (hairpin) {
		__u8 fe_addr[16];

		// The source becomes the frontend address, the client's port kept.
		__builtin_memcpy(fe_addr, p.key.dst, 16);
		return np_hairpin(skb, &p, backend.addr, backend.port, fe_addr, p.key.sport);
	}
	if (np_rewrite(skb, &p, 1, backend.addr, backend.port) < 0)
		return TC_ACT_SHOT;
	// The frontend goes with a connection's first packet (every
	// datagram, in its first fragment) to the backend's node.
	if (dsr && p.frag != NP_FRAG_LATER && (p.key.proto == IPPROTO_UDP || (p.tcp_flags & NP_TCP_SYN)) &&
	    np_dsr_insert(skb, &p, p.key.dst, p.key.dport) < 0)
		return TC_ACT_SHOT;
	if (masq)
		np_set_masq(skb);
	if (closing) {
		bpf_map_delete_elem(&np_ct, &p.key);
		bpf_map_delete_elem(&np_ct, &rkey);
		np_count(NP_STAT_CLOSED);
	}
	// The node's own packet goes where its new destination is routed;
	// with local_redirect, a pod's packet to a backend pod of this node
	// straight to the backend's interface.
	if (node || (local_redirect && !masq && !dsr && (pod || (!new_conn && !np_from_host(skb))))) {
		int target = np_route(skb, &p, backend.addr, node);

		if (node)
			return target;
		if (target)
			return np_local_send(target);
	}
	skb->tc_index = NP_TC_TRANSLATED;
	return TC_ACT_UNSPEC;
}

SEC("tc")
int np_ingress(struct __sk_buff *skb)
{
	if (skb->tc_index == NP_TC_TRANSLATED || skb->tc_index == NP_TC_UNTRACKED)
		skb->tc_index = 0; // not ours: set before this node (or forged)
	return np_forward(skb, 0);
}

// ICMP errors about a translated connection (port unreachable, fragmentation
// needed or packet too big, time exceeded, parameter problem) quote the
// packet that caused them as it left this node: from the client to the
// backend. np_icmp_error puts the frontend back in the quote (its
// destination address and port) and, when the backend itself sent the
// error, as the error's source, so that the client's stack matches it to
// its socket: a UDP client learns the port is closed, path-MTU discovery
// works through a service. The quoted packet's own L4 checksum is left as
// it is (no stack checks it); the ICMP checksum, which covers the quote,
// and the quoted IPv4 header's checksum follow every change.

#define NP_ICMP_DEST_UNREACH 3
#define NP_ICMP_TIME_EXCEEDED 11
#define NP_ICMP_PARAMETERPROB 12
#define NP_ICMP6_DEST_UNREACH 1
#define NP_ICMP6_PACKET_TOO_BIG 2
#define NP_ICMP6_TIME_EXCEED 3
#define NP_ICMP6_PARAMPROB 4
#define NP_IPPROTO_ICMPV6 58

// np_icmp_rev looks up the reverse entry of the connection whose packet
// the error quotes: its reply direction. NULL when it is none of ours.
static __always_inline struct np_ct_val *np_icmp_rev(const __u8 *qsrc, const __u8 *qdst, const __be16 *ports, __u8 proto)
{
	struct np_ct_key rk = {};
	struct np_ct_val *ct;

	__builtin_memcpy(rk.src, qdst, 16);
	__builtin_memcpy(rk.dst, qsrc, 16);
	rk.sport = ports[1];
	rk.dport = ports[0];
	rk.proto = proto;
	ct = bpf_map_lookup_elem(&np_ct, &rk);
	if (!ct || !(ct->flags & NP_CT_REVERSE) || (ct->flags & NP_CT_HAIRPIN))
		return NULL;
	return ct;
}

static __always_inline int np_icmp4_error(struct __sk_buff *skb)
{
	struct iphdr ip, in;
	struct np_ct_val *ct;
	__u8 qsrc[16], qdst[16], type;
	__be16 ports[2], fport, old_check, new_check;
	__be32 fe;
	__u32 icmp_off, in_off, l4_off, csum_off;

	if (bpf_skb_load_bytes(skb, NP_L3_OFF, &ip, sizeof(ip)) < 0 || ip.version != 4 || ip.ihl < 5 ||
	    ip.protocol != IPPROTO_ICMP || (ip.frag_off & bpf_htons(NP_IPV4_FRAG_OFFSET)))
		return TC_ACT_UNSPEC;
	icmp_off = NP_L3_OFF + ip.ihl * 4;
	if (bpf_skb_load_bytes(skb, icmp_off, &type, 1) < 0 ||
	    (type != NP_ICMP_DEST_UNREACH && type != NP_ICMP_TIME_EXCEEDED && type != NP_ICMP_PARAMETERPROB))
		return TC_ACT_UNSPEC;
	in_off = icmp_off + 8;
	if (bpf_skb_load_bytes(skb, in_off, &in, sizeof(in)) < 0 || in.version != 4 || in.ihl < 5 ||
	    (in.protocol != IPPROTO_TCP && in.protocol != IPPROTO_UDP))
		return TC_ACT_UNSPEC;
	l4_off = in_off + in.ihl * 4;
	if (bpf_skb_load_bytes(skb, l4_off, ports, sizeof(ports)) < 0)
		return TC_ACT_UNSPEC;
	np_addr_from4(qsrc, in.saddr);
	np_addr_from4(qdst, in.daddr);
	ct = np_icmp_rev(qsrc, qdst, ports, in.protocol);
	if (!ct || !np_is_v4mapped(ct->addr))
		return TC_ACT_UNSPEC;
	__builtin_memcpy(&fe, ct->addr + 12, 4);
	fport = ct->port;
	csum_off = icmp_off + 2;
	if (in.daddr != fe) {
		old_check = in.check;
		if (bpf_l3_csum_replace(skb, in_off + offsetof(struct iphdr, check), in.daddr, fe, sizeof(fe)) < 0 ||
		    bpf_skb_load_bytes(skb, in_off + offsetof(struct iphdr, check), &new_check, sizeof(new_check)) < 0 ||
		    bpf_l4_csum_replace(skb, csum_off, old_check, new_check, sizeof(new_check)) < 0 ||
		    bpf_l4_csum_replace(skb, csum_off, in.daddr, fe, sizeof(fe)) < 0 ||
		    bpf_skb_store_bytes(skb, in_off + offsetof(struct iphdr, daddr), &fe, sizeof(fe), 0) < 0)
			return TC_ACT_SHOT;
	}
	if (ports[1] != fport) {
		if (bpf_l4_csum_replace(skb, csum_off, ports[1], fport, sizeof(fport)) < 0 ||
		    bpf_skb_store_bytes(skb, l4_off + 2, &fport, sizeof(fport), 0) < 0)
			return TC_ACT_SHOT;
	}
	// Sent by the backend itself: from the frontend. (ICMP's checksum
	// does not cover the IP header.)
	if (ip.saddr == in.daddr && ip.saddr != fe) {
		if (bpf_l3_csum_replace(skb, NP_L3_OFF + offsetof(struct iphdr, check), ip.saddr, fe, sizeof(fe)) < 0 ||
		    bpf_skb_store_bytes(skb, NP_L3_OFF + offsetof(struct iphdr, saddr), &fe, sizeof(fe), 0) < 0)
			return TC_ACT_SHOT;
	}
	return TC_ACT_UNSPEC;
}

// np_csum16 adds the difference between the 16-byte addresses from and to
// to the checksum at off (pseudo: it covers the pseudo header, as
// ICMPv6's does for the outer addresses). Returns 0, or -1.
static __always_inline int np_csum16(struct __sk_buff *skb, __u32 off, const __u8 *from, const __u8 *to, int pseudo)
{
	__u8 f[16], t[16];
	__s64 diff;
	__u64 flags = pseudo ? BPF_F_PSEUDO_HDR : 0;

	__builtin_memcpy(f, from, 16);
	__builtin_memcpy(t, to, 16);
	diff = bpf_csum_diff((__be32 *)f, 16, (__be32 *)t, 16, 0);
	if (diff < 0)
		return -1;
	if (pseudo && bpf_l4_csum_replace(skb, off, 0, diff, flags | NP_F_IPV6) == 0)
		return 0;
	return bpf_l4_csum_replace(skb, off, 0, diff, flags) < 0 ? -1 : 0;
}

static __always_inline int np_icmp6_error(struct __sk_buff *skb)
{
	struct ipv6hdr ip, in;
	struct np_ct_val *ct;
	__u8 type, fe[16], osrc[16], qsrc[16], qdst[16];
	__be16 ports[2], fport;
	__u32 icmp_off = NP_L3_OFF + sizeof(struct ipv6hdr), in_off = icmp_off + 8, l4_off, csum_off = icmp_off + 2;

	if (bpf_skb_load_bytes(skb, NP_L3_OFF, &ip, sizeof(ip)) < 0 || ip.version != 6 || ip.nexthdr != NP_IPPROTO_ICMPV6)
		return TC_ACT_UNSPEC;
	if (bpf_skb_load_bytes(skb, icmp_off, &type, 1) < 0 ||
	    (type != NP_ICMP6_DEST_UNREACH && type != NP_ICMP6_PACKET_TOO_BIG && type != NP_ICMP6_TIME_EXCEED &&
	     type != NP_ICMP6_PARAMPROB))
		return TC_ACT_UNSPEC;
	if (bpf_skb_load_bytes(skb, in_off, &in, sizeof(in)) < 0 || in.version != 6 ||
	    (in.nexthdr != IPPROTO_TCP && in.nexthdr != IPPROTO_UDP))
		return TC_ACT_UNSPEC;
	l4_off = in_off + sizeof(in);
	if (bpf_skb_load_bytes(skb, l4_off, ports, sizeof(ports)) < 0)
		return TC_ACT_UNSPEC;
	__builtin_memcpy(qsrc, &in.saddr, 16);
	__builtin_memcpy(qdst, &in.daddr, 16);
	ct = np_icmp_rev(qsrc, qdst, ports, in.nexthdr);
	if (!ct || np_is_v4mapped(ct->addr))
		return TC_ACT_UNSPEC;
	__builtin_memcpy(fe, ct->addr, 16);
	fport = ct->port;
	if (!np_addr_eq(qdst, fe)) {
		if (np_csum16(skb, csum_off, qdst, fe, 0) < 0 ||
		    bpf_skb_store_bytes(skb, in_off + offsetof(struct ipv6hdr, daddr), fe, 16, 0) < 0)
			return TC_ACT_SHOT;
	}
	if (ports[1] != fport) {
		if (bpf_l4_csum_replace(skb, csum_off, ports[1], fport, sizeof(fport)) < 0 ||
		    bpf_skb_store_bytes(skb, l4_off + 2, &fport, sizeof(fport), 0) < 0)
			return TC_ACT_SHOT;
	}
	__builtin_memcpy(osrc, &ip.saddr, 16);
	if (np_addr_eq(osrc, qdst) && !np_addr_eq(osrc, fe)) {
		if (np_csum16(skb, csum_off, osrc, fe, 1) < 0 ||
		    bpf_skb_store_bytes(skb, NP_L3_OFF + offsetof(struct ipv6hdr, saddr), fe, 16, 0) < 0)
			return TC_ACT_SHOT;
	}
	return TC_ACT_UNSPEC;
}

// np_icmp_error translates an ICMP or ICMPv6 error about a translated
// connection (see above); anything else passes untouched.
static __always_inline int np_icmp_error(struct __sk_buff *skb)
{
	__be16 eth_proto;

	if (bpf_skb_load_bytes(skb, offsetof(struct ethhdr, h_proto), &eth_proto, sizeof(eth_proto)) < 0)
		return TC_ACT_UNSPEC;
	if (eth_proto == bpf_htons(ETH_P_IP))
		return np_icmp4_error(skb);
	if (eth_proto == bpf_htons(ETH_P_IPV6))
		return np_icmp6_error(skb);
	return TC_ACT_UNSPEC;
}

// np_egress puts the frontend back as the source of a backend's reply. It
// also translates the ICMP errors about translated connections
// (np_icmp_error).
SEC("tc")
int np_egress(struct __sk_buff *skb)
{
	struct np_pkt p;
	struct np_ct_val *ct;
	struct np_ct_key fkey;

	// A client's packet np_ingress translated, or a pod's it found nothing
	// of ours for: nothing to undo.
	if (skb->tc_index == NP_TC_TRANSLATED || skb->tc_index == NP_TC_UNTRACKED) {
		skb->tc_index = 0;
		return TC_ACT_UNSPEC;
	}
	if (np_parse(skb, &p) < 0)
		return np_icmp_error(skb);
	ct = bpf_map_lookup_elem(&np_ct, &p.key);
	// A packet of the node's own processes (it came in on no interface)
	// to a service, or of such a connection, that the connect-time
	// programs did not translate.
	if (skb->ingress_ifindex == 0 && (!ct || !(ct->flags & NP_CT_REVERSE)))
		return np_forward(skb, 1);
	// A hairpin reverse entry is np_ingress's alone.
	if (!ct || !(ct->flags & NP_CT_REVERSE) || (ct->flags & NP_CT_HAIRPIN))
		return TC_ACT_UNSPEC;
	return np_reverse(skb, &p, ct, bpf_ktime_get_coarse_ns(), &fkey);
}
