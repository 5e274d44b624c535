//go:build linux

package kerneltest_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
)

// The address plan of a topology, computed without building one.
func ExamplePodAddrs() {
	v4, v6, err := kerneltest.PodAddrs(2, 3)
	fmt.Println(v4, v6, err)
	_, _, err = kerneltest.PodAddrs(2, 0)
	fmt.Println(errors.Is(err, kerneltest.ErrInvalid))
	// Output:
	// 10.244.2.3 fd00:10:244:2::3 <nil>
	// true
}

func ExampleUnderlayPrefixes() {
	v4, v6, _ := kerneltest.UnderlayPrefixes(12)
	fmt.Println(v4, v6)
	// Output: 198.18.0.12/24 fd00:198:18::c/64
}

func ExamplePodCIDRs() {
	v4, v6, _ := kerneltest.PodCIDRs(1)
	fmt.Println(v4, v6)
	// Output: 10.244.1.0/24 fd00:10:244:1::/64
}

func ExampleTopologyOptions_Validate() {
	for _, o := range []kerneltest.TopologyOptions{
		{Hosts: 3, PodsPerHost: 2},
		{Hosts: 3, Underlay: kerneltest.UnderlayVeth},
		{Hosts: 1, PodsPerHost: 10, PodIfacePrefix: "a-very-long-name"},
	} {
		fmt.Println(o.Validate())
	}
	// Output:
	// <nil>
	// kerneltest: invalid input: a veth underlay joins exactly 2 hosts, not 3
	// kerneltest: invalid input: pod interface name "a-very-long-name10" longer than 15 bytes
}

// Not turns a reachability probe around; only ErrUnreachable counts as
// "unreachable", so a broken probe never passes.
func ExampleNot() {
	probe := func(err error) kerneltest.Check {
		return kerneltest.Check{Name: "probe", Run: func(context.Context) error { return err }}
	}
	ctx := context.Background()
	fmt.Println(kerneltest.Not(probe(fmt.Errorf("%w: no reply", kerneltest.ErrUnreachable))).Run(ctx))
	fmt.Println(kerneltest.Not(probe(nil)).Run(ctx))
	fmt.Println(kerneltest.Not(probe(errors.New("ping: command not found"))).Run(ctx))
	// Output:
	// <nil>
	// kerneltest: probe succeeded, expected it to fail as unreachable
	// ping: command not found
}

func ExampleStack() {
	for _, s := range []kerneltest.Stack{kerneltest.DualStack, kerneltest.IPv4Only, kerneltest.IPv6Only} {
		fmt.Println(s, s.IPv4(), s.IPv6())
	}
	// Output:
	// dual true true
	// ipv4 true false
	// ipv6 false true
}

// A kernel test with one namespace: program it with netlink and the usual
// tools, then look at the result. (Examples cannot receive a *testing.T, so
// this one only compiles; the test body is what a TestKernel… looks like.)
func ExampleNewNS() {
	_ = func(t *testing.T) {
		ns := kerneltest.NewNS(t) // skips without root, removed after the test
		kerneltest.RequireCommands(t, "iptables-restore")

		links, err := ns.Handle().LinkList()
		if err != nil || len(links) != 1 {
			t.Fatalf("want only lo, got %v, %v", links, err)
		}
		rules := "*filter\n:NP-TEST - [0:0]\nCOMMIT\n"
		if _, err := ns.ExecInput(t.Context(), strings.NewReader(rules), "iptables-restore", "--noflush"); err != nil {
			t.Fatal(err)
		}
		if err := ns.SetSysctl("net.ipv4.ip_forward", "1"); err != nil {
			t.Fatal(err)
		}
	}
}

// Two hosts with a pod each: pods cannot reach each other until something
// routes between the hosts. (Compile-only, like ExampleNewNS.)
func ExampleNewTopology() {
	_ = func(t *testing.T) {
		topo := kerneltest.NewTopology(t, kerneltest.TopologyOptions{Hosts: 2, PodsPerHost: 1})
		a, b := topo.Hosts[0].Pods[0], topo.Hosts[1].Pods[0]

		kerneltest.RequireUnreachable(t, a.NS, b.IPv4)
		if err := topo.AddPodRoutesViaUnderlay(); err != nil {
			t.Fatal(err)
		}
		for _, addr := range b.Addrs() {
			kerneltest.RequireReachable(t, a.NS, addr)
		}
		server, _ := b.NS.ListenTCP(t, netip.AddrPortFrom(b.IPv6, 0))
		kerneltest.Eventually(t, 5*time.Second, kerneltest.TCPCheck(a.NS, server))
	}
}
