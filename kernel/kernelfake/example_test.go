package kernelfake_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"syscall"

	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
)

var ctx = context.Background()

// A Namespace is a kernel.Kernel: hand it to the code under test, then
// look at what it did.
func Example() {
	ns := kernelfake.New(kernelfake.Options{})
	var k kernel.Kernel = ns // what a driver takes

	br, _ := k.AddLink(ctx, kernel.Link{Name: "br0", Kind: kernel.KindBridge})
	_ = k.AddAddr(ctx, kernel.Addr{LinkIndex: br.Index, Prefix: netip.MustParsePrefix("10.0.0.1/24")})
	route := kernel.Route{Family: kernel.IPv4, Dst: netip.MustParsePrefix("10.1.0.0/16"), Type: kernel.RTNUnicast,
		Protocol: 99, Gateway: netip.MustParseAddr("10.0.0.254")}
	ops := []kernel.RouteOp{{Kind: kernel.OpAdd, Route: route}}
	fmt.Println(k.ApplyRoutes(ctx, ops)) // br0 is down: no connected route to the gateway
	_ = k.SetLinkUp(ctx, br.Index, true)
	fmt.Println(k.ApplyRoutes(ctx, ops))
	for _, r := range ns.Routes(kernel.IPv4, kernel.TableMain) {
		fmt.Println(r.Dst, r.Gateway, r.OIF == br.Index, r.Protocol)
	}
	// Output:
	// [kernel: add route 10.1.0.0/16 table 254: gateway 10.0.0.254: network is unreachable]
	// [<nil>]
	// 10.0.0.0/24 invalid IP true 2
	// 10.1.0.0/16 10.0.0.254 true 99
}

// New starts as a fresh namespace with lo up.
func ExampleNew() {
	ns := kernelfake.New(kernelfake.Options{Name: "node"})
	links, _ := ns.Links(ctx)
	fmt.Println(ns, links[0].Name, links[0].State(), ns.LinkAddrs("lo"))
	v, _ := ns.Sysctl(ctx, "net.ipv4.ip_forward")
	fmt.Println("ip_forward", v)
	_, err := ns.AddLink(ctx, kernel.Link{Name: "wg0", Kind: kernel.KindWireGuard})
	fmt.Println(errors.Is(err, kernel.ErrNotSupported))
	// Output:
	// kernelfake node lo up [127.0.0.1/8 ::1/128]
	// ip_forward 0
	// true
}

// NewNamespace makes another namespace of the same machine: a veth can
// have its peer there.
func ExampleNamespace_NewNamespace() {
	host := kernelfake.New(kernelfake.Options{})
	pod := host.NewNamespace(kernelfake.Options{Name: "pod"})
	veth, _ := host.AddLink(ctx, kernel.Link{Name: "cali1", Kind: kernel.KindVeth,
		Veth: &kernel.Veth{PeerName: "eth0", PeerNamespaceFD: pod.FD()}})
	eth0, _ := pod.Link("eth0")
	_ = host.SetLinkUp(ctx, veth.Index, true)
	l, _ := host.Link("cali1")
	fmt.Println(l.State()) // no carrier until its peer is up
	_ = pod.SetLinkUp(ctx, eth0.Index, true)
	l, _ = host.Link("cali1")
	fmt.Println(l.State())
	// Output:
	// down
	// up
}

// Fail makes calls fail, per call or (for batched writes) per operation.
func ExampleNamespace_Fail() {
	ns := kernelfake.New(kernelfake.Options{})
	ns.Fail(kernelfake.OpLinks, 1, nil)
	_, err := ns.Links(ctx)
	fmt.Println(err)
	_, err = ns.Links(ctx)
	fmt.Println(err)

	ns.Fail(kernelfake.OpApplyRoutes, 1, syscall.EBUSY)
	blackhole := func(dst string) kernel.RouteOp {
		return kernel.RouteOp{Kind: kernel.OpReplace, Route: kernel.Route{Family: kernel.IPv4, Dst: netip.MustParsePrefix(dst), Type: kernel.RTNBlackhole}}
	}
	fmt.Println(ns.ApplyRoutes(ctx, []kernel.RouteOp{blackhole("10.1.0.0/24"), blackhole("10.2.0.0/24")}))
	// Output:
	// kernelfake: injected failure (input/output error)
	// <nil>
	// [kernel: replace route 10.1.0.0/24 table 254: device or resource busy <nil>]
}

