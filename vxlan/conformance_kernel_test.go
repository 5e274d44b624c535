package vxlan_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/internal/testkit/drivertest"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/vxlan"
)

// TestConformance runs the driver conformance suite on the Driver, on a
// fake namespace.
func TestConformance(t *testing.T) { drivertest.Run(t, drivertest.Fake, confSubject) }

// TestKernelConformance runs it in fresh network namespaces of the running
// kernel.
func TestKernelConformance(t *testing.T) { drivertest.Run(t, drivertest.Kernel, confSubject) }

// confVariant is a Driver identity: a family (and so a device name).
type confVariant struct{ fam vxlan.Family }

func (v confVariant) String() string { return v.fam.String() }

func (v confVariant) dev() string { return devName(v.fam) }

// The plan: up0 (a veth, peer up1) holds node 1's underlay address; the
// device has node 1's MAC and tunnel address and MTU 1400; nodes 2 to 13
// are remote VTEPs. A foreign VXLAN device vx-other (VNI 77) on up0 holds
// foreign entries.
const confRemotes = 12

var confDevice = func(fam vxlan.Family) *vxlan.Device {
	return &vxlan.Device{Local: underlay(fam, 1), MAC: nodeMAC(fam, 1), Address: tunnelIP(fam, 1), MTU: 1400}
}

var confSubject = drivertest.Subject[*vxlan.Driver, confVariant]{
	Variants: []confVariant{{vxlan.IPv4}, {vxlan.IPv6}},
	Setup:    confSetup,
	New: func(k kernel.Kernel, clk clock.Clock, v confVariant) (*vxlan.Driver, error) {
		return vxlan.NewDriver(vxlan.DriverOptions{Kernel: k, Family: v.fam, Clock: clk})
	},
	Declare: func(d *vxlan.Driver, v confVariant) error {
		if err := d.SetDevice(confDevice(v.fam)); err != nil {
			return err
		}
		for n := 2; n < 2+confRemotes; n++ {
			if err := d.SetRemote(nodeName(n), vxlan.Remote{TunnelIP: tunnelIP(v.fam, n), MAC: nodeMAC(v.fam, n), Underlay: underlay(v.fam, n)}); err != nil {
				return err
			}
		}
		return nil
	},
	Withdraw: func(d *vxlan.Driver, v confVariant) error {
		for n := 2; n < 2+confRemotes; n++ {
			d.RemoveRemote(nodeName(n))
		}
		return d.SetDevice(nil)
	},
	Check: func(t testing.TB, k kernel.Kernel, v confVariant) {
		want := []string{fmt.Sprintf("link %s vxlan vni %d port %d local %s parent up0 mtu 1400 up true learning false mac %s",
			v.dev(), vxlan.DefaultVNI, vxlan.DefaultPort, underlay(v.fam, 1), nodeMAC(v.fam, 1)),
			fmt.Sprintf("addr %s dev %s", netip.PrefixFrom(tunnelIP(v.fam, 1), v.fam.Bits()), v.dev())}
		for n := 2; n < 2+confRemotes; n++ {
			want = append(want, fmt.Sprintf("neigh %s dev %s lladdr %s", tunnelIP(v.fam, n), v.dev(), nodeMAC(v.fam, n)),
				fmt.Sprintf("fdb %s dev %s dst %s permanent", nodeMAC(v.fam, n), v.dev(), underlay(v.fam, n)))
		}
		var got []string
		for _, l := range confDump(t, k, v) {
			if strings.Contains(l, " "+v.dev()+" ") || strings.HasSuffix(l, " "+v.dev()) {
				got = append(got, l)
			}
		}
		drivertest.SameLines(t, "our device and entries", got, want)
	},
	Dump: confDump,
	Foreign: func(t testing.TB, k kernel.Kernel, v confVariant, at drivertest.Stage) {
		switch at {
		case drivertest.BeforeApply:
			// One of our MACs and tunnel addresses, on another device.
			confForeignEntries(t, k, confOther(t, k, v), v, 2)
			confForeignNeigh(t, k, confIndex(t, k, "up0"), underlay(v.fam, 99))
		case drivertest.AfterApply:
			confForeignEntries(t, k, confOther(t, k, v), v, 3)
		case drivertest.InPlace:
			// Where Delete removed ours: the same address on another link.
			confForeignNeigh(t, k, confIndex(t, k, "up0"), tunnelIP(v.fam, 5))
		}
	},
	Delete: func(t testing.TB, k kernel.Kernel, v confVariant) {
		ctx := context.Background()
		idx := confIndex(t, k, v.dev())
		if err := k.ApplyFDB(ctx, []kernel.FDBOp{{Kind: kernel.OpDelete, Entry: kernel.FDBEntry{LinkIndex: idx, MAC: nodeMAC(v.fam, 4)}}})[0]; err != nil {
			t.Fatalf("deleting an FDB entry: %v", err)
		}
		if err := k.ApplyNeighbors(ctx, []kernel.NeighborOp{{Kind: kernel.OpDelete, Neighbor: kernel.Neighbor{LinkIndex: idx, IP: tunnelIP(v.fam, 5)}}})[0]; err != nil {
			t.Fatalf("deleting a neighbour: %v", err)
		}
	},
	BadInputs: []drivertest.BadInput[*vxlan.Driver, confVariant]{
		{Name: "remote without a node", Declare: func(d *vxlan.Driver, v confVariant) error {
			return d.SetRemote("", vxlan.Remote{TunnelIP: tunnelIP(v.fam, 50), MAC: nodeMAC(v.fam, 50), Underlay: underlay(v.fam, 50)})
		}},
		{Name: "tunnel address of the other family", Declare: func(d *vxlan.Driver, v confVariant) error {
			other := vxlan.IPv6
			if v.fam == vxlan.IPv6 {
				other = vxlan.IPv4
			}
			return d.SetRemote(nodeName(50), vxlan.Remote{TunnelIP: tunnelIP(other, 50), MAC: nodeMAC(v.fam, 50), Underlay: underlay(v.fam, 50)})
		}},
		{Name: "multicast MAC", Declare: func(d *vxlan.Driver, v confVariant) error {
			return d.SetRemote(nodeName(50), vxlan.Remote{TunnelIP: tunnelIP(v.fam, 50), MAC: net.HardwareAddr{1, 0, 0x5e, 0, 0, 1}, Underlay: underlay(v.fam, 50)})
		}},
		{Name: "unspecified underlay", Declare: func(d *vxlan.Driver, v confVariant) error {
			u := netip.IPv4Unspecified()
			if v.fam == vxlan.IPv6 {
				u = netip.IPv6Unspecified()
			}
			return d.SetRemote(nodeName(50), vxlan.Remote{TunnelIP: tunnelIP(v.fam, 50), MAC: nodeMAC(v.fam, 50), Underlay: u})
		}},
		{Name: "VNI above 24 bits", Declare: func(d *vxlan.Driver, v confVariant) error {
			dev := confDevice(v.fam)
			dev.VNI = 1 << 24
			return d.SetDevice(dev)
		}},
		{Name: "device without a local address", Declare: func(d *vxlan.Driver, v confVariant) error {
			return d.SetDevice(&vxlan.Device{MTU: 1400})
		}},
		{Name: "device MTU too small", Declare: func(d *vxlan.Driver, v confVariant) error {
			dev := confDevice(v.fam)
			dev.MTU = 10
			return d.SetDevice(dev)
		}},
	},
}

