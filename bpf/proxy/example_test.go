package proxy_test

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/nodeplane/nodeplane/bpf/proxy"
	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/ifacemonitor"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/iptables"
	"github.com/nodeplane/nodeplane/kernel"
)

// An agent's service proxy: the Proxy is registered with the loop as a
// manager and as a driver, an interface monitor tells it the interfaces,
// and the services arrive as messages. This example only compiles: it
// needs root, a bpffs at /sys/fs/bpf and Linux 6.6 or later.
func Example() {
	ns, err := kernel.Open("/proc/1/ns/net") // the node's namespace
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ns.Close()
	p, err := proxy.New(proxy.Options{
		Kernel:               ns,
		PinDir:               "/sys/fs/bpf/nodeplane-proxy",
		HostInterfaces:       []string{"eth0"},
		PodInterfacePrefixes: []string{"veth"},
		MasqueradeMark:       0x4000, // masqueraded by the agent's netfilter rule (MasqueradeRule)
		MasqueradeMask:       0x4000,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close() // the pins keep the translation working after the agent exits

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	loop, err := dataplane.New(dataplane.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = loop.AddManager(p)
	_ = loop.AddDriver(p)
	mon, _ := ifacemonitor.New(ifacemonitor.Options{
		Kernel:      ns,
		OnLinkState: func(u ifacemonitor.LinkUpdate) { loop.OnLink(u.Link(), u.State) },
		OnAddrs:     loop.OnAddrs,
		OnInSync:    loop.InterfacesInSync,
	})
	go func() { _ = mon.Run(ctx) }()

	_ = loop.Send(ctx, cluster.NodeAddrs{Addrs: []netip.Addr{netip.MustParseAddr("192.0.2.10")}})
	_ = loop.Send(ctx, cluster.Service{
		Name:       "default/web:http",
		Port:       80,
		ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.10")},
		NodePort:   30080,
		Backends: []cluster.Backend{
			{Addr: netip.MustParseAddrPort("10.244.1.7:8080"), Local: true},
			{Addr: netip.MustParseAddrPort("10.244.2.9:8080")},
		},
	})
	loop.DatastoreInSync()
	_ = loop.Run(ctx) // until ctx ends
}

// MasqueradeRule is the netfilter rule that masquerades what the program
// marks: connections from other hosts sent to a backend on another node.
// An agent writes it in its nat table (here rendered for iptables), or
// gives the mark to package masquerade (masquerade.Options.Marks).
func ExampleProxy_MasqueradeRule() {
	ns, err := kernel.OpenCurrent() // New does no I/O: nothing is done in it here
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ns.Close()
	p, err := proxy.New(proxy.Options{Kernel: ns, PinDir: "/sys/fs/bpf/nodeplane-proxy",
		MasqueradeMark: 0x4000, MasqueradeMask: 0xc000})
	if err != nil {
		fmt.Println(err)
		return
	}
	rule, ok := p.MasqueradeRule()
	fmt.Println(ok)
	fmt.Printf("%+v %T\n", rule.Matches[0], rule.Action)
	args, err := iptables.RuleArgs(rule, ipfamily.IPv4)
	fmt.Println(args, err)
	// Output:
	// true
	// {Mark:16384 Mask:49152 Negate:false} netfilter.ActionMasquerade
	// [-m mark --mark 0x4000/0xc000 -m comment --comment bpf-proxy: service traffic to a backend on another node -j MASQUERADE] <nil>
}

// Status tells what the Proxy programmed: services, map entries, the
// interfaces its programs are attached to, and what failed. This example
// only compiles: it needs root, a bpffs and Linux 6.6 or later.
func ExampleProxy_Status() {
	ns, err := kernel.OpenCurrent()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ns.Close()
	p, err := proxy.New(proxy.Options{Kernel: ns, PinDir: "/sys/fs/bpf/nodeplane-proxy",
		HostInterfaces: []string{"eth0"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()
	p.OnUpdate(cluster.Service{
		Name: "default/dns:udp", Protocol: cluster.UDP, Port: 53,
		ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.53"), netip.MustParseAddr("fd00:96::53")},
		Backends: []cluster.Backend{
			{Addr: netip.MustParseAddrPort("10.244.1.3:53")},
			{Addr: netip.MustParseAddrPort("[fd00:244:1::3]:53")},
		},
	})
	ctx := context.Background()
	if err := p.CompleteDeferredWork(ctx); err != nil {
		fmt.Println(err)
	}
	if _, err := p.Apply(ctx); err != nil {
		fmt.Println(err)
	}
	st := p.Status()
	fmt.Println(st.Services, st.Frontends, st.Backends, st.Interfaces, st.Errors) // 1 2 2 [] []
}

// Cleanup removes what the Proxy made: it detaches the programs from every
// interface and removes the maps, also when this Proxy never applied (an
// agent being uninstalled). Close, instead, leaves them working. This
// example only compiles: it needs root and a bpffs.
func ExampleProxy_Cleanup() {
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
	if err := p.Cleanup(context.Background()); err != nil {
		fmt.Println(err)
	}
}
