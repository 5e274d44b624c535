//go:build linux

package proxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/netip"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/internal/testkit/bpftest"
	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/kernel"
)

// BenchmarkKernelServiceConnect measures what a new connection to a
// service costs, first packet included: one op is a TCP connection from a
// pod to a service on the same host (client pod → host routes → backend
// pod), the backend's one-byte greeting read, and the connection reset
// (SO_LINGER 0, so no TIME_WAIT piles up). Each dataplane gets a fresh
// topology of one host with two pods:
//
//   - direct: the client dials the backend's own address, the floor;
//   - bpf/N=…: a Proxy on the host's pod veths with N services, the
//     measured one in the middle (a hash lookup: the position should not
//     matter);
//   - iptables/N=… and iptables-nft/N=…: the N services as kube-proxy
//     writes them in the nat table (PREROUTING → KUBE-SERVICES, one rule per
//     service → KUBE-SVC-n → KUBE-SEP-n → DNAT), written with
//     iptables-legacy-restore or iptables-nft-restore; the measured service
//     is the last one (the whole KUBE-SERVICES walk), and the middle one is
//     reported too (mid-p50-ns, mid-p99-ns, as many connections after the
//     timed loop);
//   - nft-vmap/N=…: the N services as kube-proxy's nftables mode lays them
//     out (a verdict map to the service's chain, numgen to an endpoint
//     chain, DNAT), loaded with nft -f; measured at the last and the middle
//     service as iptables.
//   - bpf-progs/N=10000: bpf/N=10000 with the kernel's BPF run-time
//     statistics on (which cost each program run two clock reads, so its
//     latencies are not bpf's): what the programs themselves ran per
//     connection, each (<program>-ns/conn, <program>-runs/conn) and
//     together (progs-ns/conn), warm-up included, on live packets, cold
//     caches and all — where BenchmarkKernelProgPackets times single
//     packets run again and again.
//
// Besides ns/op it reports the per-connection latency's p50 and p99
// (p50-ns, p99-ns) and the part of it until the dial returned
// (connect-p50-ns, connect-p99-ns: the handshake, which the first packet's
// translation is part of). The client dials with blocking syscalls from
// one thread locked in the client pod (the whole timed loop in one NS.Do);
// the backend answers from one thread locked in its pod; both threads are
// pinned to the same CPU at real-time priority (connBenchPin), so the
// figures are the kernel's path, not the Go scheduler's or another
// process's. A missing restore command skips (or, where kernel tests
// must run, fails) its sub-benchmarks, as kerneltest.RequireCommands does.
// Run it with -benchtime 2000x or more.
func BenchmarkKernelServiceConnect(b *testing.B) {
	b.Run("direct", func(b *testing.B) {
		r := newConnBenchRig(b)
		connBenchMeasure(b, r.client.NS, r.backendAddr, netip.AddrPort{})
	})
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("bpf/N=%d", n), func(b *testing.B) {
			r := newConnBenchRig(b)
			r.bpfServices(b, n)
			connBenchMeasure(b, r.client.NS, connBenchServiceAddr(n/2), netip.AddrPort{})
		})
	}
	b.Run("bpf-progs/N=10000", func(b *testing.B) {
		const n = 10000
		r := newConnBenchRig(b)
		p := r.bpfServicesWith(b, n, nil)
		connBenchProgRuntime(b, p, func() { connBenchMeasure(b, r.client.NS, connBenchServiceAddr(n/2), netip.AddrPort{}) })
	})
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("nft-vmap/N=%d", n), func(b *testing.B) {
			kerneltest.RequireCommands(b, "nft")
			r := newConnBenchRig(b)
			r.nftServices(b, n)
			connBenchMeasure(b, r.client.NS, connBenchServiceAddr(n-1), connBenchServiceAddr(n/2))
		})
	}
	for _, backend := range []struct{ name, restore string }{
		{"iptables", "iptables-legacy-restore"},
		{"iptables-nft", "iptables-nft-restore"},
	} {
		for _, n := range []int{1000, 10000} {
			b.Run(fmt.Sprintf("%s/N=%d", backend.name, n), func(b *testing.B) {
				kerneltest.RequireCommands(b, backend.restore)
				r := newConnBenchRig(b)
				r.iptablesServices(b, backend.restore, n)
				connBenchMeasure(b, r.client.NS, connBenchServiceAddr(n-1), connBenchServiceAddr(n/2))
			})
		}
	}
}