// confOther returns the index of the foreign VXLAN device vx-other (VNI
// 77, port 4790, on up0), made on first use.
func confOther(t testing.TB, k kernel.Kernel, v confVariant) int {
	ctx := context.Background()
	if l, err := k.LinkByName(ctx, "vx-other"); err == nil {
		return l.Index
	}
	other, err := k.AddLink(ctx, kernel.Link{Name: "vx-other", Kind: kernel.KindVXLAN, MAC: net.HardwareAddr{2, 0x77, 0, 0, 0, 1},
		VXLAN: &kernel.VXLAN{VNI: 77, Port: 4790, ParentIndex: confIndex(t, k, "up0"), Local: underlay(v.fam, 1)}})
	if err != nil {
		t.Fatalf("foreign device: %v", err)
	}
	if err := k.SetLinkUp(ctx, other.Index, true); err != nil {
		t.Fatalf("foreign device up: %v", err)
	}
	return other.Index
}

// confForeignEntries adds node n's MAC (towards another underlay address)
// and tunnel address as permanent entries of the foreign device.
func confForeignEntries(t testing.TB, k kernel.Kernel, idx int, v confVariant, n int) {
	ctx := context.Background()
	if err := k.ApplyFDB(ctx, []kernel.FDBOp{{Kind: kernel.OpAdd, Entry: kernel.FDBEntry{LinkIndex: idx, MAC: nodeMAC(v.fam, n), Dst: underlay(v.fam, 200+n), Permanent: true}}})[0]; err != nil {
		t.Fatalf("foreign FDB entry: %v", err)
	}
	confForeignNeigh(t, k, idx, tunnelIP(v.fam, n))
}

