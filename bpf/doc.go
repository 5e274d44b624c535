// Package bpf holds nodeplane's eBPF dataplane; it has no code of its own,
// only this overview.
//
//   - Package bpf/maps creates and pins BPF maps on a BPF file system,
//     reopens them across restarts (a map of another shape is replaced)
//     and keeps each map's entries equal to a desired set, writing only
//     the difference with batch updates and deletes.
//   - Package bpf/proxy is a service proxy, a replacement for kube-proxy's
//     translation of service addresses: a tc program pair attached with
//     TCX to the host and pod interfaces translates connections to cluster
//     IPs, node ports and external IPs into connections to backends, and
//     the replies back. It is a dataplane manager and driver; its maps go
//     through bpf/maps.
//
// # What the kernel needs
//
// A BPF file system (bpffs) mounted where the maps and attachments are
// pinned, usually /sys/fs/bpf: nodeplane never mounts one (bpf/maps
// reports ErrNotBPFFS otherwise). Root, or CAP_BPF with CAP_NET_ADMIN. For
// bpf/proxy, TCX attachments: Linux 6.6 or later. The kernel's BTF
// (/sys/kernel/btf/vmlinux, CONFIG_DEBUG_INFO_BTF) is not needed: the
// program is compiled ahead of time (committed with its Go wrapper, so
// building needs no clang) and uses no CO-RE relocation or kernel type.
// bpf/maps is Linux-only beyond its errors; bpf/proxy builds everywhere,
// and off Linux its Apply fails with ErrNotSupported.
package bpf
