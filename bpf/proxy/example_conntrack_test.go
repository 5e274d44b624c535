package proxy_test

import (
	"context"
	"fmt"
	"time"

	"github.com/nodeplane/nodeplane/bpf/proxy"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/iptables"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/netfilter"
	"github.com/nodeplane/nodeplane/serviceloop"
)

// The connection scanner runs beside the loop: it removes idle and stale
// connection entries and reports the map's fill level; Counters gives
// each service's connections, packets, bytes and refusals. A service
// without a ready backend is refused as kube-proxy does once the Proxy's
// reject mark is given to serviceloop. This example only compiles: it
// needs root and a bpffs.
func ExampleProxy_Run() {
	ns, err := kernel.Open("/proc/1/ns/net")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ns.Close()
	p, err := proxy.New(proxy.Options{Kernel: ns, PinDir: "/sys/fs/bpf/nodeplane-proxy",
		HostInterfaces: []string{"eth0"}, PodInterfacePrefixes: []string{"veth"},
		RejectMark: 0x8000, RejectMask: 0x8000,
		Conntrack: proxy.ConntrackOptions{UDP: time.Minute}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()
	// The rules that answer the marked packets, in the filter table.
	filter, _ := iptables.New(iptables.Options{Table: "filter", Family: ipfamily.IPv4, Backend: iptables.BackendNFT,
		ChainPrefix: "np-", Kernel: ns})
	mark, _ := p.RejectMark()
	_, _ = serviceloop.New(serviceloop.Options{Family: ipfamily.IPv4, Table: filter, Chain: "np-svc-loop",
		RejectMarks: []netfilter.MatchMark{mark}})

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	go func() { _ = p.Run(ctx) }() // register p with the loop too, as Example shows
	<-ctx.Done()
	ct := p.Status().Conntrack
	fmt.Printf("%d connection entries (%.0f%% full), %d new connections dropped for want of room\n",
		ct.Entries, 100*ct.FillLevel(), ct.Full)
	for name, c := range p.Counters() {
		fmt.Println(name, c.Connections, c.Packets, c.Bytes, c.Rejects)
	}
}