// Refuse makes the kernel refuse chosen objects, every time.
func ExampleNamespace_Refuse() {
	ns := kernelfake.New(kernelfake.Options{})
	ns.Refuse(func(op kernelfake.Op, obj any) error {
		if l, ok := obj.(kernel.Link); ok && strings.HasPrefix(l.Name, "bad") {
			return syscall.EPERM
		}
		return nil
	})
	_, err := ns.AddLink(ctx, kernel.Link{Name: "bad0", Kind: kernel.KindBridge})
	fmt.Println(err)
	_, err = ns.AddLink(ctx, kernel.Link{Name: "good0", Kind: kernel.KindBridge})
	fmt.Println(err)
	// Output:
	// kernelfake: AddLink refused: operation not permitted
	// <nil>
}

// Calls and Writes count what the code under test asked for; the Admin
// view is not counted.
func ExampleNamespace_Calls() {
	ns := kernelfake.New(kernelfake.Options{})
	_, _ = ns.Admin().AddLink(ctx, kernel.Link{Name: "br0", Kind: kernel.KindBridge}) // test setup
	_, _ = ns.Links(ctx)
	l, _ := ns.LinkByName(ctx, "br0")
	_ = ns.SetLinkUp(ctx, l.Index, true)
	fmt.Println(ns.Calls(kernelfake.OpLinks), ns.Calls(kernelfake.OpAddLink), ns.Writes())
	ns.ResetCounts()
	fmt.Println(ns.Writes())
	// Output:
	// 1 0 1
	// 0
}

// Admin changes the namespace behind the back of the code under test, as
// another agent or an administrator would: never counted, failed or
// refused.
func ExampleNamespace_Admin() {
	ns := kernelfake.New(kernelfake.Options{})
	ns.Fail(kernelfake.OpAddLink, -1, nil) // the code under test cannot add links
	_, err := ns.Admin().AddLink(ctx, kernel.Link{Name: "foreign0", Kind: kernel.KindBridge})
	fmt.Println(err, ns.Writes())
	// Output:
	// <nil> 0
}

// Subscribe streams a Resync, then every change; Overflow drops what is
// queued and sends another Resync.
func ExampleNamespace_Subscribe() {
	ns := kernelfake.New(kernelfake.Options{})
	sub, cancel := context.WithCancel(ctx)
	defer cancel()
	events, _ := ns.Subscribe(sub, kernel.EventLinks)
	ev := <-events
	fmt.Println("resync", ev.Resync.Reason)
	_, _ = ns.AddLink(ctx, kernel.Link{Name: "br0", Kind: kernel.KindBridge})
	ev = <-events
	fmt.Println("link", ev.Link.Link.Name, ev.Link.Deleted)
	_ = ns.SetLinkMTU(ctx, ev.Link.Link.Index, 9000)
	ns.Overflow()
	ev = <-events
	fmt.Println("resync", errors.Is(ev.Resync.Reason, kernel.ErrOverflow))
	// Output:
	// resync <nil>
	// link br0 false
	// resync true
}

// Runner serves the iptables and ipset binaries from the fakes it holds;
// any other binary is missing.
func ExampleNamespace_Runner() {
	ns := kernelfake.New(kernelfake.Options{})
	r := ns.Runner()
	_, _ = r.Run(ctx, strings.NewReader("create blocked hash:ip family inet\nadd blocked 192.0.2.1\n"), "ipset", "restore")
	out, _ := r.Run(ctx, nil, "ipset", "list", "-name")
	fmt.Print(string(out))
	members, _ := ns.IPSets().Members("blocked")
	fmt.Println(members)
	_, err := r.Run(ctx, nil, "nft", "list", "ruleset")
	fmt.Println(err)
	// Output:
	// blocked
	// [192.0.2.1]
	// nft list ruleset: exec: "nft": executable file not found in $PATH
}