// connBenchPort is the backend's greeting server.
const connBenchPort = 8090

// connBenchRig is one host with two pods: pod 1 is the client, pod 2 the
// backend, which greets every connection with one byte.
type connBenchRig struct {
	topo        *kerneltest.Topology
	client      *kerneltest.Pod
	backend     *kerneltest.Pod
	backendAddr netip.AddrPort
}

func newConnBenchRig(b *testing.B) *connBenchRig {
	b.Helper()
	topo := kerneltest.NewTopology(b, kerneltest.TopologyOptions{Hosts: 1, PodsPerHost: 2, Stack: kerneltest.IPv4Only})
	h := topo.Hosts[0]
	r := &connBenchRig{topo: topo, client: h.Pods[0], backend: h.Pods[1],
		backendAddr: netip.AddrPortFrom(h.Pods[1].IPv4, connBenchPort)}
	connBenchServe(b, r.backend.NS)
	return r
}

// connBenchServiceAddr is the cluster IP and port of service i:
// 10.96.<i/256>.<i%256>:80.
func connBenchServiceAddr(i int) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}), 80)
}

// bpfServices makes a Proxy of the host, attached to its pod veths and
// underlay, with n services whose one backend is the backend pod.
func (r *connBenchRig) bpfServices(b *testing.B, n int) { r.bpfServicesWith(b, n, nil) }

// connBenchServiceName is the name of service i of bpfServices.
func connBenchServiceName(i int) string { return fmt.Sprintf("bench/svc-%05d:http", i) }

// bpfServicesWith is bpfServices with the Options that set (when not nil)
// changes; it returns the Proxy.
func (r *connBenchRig) bpfServicesWith(b *testing.B, n int, set func(*Options)) *Proxy {
	b.Helper()
	h := r.topo.Hosts[0]
	ns, err := kernel.Open(h.NS.Path())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = ns.Close() })
	o := Options{Kernel: ns, PinDir: bpftest.Dir(b), HostInterfaces: []string{h.UnderlayIf},
		PodInterfacePrefixes: []string{r.topo.Options.PodIfacePrefix}}
	if set != nil {
		set(&o)
	}
	p, err := New(o)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = p.Cleanup(context.Background()) })
	links, err := ns.Links(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	for _, l := range links {
		p.OnLink(l, l.State())
	}
	p.OnUpdate(cluster.NodeAddrs{Addrs: h.UnderlayAddrs()})
	for i := range n {
		p.OnUpdate(cluster.Service{Name: connBenchServiceName(i), Port: 80,
			ClusterIPs: []netip.Addr{connBenchServiceAddr(i).Addr()}, Backends: []cluster.Backend{{Addr: r.backendAddr, Local: true}}})
	}
	if err := p.CompleteDeferredWork(context.Background()); err != nil {
		b.Fatal(err)
	}
	if _, err := p.Apply(context.Background()); err != nil {
		b.Fatal(err)
	}
	st := p.Status()
	if st.Services != n || len(st.Errors) > 0 || (o.Cgroup != "" && !slices.Contains(st.Interfaces, "cgroup:"+o.Cgroup)) {
		b.Fatalf("proxy status: %d services of %d, errors %v", st.Services, n, st.Errors)
	}
	return p
}

// iptablesServices writes n services in the host's nat table as
// kube-proxy does, with restore (iptables-legacy-restore or
// iptables-nft-restore).
func (r *connBenchRig) iptablesServices(b *testing.B, restore string, n int) {
	b.Helper()
	var buf bytes.Buffer
	buf.WriteString("*nat\n:PREROUTING ACCEPT [0:0]\n:KUBE-SERVICES - [0:0]\n")
	for i := range n {
		fmt.Fprintf(&buf, ":KUBE-SVC-%05d - [0:0]\n:KUBE-SEP-%05d - [0:0]\n", i, i)
	}
	buf.WriteString("-A PREROUTING -j KUBE-SERVICES\n")
	for i := range n {
		a := connBenchServiceAddr(i)
		fmt.Fprintf(&buf, "-A KUBE-SERVICES -d %s/32 -p tcp -m tcp --dport %d -j KUBE-SVC-%05d\n", a.Addr(), a.Port(), i)
	}
	for i := range n {
		fmt.Fprintf(&buf, "-A KUBE-SVC-%05d -j KUBE-SEP-%05d\n", i, i)
		fmt.Fprintf(&buf, "-A KUBE-SEP-%05d -p tcp -m tcp -j DNAT --to-destination %s\n", i, r.backendAddr)
	}
	buf.WriteString("COMMIT\n")
	nsLoad(b, r.topo.Hosts[0].NS, &buf, restore, "-w", "5")
}

