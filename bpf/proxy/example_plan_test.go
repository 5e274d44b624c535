package proxy_test

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/nodeplane/nodeplane/bpf/proxy"
	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/kernel"
)

// Plan says what the next Apply would write, and writes nothing; State
// what the Proxy holds, what drifts and what fails. Both need the maps the
// first Apply opens. This example only compiles: it needs root, a bpffs
// and Linux 6.6 or later. A service of one cluster IP and one backend
// plans two writes: its backend entry ("+ entry <service ID, ordinal> →
// <address, port>", in hex), then its frontend entry ("+ entry <address,
// port, protocol> → <service ID, counts, flags>").
func ExampleProxy_Plan() {
	ns, err := kernel.OpenCurrent()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ns.Close()
	p, err := proxy.New(proxy.Options{Kernel: ns, PinDir: "/sys/fs/bpf/nodeplane-proxy"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()
	ctx := context.Background()
	if _, err := p.Apply(ctx); err != nil { // opens the maps, loads the programs
		fmt.Println(err)
		return
	}
	p.OnUpdate(cluster.Service{Name: "default/web:http", Port: 80,
		ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.10")},
		Backends:   []cluster.Backend{{Addr: netip.MustParseAddrPort("10.244.1.7:8080")}}})
	plan, err := p.Plan(ctx)
	fmt.Println(plan, err)
	if _, err := p.Apply(ctx); err != nil {
		fmt.Println(err)
	}
	st, err := p.State(ctx)
	fmt.Println(st, err) // bpf-proxy: 2 owned, 0 drifted, 0 failing <nil>
}