// SetCarrier takes a link's carrier away: its routes stay, marked
// linkdown.
func ExampleNamespace_SetCarrier() {
	ns := kernelfake.New(kernelfake.Options{})
	br, _ := ns.AddLink(ctx, kernel.Link{Name: "br0", Kind: kernel.KindBridge})
	_ = ns.SetLinkUp(ctx, br.Index, true)
	_ = ns.AddAddr(ctx, kernel.Addr{LinkIndex: br.Index, Prefix: netip.MustParsePrefix("10.0.0.1/24")})
	_ = ns.SetCarrier("br0", false)
	l, _ := ns.Link("br0")
	r := ns.Routes(kernel.IPv4, kernel.TableMain)[0]
	fmt.Println(l.AdminUp, l.Running, r.Dst, r.Flags&kernel.FlagLinkdown != 0)
	// Output:
	// true false 10.0.0.0/24 true
}

// AddTUN makes a tun device as a process opening /dev/net/tun would.
func ExampleNamespace_AddTUN() {
	ns := kernelfake.New(kernelfake.Options{})
	tun, _ := ns.AddTUN("wg0")
	_ = ns.SetLinkUp(ctx, tun.Index, true)
	l, _ := ns.Link("wg0")
	fmt.Println(l.Kind, l.State())
	_ = ns.SetCarrier("wg0", true) // the process attached
	l, _ = ns.Link("wg0")
	fmt.Println(l.State())
	// Output:
	// tun down
	// up
}

// AddFlow seeds conntrack; DeleteConntrack deletes by address.
func ExampleNamespace_AddFlow() {
	ns := kernelfake.New(kernelfake.Options{})
	a, b := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	ns.AddFlow(kernelfake.Flow{Family: kernel.IPv4, Src: a, Dst: b})
	ns.AddFlow(kernelfake.Flow{Family: kernel.IPv4, Src: b, Dst: netip.MustParseAddr("10.0.0.3")})
	n, _ := ns.DeleteConntrack(ctx, kernel.IPv4, []netip.Addr{a})
	fmt.Println(n, len(ns.Flows()))
	// Output:
	// 1 1
}

// Dump shows the whole namespace, for failure messages.
func ExampleNamespace_Dump() {
	ns := kernelfake.New(kernelfake.Options{Name: "node"})
	fmt.Print(ns.Dump())
	// Output:
	// namespace node
	// link 1 lo device mtu 65536 up,running
	//   addr 127.0.0.1/8
	//   addr ::1/128
	// route local 127.0.0.0/8 table 255 proto 2 scope 254 metric 0 dev lo src 127.0.0.1
	// route local 127.0.0.1/32 table 255 proto 2 scope 254 metric 0 dev lo src 127.0.0.1
	// route broadcast 127.255.255.255/32 table 255 proto 2 scope 253 metric 0 dev lo src 127.0.0.1
	// route local ::1/128 table 255 proto 2 scope 0 metric 0 dev lo
	// rule IPv4 0 action 1 table 255
	// rule IPv4 32766 action 1 table 254
	// rule IPv4 32767 action 1 table 253
	// rule IPv6 0 action 1 table 255
	// rule IPv6 32766 action 1 table 254
}

// Options.Kinds models a kernel with other link modules.
func ExampleOptions() {
	ns := kernelfake.New(kernelfake.Options{Kinds: append(kernelfake.DefaultKinds(), kernel.KindIPIP)})
	_, err := ns.AddLink(ctx, kernel.Link{Name: "tunl0", Kind: kernel.KindIPIP})
	fmt.Println(err)
	// Output:
	// <nil>
}