// nftServices writes n services in an nftables table the way
// kube-proxy's nftables mode lays them out: a verdict map from address,
// protocol and port to the service's chain (one lookup whatever n), which
// picks an endpoint chain by a random number (numgen) in a verdict map,
// which DNATs; hooked at dstnat in prerouting.
func (r *connBenchRig) nftServices(b *testing.B, n int) {
	b.Helper()
	var buf bytes.Buffer
	buf.WriteString("table ip bench-proxy {\n")
	connBenchServiceMap(&buf, n, "svc")
	for i := range n {
		fmt.Fprintf(&buf, "  chain svc-%05d {\n    numgen random mod 1 vmap { 0 : goto sep-%05d }\n  }\n", i, i)
		fmt.Fprintf(&buf, "  chain sep-%05d {\n    meta l4proto tcp dnat to %s\n  }\n", i, r.backendAddr)
	}
	buf.WriteString("  chain services {\n    ip daddr . meta l4proto . th dport vmap @service-ips\n  }\n")
	buf.WriteString("  chain nat-prerouting {\n    type nat hook prerouting priority dstnat; policy accept;\n    jump services\n  }\n}\n")
	r.nftLoad(b, &buf)
}

// connBenchServiceMap writes the verdict map kube-proxy's nftables mode
// dispatches services with: address, protocol and port of service i (of
// n) to its chain, named prefix-i.
func connBenchServiceMap(buf *bytes.Buffer, n int, prefix string) {
	buf.WriteString("  map service-ips { type ipv4_addr . inet_proto . inet_service : verdict\n    elements = {\n")
	for i := range n {
		a := connBenchServiceAddr(i)
		fmt.Fprintf(buf, "      %s . tcp . %d : goto %s-%05d,\n", a.Addr(), a.Port(), prefix, i)
	}
	buf.WriteString("    }\n  }\n")
}

// nftLoad loads ruleset into the rig's host namespace with nft -f.
func (r *connBenchRig) nftLoad(b *testing.B, ruleset *bytes.Buffer) {
	b.Helper()
	nsLoad(b, r.topo.Hosts[0].NS, ruleset, "nft", "-f", "-")
}

// nsLoad runs a ruleset loader (nft -f -, iptables-restore) in ns with
// input on its standard input, and fails tb when it fails.
func nsLoad(tb testing.TB, ns *kerneltest.NS, input *bytes.Buffer, name string, args ...string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if out, err := ns.ExecInput(ctx, input, name, args...); err != nil {
		tb.Fatalf("%s: %v\n%s", name, err, out)
	}
}

