//go:build linux

package kernel

import (
	"context"
	"encoding/json"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// neighAddr returns the i-th neighbour address inside v0's subnets.
func neighAddr(v4 bool, i int) netip.Addr {
	if v4 {
		return netip.AddrFrom4([4]byte{10, 255, byte(i >> 8), byte(i)})
	}
	return netip.AddrFrom16([16]byte{0xfd, 0x00, 0x02, 0x55, 14: byte(i >> 8), 15: byte(i)})
}

// neighOracle lists with the netlink library.
func neighOracle(t *testing.T, e *kernelEnv, f Family, link int) []Neighbor {
	t.Helper()
	ns, err := e.kns.Handle().NeighList(link, f.AF())
	require.NoError(t, err)
	var out []Neighbor
	for _, n := range ns {
		a := familyAddr(n.IP, f)
		if !a.IsValid() {
			continue
		}
		nb := Neighbor{LinkIndex: n.LinkIndex, IP: a, State: uint16(n.State)}
		if len(n.HardwareAddr) > 0 {
			nb.MAC = n.HardwareAddr
		}
		out = append(out, nb)
	}
	return out
}

func sameNeighbors(t *testing.T, want, got []Neighbor, msg string) {
	t.Helper()
	key := func(n Neighbor) string { return n.IP.String() + "|" + n.MAC.String() + "|" + string(rune(n.LinkIndex)) }
	w, g := make([]string, len(want)), make([]string, len(got))
	for i := range want {
		w[i] = key(want[i])
	}
	for i := range got {
		g[i] = key(got[i])
	}
	slices.Sort(w)
	slices.Sort(g)
	assert.Equal(t, w, g, msg)
}

func TestKernelNeighbors(t *testing.T) {
	e := newKernelEnv(t)
	ctx := context.Background()
	const n = 200
	var ops []NeighborOp
	for i := range n {
		for _, v4 := range []bool{true, false} {
			ops = append(ops, NeighborOp{Kind: OpReplace, Neighbor: Neighbor{LinkIndex: e.links.v0, IP: neighAddr(v4, 10+i), MAC: mac(i)}})
		}
	}
	ops = append(ops,
		NeighborOp{Kind: OpReplace, Neighbor: Neighbor{LinkIndex: e.links.v1, IP: netip.MustParseAddr("10.9.9.9"), MAC: mac(999), State: NUDNoARP}},
		NeighborOp{Kind: OpReplace, Neighbor: Neighbor{LinkIndex: e.links.v1, IP: netip.MustParseAddr("fd09::9"), MAC: mac(999), State: NUDNoARP}},
	)
	for i, err := range e.ns.ApplyNeighbors(ctx, ops) {
		require.NoError(t, err, "op %d", i)
	}
	for _, f := range []Family{IPv4, IPv6} {
		for _, link := range []int{0, e.links.v0, e.links.v1} {
			got, err := e.ns.Neighbors(ctx, f, link)
			require.NoError(t, err)
			sameNeighbors(t, neighOracle(t, e, f, link), got, "the netlink library sees the same")
			for _, op := range ops {
				want := op.Neighbor
				if want.State == 0 {
					want.State = NUDPermanent
				}
				if ipFamilyOf(want.IP) == f && (link == 0 || link == want.LinkIndex) {
					assert.Contains(t, got, want)
				} else {
					assert.NotContains(t, got, want)
				}
			}
		}
	}

	// The kernel filters by interface (strict dump checking).
	c := e.conn(t)
	counted := &countingTransport{transport: c.t}
	c.t = counted
	_, err := e.ns.Neighbors(ctx, IPv4, 0)
	require.NoError(t, err)
	all := counted.received
	counted.received = 0
	_, err = e.ns.Neighbors(ctx, IPv4, e.links.v1)
	require.NoError(t, err)
	assert.Less(t, counted.received, all/10, "only v1's entries were sent")

	// Replace changes the MAC; add refuses an existing entry; delete needs
	// only the key and refuses a missing entry.
	moved := Neighbor{LinkIndex: e.links.v0, IP: neighAddr(true, 10), MAC: mac(5000)}
	errs := e.ns.ApplyNeighbors(ctx, []NeighborOp{
		{Kind: OpReplace, Neighbor: moved},
		{Kind: OpAdd, Neighbor: Neighbor{LinkIndex: e.links.v0, IP: neighAddr(false, 10), MAC: mac(1)}},
		{Kind: OpDelete, Neighbor: Neighbor{LinkIndex: e.links.v0, IP: neighAddr(false, 11)}},
		{Kind: OpDelete, Neighbor: Neighbor{LinkIndex: e.links.v0, IP: neighAddr(false, 5000)}},
		{Kind: OpReplace, Neighbor: Neighbor{LinkIndex: e.links.v0, IP: neighAddr(true, 5001)}},
		{Kind: OpReplace, Neighbor: Neighbor{LinkIndex: 99999, IP: neighAddr(true, 5002), MAC: mac(1)}},
		{Kind: OpAdd, Neighbor: Neighbor{LinkIndex: e.links.v0, IP: neighAddr(false, 5003), MAC: mac(2)}},
	})
	assert.NoError(t, errs[0])
	assert.ErrorIs(t, errs[1], ErrExists)
	assert.ErrorIs(t, errs[1], unix.EEXIST)
	assert.NoError(t, errs[2])
	assert.ErrorIs(t, errs[3], ErrNotFound)
	assert.ErrorIs(t, errs[4], ErrInvalid, "no MAC: refused before sending")
	assert.ErrorIs(t, errs[5], ErrNotFound, "no such interface")
	assert.ErrorIs(t, errs[5], unix.ENODEV)
	assert.NoError(t, errs[6])
	for i, err := range errs {
		t.Logf("op %d: %v", i, err)
	}
	got4, err := e.ns.Neighbors(ctx, IPv4, e.links.v0)
	require.NoError(t, err)
	assert.Contains(t, got4, Neighbor{LinkIndex: e.links.v0, IP: moved.IP, MAC: moved.MAC, State: NUDPermanent})
	got6, err := e.ns.Neighbors(ctx, IPv6, e.links.v0)
	require.NoError(t, err)
	assert.False(t, slices.ContainsFunc(got6, func(n Neighbor) bool { return n.IP == neighAddr(false, 11) }))
	assert.True(t, slices.ContainsFunc(got6, func(n Neighbor) bool { return n.IP == neighAddr(false, 5003) }))
	_, err = e.ns.Neighbors(ctx, 0, 0)
	assert.ErrorIs(t, err, ErrInvalid)
}

// ipNeighProtocols lists the protocols of the permanent neighbour entries
// of family on v0 as iproute2 shows them (an independent decoder of
// NDA_PROTOCOL), by address ("" for none).
func ipNeighProtocols(t *testing.T, e *kernelEnv, f Family) map[netip.Addr]string {
	t.Helper()
	out, err := e.kns.Exec(context.Background(), "ip", "-N", "-j", "-"+strings.TrimPrefix(f.String(), "IPv"), "neigh", "show", "dev", "v0", "nud", "permanent")
	require.NoError(t, err)
	var entries []struct {
		Dst      string `json:"dst"`
		Protocol string `json:"protocol"`
	}
	require.NoError(t, json.Unmarshal(out, &entries), "%s", out)
	m := map[netip.Addr]string{}
	for _, en := range entries {
		m[netip.MustParseAddr(en.Dst)] = en.Protocol
	}
	return m
}

// TestKernelNeighborProtocol checks the ownership mark drivers rely on:
// NDA_PROTOCOL written with Protocol comes back in dumps (and iproute2
// shows it), an entry written without one reports 0, a replace without a
// protocol keeps the entry's, a replace with another changes it, an add
// of an existing entry changes nothing, and an entry iproute2 wrote with a
// protocol is read with it.
func TestKernelNeighborProtocol(t *testing.T) {
	e := newKernelEnv(t)
	ctx := context.Background()
	for _, v4 := range []bool{true, false} {
		f := IPv6
		if v4 {
			f = IPv4
		}
		n := func(i int, proto uint8) Neighbor {
			return Neighbor{LinkIndex: e.links.v0, IP: neighAddr(v4, i), MAC: mac(i), Protocol: proto}
		}
		for i, err := range e.ns.ApplyNeighbors(ctx, []NeighborOp{
			{Kind: OpReplace, Neighbor: n(1, 78)},
			{Kind: OpReplace, Neighbor: n(2, 0)},
			{Kind: OpReplace, Neighbor: n(3, 78)},
			{Kind: OpReplace, Neighbor: n(4, 78)},
			{Kind: OpReplace, Neighbor: n(5, 78)},
		}) {
			require.NoError(t, err, "%v op %d", f, i)
		}
		moved := n(3, 0)
		moved.MAC = mac(300)
		errs := e.ns.ApplyNeighbors(ctx, []NeighborOp{
			{Kind: OpReplace, Neighbor: moved},   // keeps 78
			{Kind: OpReplace, Neighbor: n(4, 4)}, // becomes 4
			{Kind: OpAdd, Neighbor: n(5, 9)},     // exists: unchanged
		})
		assert.NoError(t, errs[0])
		assert.NoError(t, errs[1])
		assert.ErrorIs(t, errs[2], ErrExists)
		cmd := []string{"ip", "-" + strings.TrimPrefix(f.String(), "IPv"), "neigh", "replace", neighAddr(v4, 6).String(),
			"lladdr", mac(6).String(), "dev", "v0", "nud", "permanent", "protocol", "12"}
		_, err := e.kns.Exec(ctx, cmd[0], cmd[1:]...)
		require.NoError(t, err)

		got, err := e.ns.Neighbors(ctx, f, e.links.v0)
		require.NoError(t, err)
		protos := map[netip.Addr]uint8{}
		for _, g := range got {
			if g.State&NUDPermanent != 0 {
				protos[g.IP] = g.Protocol
			}
		}
		want := map[netip.Addr]uint8{neighAddr(v4, 1): 78, neighAddr(v4, 2): 0, neighAddr(v4, 3): 78, neighAddr(v4, 4): 4,
			neighAddr(v4, 5): 78, neighAddr(v4, 6): 12}
		assert.Equal(t, want, protos, "%v", f)
		assert.Contains(t, got, Neighbor{LinkIndex: e.links.v0, IP: moved.IP, MAC: moved.MAC, State: NUDPermanent, Protocol: 78})
		shown := map[netip.Addr]string{}
		for a, p := range want {
			shown[a] = ""
			if p != 0 {
				shown[a] = strconv.Itoa(int(p))
			}
		}
		assert.Equal(t, shown, ipNeighProtocols(t, e, f), "iproute2 sees the same protocols")
	}
}

// fdbOracle lists a device's own FDB entries with the netlink library.
func fdbOracle(t *testing.T, e *kernelEnv, link int) []FDBEntry {
	t.Helper()
	ns, err := e.kns.Handle().NeighList(link, unix.AF_BRIDGE)
	require.NoError(t, err)
	var out []FDBEntry
	for _, n := range ns {
		if n.Flags&unix.NTF_SELF == 0 || n.LinkIndex != link {
			continue
		}
		out = append(out, FDBEntry{LinkIndex: n.LinkIndex, MAC: n.HardwareAddr, Dst: addrOfIP(n.IP), Permanent: n.State&unix.NUD_PERMANENT != 0})
	}
	return out
}

func sameFDB(t *testing.T, want, got []FDBEntry) {
	t.Helper()
	key := func(e FDBEntry) string { return e.MAC.String() + " " + e.Dst.String() }
	sort := func(es []FDBEntry) []FDBEntry {
		es = slices.Clone(es)
		slices.SortFunc(es, func(a, b FDBEntry) int {
			if ka, kb := key(a), key(b); ka != kb {
				if ka < kb {
					return -1
				}
				return 1
			}
			return 0
		})
		return es
	}
	assert.Equal(t, sort(want), sort(got))
}

// TestKernelFDB checks the VXLAN FDB semantics the writer relies on: a
// replace of a unicast MAC moves it to its new remote, the all-zeros MAC
// keeps a list of remotes that replace cannot touch and append extends,
// and a delete with a remote removes that remote only.
func TestKernelFDB(t *testing.T) {
	for _, v4 := range []bool{true, false} {
		t.Run(map[bool]string{true: "ipv4 underlay", false: "ipv6 underlay"}[v4], func(t *testing.T) {
			e := newKernelEnv(t)
			ctx := context.Background()
			local := testAddr4.Addr()
			if !v4 {
				local = testAddr6.Addr()
			}
			vx := addVXLAN(t, e.kns.Handle(), "np-vx", e.links.v0, local)
			vtep := func(i int) netip.Addr {
				if v4 {
					return netip.AddrFrom4([4]byte{192, 0, 2, byte(i)})
				}
				return netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 15: byte(i)})
			}
			entry := func(m net.HardwareAddr, d int) FDBEntry {
				return FDBEntry{LinkIndex: vx, MAC: m, Dst: vtep(d), Permanent: true}
			}
			zero := make(net.HardwareAddr, 6)

			var ops []FDBOp
			for i := range 100 {
				ops = append(ops, FDBOp{Kind: OpReplace, Entry: entry(mac(i), 1+i%50)})
			}
			for d := range 3 {
				ops = append(ops, FDBOp{Kind: OpReplace, Entry: entry(zero, 200+d)})
			}
			ops = append(ops, FDBOp{Kind: OpReplace, Entry: FDBEntry{LinkIndex: vx, MAC: mac(500), Dst: vtep(9)}}) // not permanent
			for i, err := range e.ns.ApplyFDB(ctx, ops) {
				require.NoError(t, err, "op %d", i)
			}
			got, err := e.ns.FDB(ctx, vx)
			require.NoError(t, err)
			sameFDB(t, fdbOracle(t, e, vx), got)
			assert.Len(t, got, 104, "one entry per remote")
			for _, op := range ops {
				assert.Contains(t, got, op.Entry)
			}

			// What the writer avoids: NLM_F_REPLACE on the flood entry.
			err = e.kns.Handle().NeighSet(&netlink.Neigh{LinkIndex: vx, Family: unix.AF_BRIDGE, Flags: unix.NTF_SELF,
				State: unix.NUD_PERMANENT, IP: vtep(250).AsSlice(), HardwareAddr: zero})
			assert.ErrorIs(t, err, unix.EOPNOTSUPP, "the kernel refuses to replace a remote of the all-zeros MAC")

			errs := e.ns.ApplyFDB(ctx, []FDBOp{
				{Kind: OpReplace, Entry: entry(mac(0), 77)},                   // moves
				{Kind: OpReplace, Entry: entry(zero, 201)},                    // already listed: no-op
				{Kind: OpReplace, Entry: entry(zero, 203)},                    // appended
				{Kind: OpDelete, Entry: entry(zero, 200)},                     // one remote only
				{Kind: OpAdd, Entry: entry(mac(1), 78)},                       // the MAC has an entry
				{Kind: OpDelete, Entry: entry(mac(2), 99)},                    // wrong remote
				{Kind: OpDelete, Entry: FDBEntry{LinkIndex: vx, MAC: mac(3)}}, // the whole MAC
				{Kind: OpReplace, Entry: FDBEntry{LinkIndex: vx, MAC: mac(4)[:4]}},
				{Kind: OpReplace, Entry: FDBEntry{LinkIndex: 99999, MAC: mac(4), Dst: vtep(1)}},
				{Kind: OpDelete, Entry: entry(mac(600), 1)}, // no entry for the MAC
			})
			for i, err := range errs {
				t.Logf("op %d: %v", i, err)
			}
			for _, i := range []int{0, 1, 2, 3, 5, 6} {
				assert.NoError(t, errs[i], "op %d", i)
			}
			assert.ErrorIs(t, errs[4], ErrExists)
			assert.ErrorIs(t, errs[9], ErrNotFound)
			assert.ErrorIs(t, errs[7], ErrInvalid)
			assert.ErrorIs(t, errs[8], ErrNotFound)
			got, err = e.ns.FDB(ctx, vx)
			require.NoError(t, err)
			sameFDB(t, fdbOracle(t, e, vx), got)
			assert.Contains(t, got, entry(mac(0), 77))
			assert.NotContains(t, got, entry(mac(0), 1))
			var flood []netip.Addr
			for _, en := range got {
				if slices.Equal(en.MAC, zero) {
					flood = append(flood, en.Dst)
				}
				assert.NotEqual(t, mac(3), en.MAC)
			}
			slices.SortFunc(flood, netip.Addr.Compare)
			assert.Equal(t, []netip.Addr{vtep(201), vtep(202), vtep(203)}, flood)
			assert.Contains(t, got, entry(mac(2), 3), "a delete of another remote leaves the entry")

			out, err := e.ns.Runner().Run(ctx, nil, "bridge", "fdb", "show", "dev", "np-vx")
			if err == nil {
				assert.Contains(t, string(out), "00:00:00:00:00:00 dst "+vtep(203).String()+" self permanent")
			}
		})
	}
}
