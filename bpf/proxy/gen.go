package proxy

// The service NAT program (c/nat.c) is compiled into nat_bpfel.o and
// wrapped by nat_bpfel.go, the connect-time programs (c/sock.c) into
// sock_bpfel.o and sock_bpfel.go; all are committed, so building needs no
// clang. To regenerate after changing c/nat.c, c/sock.c or a header they
// include (c/nat.h, c/service_maps.h, c/addr.h; clang,
// llvm-strip and libbpf headers installed; Debian's clang 14 needs the
// multiarch include directory for <asm/types.h>):
//
//	go generate ./bpf/proxy/
//
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu" -target bpfel -tags linux -go-package proxy -no-global-types nat c/nat.c
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu" -target bpfel -tags linux -go-package proxy -no-global-types sock c/sock.c