// kubeProxyServices writes n services the way kube-proxy's nftables mode
// (in its current releases) writes its whole table, not only the path of
// nftServices: besides the service verdict map and the chains it leads
// to, the filter chains on a connection's first packet — the firewall
// check before DNAT at prerouting and output (source-range-limited
// addresses), the endpoints checks after it (services and NodePorts
// without endpoints) at input, forward and output, and the check of
// traffic to cluster IPs that no service port took (rejected when the
// address is a service's, dropped when it is unallocated in the service
// range) at forward and output — the NodePort dispatch on the node's
// addresses, the hooks at output, and the masquerading at postrouting of
// what a chain marked: a client from outside the pod CIDR to a service, or
// a backend reaching itself. The maps of the checks are empty here (every
// service has its endpoint, none has source ranges); the set of cluster IPs
// holds every service's.
func (r *connBenchRig) kubeProxyServices(b *testing.B, n int) {
	b.Helper()
	h := r.topo.Hosts[0]
	var buf bytes.Buffer
	buf.WriteString(`table ip kube-proxy {
  map no-endpoint-services { type ipv4_addr . inet_proto . inet_service : verdict; }
  map no-endpoint-nodeports { type inet_proto . inet_service : verdict; }
  map firewall-ips { type ipv4_addr . inet_proto . inet_service : verdict; }
  map service-nodeports { type inet_proto . inet_service : verdict; }
  chain reject-chain { reject; }
  chain mark-for-masquerade { meta mark set meta mark | 0x4000; }
  chain masquerading {
    meta mark & 0x4000 == 0 return
    meta mark set meta mark ^ 0x4000
    masquerade fully-random
  }
  chain firewall-check { ip daddr . meta l4proto . th dport vmap @firewall-ips; }
  chain service-endpoints-check { ip daddr . meta l4proto . th dport vmap @no-endpoint-services; }
  chain nodeport-endpoints-check { ip daddr @nodeport-ips meta l4proto . th dport vmap @no-endpoint-nodeports; }
  chain cluster-ips-check {
    ip daddr @cluster-ips reject
    ip daddr 10.96.0.0/12 drop
  }
`)
	fmt.Fprintf(&buf, "  set nodeport-ips { type ipv4_addr; elements = { %s } }\n", h.UnderlayIPv4.Addr())
	buf.WriteString("  set cluster-ips { type ipv4_addr\n    elements = {\n")
	for i := range n {
		fmt.Fprintf(&buf, "      %s,\n", connBenchServiceAddr(i).Addr())
	}
	buf.WriteString("    }\n  }\n")
	connBenchServiceMap(&buf, n, "service")
	for i := range n {
		a := connBenchServiceAddr(i)
		fmt.Fprintf(&buf, "  chain service-%05d {\n    ip daddr %s ip saddr != %s jump mark-for-masquerade\n"+
			"    numgen random mod 1 vmap { 0 : goto endpoint-%05d }\n  }\n", i, a.Addr(), h.PodCIDRv4, i)
		fmt.Fprintf(&buf, "  chain endpoint-%05d {\n    ip saddr %s jump mark-for-masquerade\n    meta l4proto tcp dnat to %s\n  }\n",
			i, r.backendAddr.Addr(), r.backendAddr)
	}
	buf.WriteString(`  chain services {
    ip daddr . meta l4proto . th dport vmap @service-ips
    ip daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports
  }
  chain filter-prerouting-pre-dnat { type filter hook prerouting priority -110; ct state new jump firewall-check; }
  chain filter-output-pre-dnat { type filter hook output priority -110; ct state new jump firewall-check; }
  chain filter-input {
    type filter hook input priority 0
    ct state new jump nodeport-endpoints-check
    ct state new jump service-endpoints-check
  }
  chain filter-forward {
    type filter hook forward priority 0
    ct state new jump service-endpoints-check
    ct state new jump cluster-ips-check
  }
  chain filter-output {
    type filter hook output priority 0
    ct state new jump service-endpoints-check
    ct state new jump cluster-ips-check
  }
  chain nat-prerouting { type nat hook prerouting priority -100; jump services; }
  chain nat-output { type nat hook output priority -100; jump services; }
  chain nat-postrouting { type nat hook postrouting priority 100; jump masquerading; }
}
`)
	r.nftLoad(b, &buf)
}