func confForeignNeigh(t testing.TB, k kernel.Kernel, idx int, ip netip.Addr) {
	err := k.ApplyNeighbors(context.Background(), []kernel.NeighborOp{{Kind: kernel.OpAdd, Neighbor: kernel.Neighbor{LinkIndex: idx, IP: ip, MAC: net.HardwareAddr{2, 0x77, 0, 0, 0, 9}}}})[0]
	if err != nil {
		t.Fatalf("foreign neighbour %s: %v", ip, err)
	}
}

func confIndex(t testing.TB, k kernel.Kernel, name string) int {
	l, err := k.LinkByName(context.Background(), name)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return l.Index
}

// confSetup makes up0 (a veth pair, both up) with node 1's underlay
// address; IPv6 without duplicate address detection or link-local
// addresses, which would differ between namespaces.
func confSetup(t testing.TB, k kernel.Kernel, v confVariant) {
	ctx := context.Background()
	for _, kv := range [][2]string{
		{"net.ipv6.conf.all.accept_dad", "0"}, {"net.ipv6.conf.default.accept_dad", "0"},
		{"net.ipv6.conf.default.addr_gen_mode", "1"},
	} {
		if err := k.SetSysctl(ctx, kv[0], kv[1]); err != nil {
			t.Fatalf("sysctl %s: %v", kv[0], err)
		}
	}
	l, err := k.AddLink(ctx, kernel.Link{Name: "up0", Kind: kernel.KindVeth, Veth: &kernel.Veth{PeerName: "up1"}})
	if err != nil {
		t.Fatalf("up0: %v", err)
	}
	bits := 24
	if v.fam == vxlan.IPv6 {
		bits = 64
	}
	if err := k.AddAddr(ctx, kernel.Addr{LinkIndex: l.Index, Prefix: netip.PrefixFrom(underlay(v.fam, 1), bits)}); err != nil {
		t.Fatalf("address of up0: %v", err)
	}
	for _, n := range []string{"up1", "up0"} {
		if err := k.SetLinkUp(ctx, confIndex(t, k, n), true); err != nil {
			t.Fatalf("%s up: %v", n, err)
		}
	}
}

// confDump renders every VXLAN device (its attributes; a MAC only when it
// is not the kernel's random one), the addresses of the family on them,
// and the permanent neighbour and FDB entries of every VXLAN device.
func confDump(t testing.TB, k kernel.Kernel, v confVariant) []string {
	ctx := context.Background()
	links, err := k.Links(ctx)
	if err != nil {
		t.Fatalf("links: %v", err)
	}
	names := map[int]string{}
	for _, l := range links {
		names[l.Index] = l.Name
	}
	var out []string
	vx := map[int]bool{}
	for _, l := range links {
		if l.Kind != kernel.KindVXLAN {
			continue
		}
		vx[l.Index] = true
		x := l.VXLAN
		mac := "random" // the kernel's choice differs between namespaces
		if slices.Equal(l.MAC, nodeMAC(v.fam, 1)) || slices.Equal(l.MAC, net.HardwareAddr{2, 0x77, 0, 0, 0, 1}) {
			mac = l.MAC.String()
		}
		out = append(out, fmt.Sprintf("link %s vxlan vni %d port %d local %s parent %s mtu %d up %v learning %v mac %s",
			l.Name, x.VNI, x.Port, x.Local, names[x.ParentIndex], l.MTU, l.AdminUp, x.Learning, mac))
	}
	addrs, err := k.Addrs(ctx, v.fam)
	if err != nil {
		t.Fatalf("addresses: %v", err)
	}
	for _, a := range addrs {
		if vx[a.LinkIndex] && !a.Prefix.Addr().IsLinkLocalUnicast() {
			out = append(out, fmt.Sprintf("addr %s dev %s", a.Prefix, names[a.LinkIndex]))
		}
	}
	entries := drivertest.PermanentNeighbors(t, k, v.fam)
	fdb, err := k.FDB(ctx, 0)
	if err != nil {
		t.Fatalf("FDB: %v", err)
	}
	for _, e := range fdb {
		if vx[e.LinkIndex] {
			perm := ""
			if e.Permanent {
				perm = " permanent"
			}
			entries = append(entries, fmt.Sprintf("fdb %s dev %s dst %s%s", e.MAC, names[e.LinkIndex], e.Dst, perm))
		}
	}
	sort.Strings(entries)
	return append(out, entries...)
}
