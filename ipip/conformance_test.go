package ipip_test

import (
	"context"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"testing"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/internal/testkit/drivertest"
	"github.com/nodeplane/nodeplane/ipip"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
)

// TestConformance runs the driver conformance suite on the Driver alone,
// on fake namespaces that model the ipip module (this project's kernel has
// none, so there is no kernel run: TestKernelPlan says so). The device is
// np-ipip, one the Driver creates and deletes; tunl0, which the kernel
// never deletes, runs through the overlay's conformance suite.
func TestConformance(t *testing.T) {
	env := drivertest.FakeWith(kernelfake.Options{Name: "ipip", Kinds: append(kernelfake.DefaultKinds(), kernel.KindIPIP)})
	drivertest.Run(t, env, confSubject)
}

// confVariant is the one Driver identity: its device name.
type confVariant struct{ name string }

func (v confVariant) String() string { return v.name }

var (
	confLocal   = netip.MustParseAddr("198.18.0.1")
	confAddress = netip.MustParseAddr("10.244.1.250")
)

var confSubject = drivertest.Subject[*ipip.Driver, confVariant]{
	Variants: []confVariant{{"np-ipip"}},
	Setup: func(t testing.TB, k kernel.Kernel, _ confVariant) {
		ctx := context.Background()
		l, err := k.AddLink(ctx, kernel.Link{Name: "eth0", Kind: kernel.KindBridge})
		if err != nil {
			t.Fatalf("eth0: %v", err)
		}
		if err := k.AddAddr(ctx, kernel.Addr{LinkIndex: l.Index, Prefix: netip.PrefixFrom(confLocal, 24)}); err != nil {
			t.Fatalf("address of eth0: %v", err)
		}
		if err := k.SetLinkUp(ctx, l.Index, true); err != nil {
			t.Fatalf("eth0 up: %v", err)
		}
	},
	New: func(k kernel.Kernel, clk clock.Clock, v confVariant) (*ipip.Driver, error) {
		return ipip.NewDriver(ipip.DriverOptions{Kernel: k, Name: v.name, Clock: clk})
	},
	Declare: func(d *ipip.Driver, _ confVariant) error {
		return d.SetDevice(&ipip.Device{Local: confLocal, Address: confAddress, MTU: 1400})
	},
	Withdraw: func(d *ipip.Driver, _ confVariant) error { return d.SetDevice(nil) },
	Check: func(t testing.TB, k kernel.Kernel, v confVariant) {
		var ours []string
		for _, l := range confDump(t, k, v) {
			if strings.HasPrefix(l, "link "+v.name+" ") || strings.HasSuffix(l, " dev "+v.name) {
				ours = append(ours, l)
			}
		}
		drivertest.SameLines(t, "our device and its address", ours, []string{
			"addr 10.244.1.250/32 dev " + v.name,
			"link " + v.name + " local 198.18.0.1 remote invalid IP mtu 1400 up true",
		})
	},
	Dump: confDump,
	Foreign: func(t testing.TB, k kernel.Kernel, _ confVariant, at drivertest.Stage) {
		// Another IPIP device per stage, of other ends, with an address.
		ctx := context.Background()
		n := byte(at)
		l, err := k.AddLink(ctx, kernel.Link{Name: fmt.Sprintf("fx%d", n), Kind: kernel.KindIPIP, MTU: 1300,
			IPTunnel: &kernel.IPTunnel{Local: netip.AddrFrom4([4]byte{198, 18, 0, 10 + n})}})
		if err != nil {
			t.Fatalf("foreign device: %v", err)
		}
		if err := k.AddAddr(ctx, kernel.Addr{LinkIndex: l.Index, Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 99, 0, n}), 32)}); err != nil {
			t.Fatalf("foreign address: %v", err)
		}
	},
	Delete: func(t testing.TB, k kernel.Kernel, v confVariant) {
		ctx := context.Background()
		l, err := k.LinkByName(ctx, v.name)
		if err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
		if err := k.DeleteAddr(ctx, kernel.Addr{LinkIndex: l.Index, Prefix: netip.PrefixFrom(confAddress, 32)}); err != nil {
			t.Fatalf("deleting the tunnel address: %v", err)
		}
	},
	BadInputs: []drivertest.BadInput[*ipip.Driver, confVariant]{
		{Name: "IPv6 local address", Declare: func(d *ipip.Driver, _ confVariant) error {
			return d.SetDevice(&ipip.Device{Local: netip.MustParseAddr("fd00::1")})
		}},
		{Name: "no local address", Declare: func(d *ipip.Driver, _ confVariant) error {
			return d.SetDevice(&ipip.Device{Address: confAddress})
		}},
		{Name: "IPv6 tunnel address", Declare: func(d *ipip.Driver, _ confVariant) error {
			return d.SetDevice(&ipip.Device{Local: confLocal, Address: netip.MustParseAddr("fd00::2")})
		}},
		{Name: "MTU below 68", Declare: func(d *ipip.Driver, _ confVariant) error {
			return d.SetDevice(&ipip.Device{Local: confLocal, MTU: 20})
		}},
	},
}

// confDump renders every IPIP device (its ends, MTU and up state) and the
// IPv4 addresses on them.
func confDump(t testing.TB, k kernel.Kernel, _ confVariant) []string {
	ctx := context.Background()
	links, err := k.Links(ctx)
	if err != nil {
		t.Fatalf("links: %v", err)
	}
	names := map[int]string{}
	var out []string
	for _, l := range links {
		if l.Kind != kernel.KindIPIP {
			continue
		}
		names[l.Index] = l.Name
		var local, remote netip.Addr
		if l.IPTunnel != nil {
			local, remote = l.IPTunnel.Local, l.IPTunnel.Remote
		}
		out = append(out, fmt.Sprintf("link %s local %s remote %s mtu %d up %v", l.Name, local, remote, l.MTU, l.AdminUp))
	}
	addrs, err := k.Addrs(ctx, kernel.IPv4)
	if err != nil {
		t.Fatalf("addresses: %v", err)
	}
	for _, a := range addrs {
		if name, ok := names[a.LinkIndex]; ok {
			out = append(out, fmt.Sprintf("addr %s dev %s", a.Prefix, name))
		}
	}
	sort.Strings(out)
	return out
}
