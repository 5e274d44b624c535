//go:build linux

package proxy

import (
	"context"
	"fmt"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/internal/testkit/bpftest"
	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/kernel"
)

// benchServices are n services of one IPv4 cluster IP and three backends
// each.
func benchServices(n int) []cluster.Service {
	svcs := make([]cluster.Service, n)
	for i := range svcs {
		hi, lo := byte(i>>8), byte(i)
		svcs[i] = cluster.Service{
			Name:       fmt.Sprintf("bench/svc-%05d:http", i),
			Port:       80,
			ClusterIPs: []netip.Addr{netip.AddrFrom4([4]byte{10, 96, hi, lo})},
			Backends: []cluster.Backend{
				{Addr: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 201, hi, lo}), 8080), Local: true},
				{Addr: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 202, hi, lo}), 8080)},
				{Addr: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 203, hi, lo}), 8080)},
			},
		}
	}
	return svcs
}

// benchNS is a fresh network namespace, opened; no interface needs the
// programs, so the Proxy is fed no LinkUpdate and attaches nothing.
func benchNS(b *testing.B) *kernel.Namespace {
	b.Helper()
	ns := kerneltest.NewNS(b)
	kns, err := kernel.Open(ns.Path())
	require.NoError(b, err)
	b.Cleanup(func() { _ = kns.Close() })
	return kns
}

func benchProxy(b *testing.B, kns *kernel.Namespace, pinDir string) *Proxy {
	b.Helper()
	p, err := New(Options{Kernel: kns, PinDir: pinDir})
	require.NoError(b, err)
	return p
}

// benchApply sends svcs (when any) and applies.
func benchApply(b *testing.B, p *Proxy, svcs ...cluster.Service) {
	for _, s := range svcs {
		p.OnUpdate(s)
	}
	if err := p.CompleteDeferredWork(context.Background()); err != nil {
		b.Fatal(err)
	}
	if _, err := p.Apply(context.Background()); err != nil {
		b.Fatal(err)
	}
}

func (p *Proxy) mapSyscalls() int {
	return p.k.feSync.Counters().Syscalls + p.k.beSync.Counters().Syscalls
}

// rewriteAll is what a proxy without a diff does after a change: write
// every frontend and backend entry again, one Map.Update each. It returns
// the number of syscalls.
func (p *Proxy) rewriteAll(b *testing.B) int {
	n := 0
	for _, s := range p.services {
		for _, f := range s.fes {
			v, _ := p.k.feSync.Desired(f)
			if err := p.k.fe.Update(&f, &v, ebpf.UpdateAny); err != nil {
				b.Fatal(err)
			}
			n++
		}
		for _, k := range s.bes {
			v, _ := p.k.beSync.Desired(k)
			if err := p.k.be.Update(&k, &v, ebpf.UpdateAny); err != nil {
				b.Fatal(err)
			}
			n++
		}
	}
	return n
}

// BenchmarkKernelProxyServiceChange changes the backends of one service
// among N already applied and applies: ours writes the one backend entry
// that changed; rewrite-all, the naive peer, makes the same change and
// then writes every frontend and backend entry again, key by key.
//
// maglev is ours with NodePort services and Maglev tables of 1021 slots:
// the change rewrites the slots the moved backend held (about a third).
func BenchmarkKernelProxyServiceChange(b *testing.B) {
	for _, n := range []int{100, 10000} {
		for _, mode := range []string{"ours", "rewrite-all", "maglev"} {
			if mode == "maglev" && n > 1000 {
				continue // 10,000 tables of 1021 slots: 10M entries
			}
			b.Run(fmt.Sprintf("%s/N=%d", mode, n), func(b *testing.B) {
				kns := benchNS(b)
				opts := Options{Kernel: kns, PinDir: bpftest.Dir(b)}
				svcs := benchServices(n)
				if mode == "maglev" {
					opts.Maglev = MaglevOptions{Enabled: true, TableSize: 1021}
					for i := range svcs {
						svcs[i].NodePort = 30000 + uint16(i%2000)
					}
				}
				p, err := New(opts)
				require.NoError(b, err)
				b.Cleanup(func() { _ = p.Close() })
				benchApply(b, p, svcs...)
				if mode != "maglev" {
					require.Equal(b, 4*n, p.Status().Frontends+p.Status().Backends)
				}
				before := p.mapSyscalls()
				extra := 0
				i := 0
				for b.Loop() {
					// Service i%n: its third backend moves to another
					// port, a port it never had before in this run.
					s := svcs[i%n]
					s.Backends = append([]cluster.Backend(nil), s.Backends...)
					s.Backends[2].Addr = netip.AddrPortFrom(s.Backends[2].Addr.Addr(), uint16(10000+i%50000))
					benchApply(b, p, s)
					if mode == "rewrite-all" {
						extra += p.rewriteAll(b)
					}
					i++
				}
				b.ReportMetric(float64(p.mapSyscalls()-before+extra)/float64(i), "syscalls/op")
			})
		}
	}
}