// connBenchServe runs a server in ns on connBenchPort, one thread locked
// inside it making blocking syscalls: it writes one byte on every
// connection and closes it once the client has (the client resets it, so
// neither side keeps a TIME_WAIT).
func connBenchServe(b *testing.B, ns *kerneltest.NS) {
	b.Helper()
	ready := make(chan int, 1)
	done := make(chan error, 1)
	go func() {
		done <- ns.Do(func() error {
			defer connBenchPin()()
			lfd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				ready <- -1
				return err
			}
			defer unix.Close(lfd)
			_ = unix.SetsockoptInt(lfd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
			if err := unix.Bind(lfd, &unix.SockaddrInet4{Port: connBenchPort}); err != nil {
				ready <- -1
				return err
			}
			if err := unix.Listen(lfd, 1024); err != nil {
				ready <- -1
				return err
			}
			ready <- lfd
			buf := make([]byte, 64)
			tv := unix.NsecToTimeval(int64(10 * time.Second))
			for {
				cfd, _, err := unix.Accept4(lfd, unix.SOCK_CLOEXEC)
				if err == unix.EINTR || err == unix.ECONNABORTED {
					continue
				}
				if err != nil {
					return nil // shut down
				}
				_ = unix.SetsockoptTimeval(cfd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
				_ = unix.SetsockoptTimeval(cfd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv)
				if _, err := unix.Write(cfd, buf[:1]); err == nil {
					for {
						n, err := unix.Read(cfd, buf)
						if err == unix.EINTR {
							continue
						}
						if err != nil || n == 0 {
							break
						}
					}
				}
				_ = unix.Close(cfd)
			}
		})
	}()
	lfd := <-ready
	if lfd < 0 {
		b.Fatalf("greeting server in %s: %v", ns, <-done)
	}
	b.Cleanup(func() {
		_ = unix.Shutdown(lfd, unix.SHUT_RDWR) // wakes the blocked accept
		if err := <-done; err != nil {
			b.Errorf("greeting server in %s: %v", ns, err)
		}
	})
}

// connBenchOnce connects to to with blocking syscalls (on the calling
// thread), reads the greeting and resets the connection (SO_LINGER 0). It
// returns the time the connect returned.
func connBenchOnce(to *unix.SockaddrInet4, buf []byte) (time.Time, error) {
	var connected time.Time
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return connected, err
	}
	defer unix.Close(fd)
	tv := unix.NsecToTimeval(int64(3 * time.Second))
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv); err != nil {
		return connected, err
	}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return connected, err
	}
	if err := unix.SetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1}); err != nil {
		return connected, err
	}
	err = unix.Connect(fd, to)
	if err == unix.EINTR || err == unix.EALREADY || err == unix.EINPROGRESS {
		err = connBenchWaitConnected(fd)
	}
	connected = time.Now()
	if err != nil {
		return connected, fmt.Errorf("connect %d.%d.%d.%d:%d: %w", to.Addr[0], to.Addr[1], to.Addr[2], to.Addr[3], to.Port, err)
	}
	for {
		n, err := unix.Read(fd, buf[:1])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return connected, fmt.Errorf("greeting: %w", err)
		}
		if n != 1 {
			return connected, fmt.Errorf("greeting: %w", io.ErrUnexpectedEOF)
		}
		return connected, nil
	}
}

// connBenchWaitConnected waits for a connect that a signal interrupted.
func connBenchWaitConnected(fd int) error {
	deadline := time.Now().Add(3 * time.Second)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return unix.ETIMEDOUT
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
		n, err := unix.Poll(fds, int(left.Milliseconds())+1)
		if err == unix.EINTR || (err == nil && n == 0) {
			continue
		}
		if err != nil {
			return err
		}
		soErr, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
		if err != nil {
			return err
		}
		if soErr != 0 {
			return unix.Errno(soErr)
		}
		return nil
	}
}

