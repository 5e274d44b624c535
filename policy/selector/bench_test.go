package selector_test

import (
	"fmt"
	"net/netip"
	"runtime"
	"testing"

	"github.com/nodeplane/nodeplane/netfilter"
	"github.com/nodeplane/nodeplane/policy"
	"github.com/nodeplane/nodeplane/policy/selector"
)

const (
	benchEndpoints = 10_000
	benchApps      = 50
)

func benchEndpoint(i int, app int) selector.Endpoint {
	e := selector.Endpoint{ID: fmt.Sprintf("ns%d/pod%d", i%100, i), Namespace: fmt.Sprintf("ns%d", i%100),
		Labels:     map[string]string{"app": fmt.Sprintf("app%d", app), "pod-template-hash": fmt.Sprintf("h%d", i%7)},
		Addrs:      []netip.Addr{netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})},
		NamedPorts: []selector.NamedPort{{Name: "http", Protocol: netfilter.ProtoTCP, Port: 8080}}}
	if i%10 == 0 {
		e.Local, e.Iface = true, fmt.Sprintf("cali%d", i)
	}
	return e
}

// benchIndex returns an Index of 10k endpoints (1k local) in 100
// namespaces and 50 policies, flushed.
func benchIndex(b *testing.B) *selector.Index {
	x := selector.New(selector.Options{})
	for n := range 100 {
		if err := x.SetNamespace(fmt.Sprintf("ns%d", n), map[string]string{"kubernetes.io/metadata.name": fmt.Sprintf("ns%d", n)}); err != nil {
			b.Fatal(err)
		}
	}
	for k := range benchApps {
		applies := selector.Selector{Endpoint: []selector.Requirement{{Key: "app", Op: selector.Equals, Values: []string{fmt.Sprintf("app%d", k)}}}}
		from := &selector.Selector{Endpoint: []selector.Requirement{{Key: "app", Op: selector.In,
			Values: []string{fmt.Sprintf("app%d", (k+1)%benchApps), fmt.Sprintf("app%d", (k+2)%benchApps)}}}}
		err := x.SetPolicy(selector.Policy{ID: fmt.Sprintf("p%d", k), Tier: "k8s", AppliesTo: applies,
			Ingress: []selector.Rule{{Action: policy.Allow, Protocol: netfilter.ProtoTCP,
				Src: selector.Peer{Selector: from},
				Dst: selector.Peer{NamedPorts: []selector.PortName{{Protocol: netfilter.ProtoTCP, Name: "http"}}}}}})
		if err != nil {
			b.Fatal(err)
		}
	}
	for i := range benchEndpoints {
		if err := x.SetEndpoint(benchEndpoint(i, i%benchApps)); err != nil {
			b.Fatal(err)
		}
	}
	x.Flush()
	return x
}

// BenchmarkIndexLabelChange measures one endpoint's relabel (it leaves one
// app's sets and enters another's) and the Flush after it, at 10k
// endpoints; B/endpoint is the heap the Index holds per endpoint.
func BenchmarkIndexLabelChange(b *testing.B) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	x := benchIndex(b)
	runtime.GC()
	runtime.ReadMemStats(&after)
	perEndpoint := float64(after.HeapAlloc-before.HeapAlloc) / benchEndpoints
	b.ReportAllocs()
	b.ResetTimer()
	msgs := 0
	for i := range b.N {
		// Every op moves one endpoint to the next app or back: it
		// leaves one address set and enters another.
		ep := (i / 2 * 7919) % benchEndpoints
		app := ep % benchApps
		if i%2 == 0 {
			app = (app + 1) % benchApps
		}
		if err := x.SetEndpoint(benchEndpoint(ep, app)); err != nil {
			b.Fatal(err)
		}
		msgs += len(x.Flush())
	}
	b.ReportMetric(float64(msgs)/float64(b.N), "msgs/op")
	b.ReportMetric(perEndpoint, "B/endpoint")
	runtime.KeepAlive(x)
}