// BenchmarkKernelProxyStartup is the first Apply of 10000 services on an
// empty pin dir: ours (the maps created, the program loaded, one read of
// the empty frontend map, batch updates) against perkey, the naive peer:
// the same start without services, then the same entries (build, service
// IDs 1…n) written with one Map.Update each.
func BenchmarkKernelProxyStartup(b *testing.B) {
	const n = 10000
	svcs := benchServices(n)
	b.Run("ours", func(b *testing.B) {
		kns := benchNS(b)
		dir := bpftest.Dir(b)
		syscalls, i := 0, 0
		for b.Loop() {
			b.StopTimer()
			p := benchProxy(b, kns, dir)
			for _, s := range svcs {
				p.OnUpdate(s)
			}
			require.NoError(b, p.CompleteDeferredWork(context.Background()))
			b.StartTimer()
			_, err := p.Apply(context.Background())
			b.StopTimer()
			require.NoError(b, err)
			require.Equal(b, 4*n, p.Status().Frontends+p.Status().Backends)
			syscalls += p.mapSyscalls()
			i++
			require.NoError(b, p.Cleanup(context.Background()))
			b.StartTimer()
		}
		b.ReportMetric(float64(syscalls)/float64(i), "syscalls/op")
	})
	b.Run("perkey", func(b *testing.B) {
		kns := benchNS(b)
		dir := bpftest.Dir(b)
		syscalls, i := 0, 0
		for b.Loop() {
			b.StopTimer()
			p := benchProxy(b, kns, dir)
			b.StartTimer()
			benchApply(b, p) // the maps and the program, no entry
			written := 0
			for id, s := range svcs {
				// The entries ours computes (build), service IDs 1…n,
				// written key by key.
				e := build(s, p.nodeAddrs)
				bes := e.backends[0]
				for o, v := range bes {
					k := beKey{SvcID: uint32(id + 1), Ordinal: uint32(o)}
					if err := p.k.be.Update(&k, &v, ebpf.UpdateAny); err != nil {
						b.Fatal(err)
					}
				}
				for _, f := range e.frontends {
					v := feVal{SvcID: uint32(id + 1), Count: uint32(len(bes)), LocalCount: e.local[0], Flags: f.flags}
					if err := p.k.fe.Update(&f.key, &v, ebpf.UpdateAny); err != nil {
						b.Fatal(err)
					}
				}
				written += len(bes) + len(e.frontends)
			}
			b.StopTimer()
			require.Equal(b, 4*n, written)
			syscalls += p.mapSyscalls() + written
			i++
			require.NoError(b, p.Cleanup(context.Background()))
			b.StartTimer()
		}
		b.ReportMetric(float64(syscalls)/float64(i), "syscalls/op")
	})
}

// BenchmarkKernelProxyPlanVsApply compares Plan with Apply for N=10000
// services applied, of which each op changes one backend of one service
// (as BenchmarkKernelProxyServiceChange): "plan" times the Plan alone (the
// Apply that follows it is not timed), "apply" the Apply alone.
func BenchmarkKernelProxyPlanVsApply(b *testing.B) {
	const n = 10000
	for _, mode := range []string{"plan", "apply"} {
		b.Run(mode, func(b *testing.B) {
			kns := benchNS(b)
			p := benchProxy(b, kns, bpftest.Dir(b))
			b.Cleanup(func() { _ = p.Close() })
			svcs := benchServices(n)
			benchApply(b, p, svcs...)
			ctx := context.Background()
			i := 0
			for b.Loop() {
				b.StopTimer()
				s := svcs[i%n]
				s.Backends = append([]cluster.Backend(nil), s.Backends...)
				s.Backends[2].Addr = netip.AddrPortFrom(s.Backends[2].Addr.Addr(), uint16(10000+i%50000))
				p.OnUpdate(s)
				require.NoError(b, p.CompleteDeferredWork(ctx))
				b.StartTimer()
				if mode == "plan" {
					pl, err := p.Plan(ctx)
					b.StopTimer()
					require.NoError(b, err)
					require.Len(b, pl.Writes, 1)
					_, err = p.Apply(ctx)
					require.NoError(b, err)
					b.StartTimer()
				} else {
					_, err := p.Apply(ctx)
					require.NoError(b, err)
				}
				i++
			}
		})
	}
}