// connBenchMeasure runs the timed loop on one thread locked inside from
// (one NS.Do for every connection), connecting to to, and reports the
// latency percentiles; a valid mid is measured as many times after the
// loop, untimed, and reported as mid-p50-ns and mid-p99-ns.
func connBenchMeasure(b *testing.B, from *kerneltest.NS, to, mid netip.AddrPort) {
	b.Helper()
	sockaddr := func(ap netip.AddrPort) *unix.SockaddrInet4 {
		return &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}
	}
	var total, connect, midTotal []time.Duration
	err := from.Do(func() error {
		defer connBenchPin()()
		buf := make([]byte, 1)
		target := sockaddr(to)
		warm := []*unix.SockaddrInet4{target}
		if mid.IsValid() {
			warm = append(warm, sockaddr(mid))
		}
		// Warm up: neighbours resolved, the first connections' slow paths
		// taken, and the service proven to answer.
		for _, w := range warm {
			for range connBenchWarmUp {
				if _, err := connBenchOnce(w, buf); err != nil {
					return fmt.Errorf("warm-up: %w", err)
				}
			}
		}
		total = make([]time.Duration, 0, 1<<14)
		connect = make([]time.Duration, 0, 1<<14)
		for b.Loop() {
			start := time.Now()
			connected, err := connBenchOnce(target, buf)
			end := time.Now()
			if err != nil {
				return err
			}
			total = append(total, end.Sub(start))
			connect = append(connect, connected.Sub(start))
		}
		if !mid.IsValid() {
			return nil
		}
		midTarget := sockaddr(mid)
		midTotal = make([]time.Duration, 0, len(total))
		for range len(total) {
			start := time.Now()
			if _, err := connBenchOnce(midTarget, buf); err != nil {
				return err
			}
			midTotal = append(midTotal, time.Since(start))
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	connBenchReport(b, "", total)
	connBenchReport(b, "connect-", connect)
	connBenchReport(b, "mid-", midTotal)
}

// connBenchWarmUp is how many untimed connections connBenchMeasure makes
// to each target first.
const connBenchWarmUp = 50

// connBenchCPU is the CPU that the client's and the server's threads share.
var connBenchCPU = runtime.NumCPU() - 1

// connBenchPin pins the calling (locked) thread to connBenchCPU and gives
// it the lowest real-time priority (SCHED_FIFO 1), so that the client and
// the server hand the connection to each other on one CPU, as soon as
// they are woken, whatever else the machine runs; it returns the function
// that puts the thread back as it was. What it cannot change stays as it
// is (the benchmark is then only noisier).
func connBenchPin() (restore func()) {
	var mask, orig unix.CPUSet
	if err := unix.SchedGetaffinity(0, &orig); err != nil {
		return func() {}
	}
	mask.Set(connBenchCPU)
	pinned := unix.SchedSetaffinity(0, &mask) == nil
	attr, err := unix.SchedGetAttr(0, 0)
	rt := false
	if err == nil {
		fifo := *attr
		fifo.Size, fifo.Policy, fifo.Priority, fifo.Flags = unix.SizeofSchedAttr, unix.SCHED_FIFO, 1, 0
		rt = unix.SchedSetAttr(0, &fifo, 0) == nil
	}
	return func() {
		if rt {
			attr.Size = unix.SizeofSchedAttr
			_ = unix.SchedSetAttr(0, attr, 0)
		}
		if pinned {
			_ = unix.SchedSetaffinity(0, &orig)
		}
	}
}

// connBenchProgRuntime runs measure (b.N connections after a warm-up of
// connBenchWarmUp) with the kernel's BPF run-time statistics on and
// reports, per connection, the run time and the runs of each of p's tc
// programs that ran, and their run time together.
func connBenchProgRuntime(b *testing.B, p *Proxy, measure func()) {
	b.Helper()
	stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		b.Fatalf("the kernel's BPF statistics: %v", err)
	}
	defer stats.Close()
	read := func() map[string]ebpf.ProgramStats {
		out := map[string]ebpf.ProgramStats{}
		for name, prog := range p.k.progs {
			st, err := prog.Stats()
			if err != nil {
				b.Fatalf("statistics of %s: %v", name, err)
			}
			out[name] = *st
		}
		return out
	}
	before := read()
	measure()
	after := read()
	conns := float64(b.N + connBenchWarmUp)
	var total time.Duration
	for name, a := range after {
		d, runs := a.Runtime-before[name].Runtime, a.RunCount-before[name].RunCount
		if runs == 0 {
			continue
		}
		total += d
		b.ReportMetric(float64(d.Nanoseconds())/conns, name+"-ns/conn")
		b.ReportMetric(float64(runs)/conns, name+"-runs/conn")
	}
	if total == 0 {
		b.Fatal("no program of the proxy ran: the connections did not go through it")
	}
	b.ReportMetric(float64(total.Nanoseconds())/conns, "progs-ns/conn")
}

// connBenchReport reports the p50 and p99 of d as <prefix>p50-ns and
// <prefix>p99-ns; nothing when d is empty.
func connBenchReport(b *testing.B, prefix string, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	pct := func(p int) float64 { return float64(d[(len(d)-1)*p/100].Nanoseconds()) }
	b.ReportMetric(pct(50), prefix+"p50-ns")
	b.ReportMetric(pct(99), prefix+"p99-ns")
}
