//go:build linux

package nftables_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/testkit/managertest"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/ipsets"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/kernel/kernelfake/nftablesfake"
	"github.com/nodeplane/nodeplane/masquerade"
	"github.com/nodeplane/nodeplane/netfilter"
	"github.com/nodeplane/nodeplane/nftables"
)

func newIPSets(t testing.TB, tbl *nftables.Table, prefix string) *nftables.IPSets {
	t.Helper()
	s, err := nftables.NewIPSets(tbl, nftables.IPSetsOptions{Prefix: prefix})
	require.NoError(t, err)
	return s
}

func fam(f ipfamily.Family) uint8 {
	if f == ipfamily.IPv6 {
		return nftablesfake.IPv6
	}
	return nftablesfake.IPv4
}

func TestNewIPSetsValidates(t *testing.T) {
	tbl := newTable(t, fakeOpts(nftablesfake.New()))
	_, err := nftables.NewIPSets(nil, nftables.IPSetsOptions{})
	assert.ErrorIs(t, err, nftables.ErrInvalidOptions)
	for _, p := range []string{"-np", "n p", "np/", "é"} {
		_, err = nftables.NewIPSets(tbl, nftables.IPSetsOptions{Prefix: p})
		assert.ErrorIs(t, err, nftables.ErrInvalidOptions, p)
		assert.ErrorIs(t, err, netfilter.ErrInvalidSetName, p)
	}
	_, err = nftables.NewIPSets(tbl, nftables.IPSetsOptions{Prefix: strings.Repeat("n", netfilter.MaxNameLength)})
	assert.ErrorIs(t, err, netfilter.ErrSetNameTooLong)
	s, err := nftables.NewIPSets(tbl, nftables.IPSetsOptions{Prefix: "np4-"})
	require.NoError(t, err)
	assert.Equal(t, ipfamily.IPv4, s.Family())
	assert.Equal(t, dataplane.PhaseIPSetsUpdate, s.Phase())
	assert.Equal(t, "nftables-ip-np-sets", s.Name())
	assert.Same(t, tbl, s.Table())
	name, err := s.KernelName("pools")
	require.NoError(t, err)
	assert.Equal(t, "np4-pools", name)
}

// TestIPSetsTypes declares a set of every type IPSets holds, in both
// families, with rules matching them, and checks what the Table writes.
func TestIPSetsTypes(t *testing.T) {
	for _, f := range ipfamily.All {
		t.Run(f.String(), func(t *testing.T) {
			v6 := f == ipfamily.IPv6
			a := func(v4, v6s string) netip.Addr {
				if v6 {
					return addr(v6s)
				}
				return addr(v4)
			}
			p := func(v4, v6s string) netip.Prefix {
				if v6 {
					return pfx(v6s)
				}
				return pfx(v4)
			}
			ns := nftablesfake.New()
			o := fakeOpts(ns)
			o.Family = f
			tbl := newTable(t, o)
			sets := newIPSets(t, tbl, "np-")
			require.NoError(t, sets.AddOrReplaceSet(netfilter.SetMetadata{Name: "hosts", Type: netfilter.HashIP}, []netfilter.Member{
				netfilter.IPMember(a("10.0.0.2", "fd00::2")), netfilter.IPMember(a("10.0.0.1", "fd00::1")), netfilter.IPMember(a("10.0.0.1", "fd00::1"))}))
			require.NoError(t, sets.AddOrReplaceSet(netfilter.SetMetadata{Name: "nets", Type: netfilter.HashNet}, []netfilter.Member{
				netfilter.NetMember(p("10.0.0.0/8", "fd00::/8")), netfilter.NetMember(p("192.168.1.1/32", "2001:db8::1/128"))}))
			require.NoError(t, sets.AddOrReplaceSet(netfilter.SetMetadata{Name: "svcs", Type: netfilter.HashIPPort}, []netfilter.Member{
				netfilter.IPPortMember(a("10.96.0.1", "fd96::1"), netfilter.ProtoTCP, 80), netfilter.IPPortMember(a("10.96.0.1", "fd96::1"), netfilter.ProtoUDP, 53)}))
			require.NoError(t, sets.AddOrReplaceSet(netfilter.SetMetadata{Name: "ports", Type: netfilter.BitmapPort, Range: netfilter.PortRange{First: 1000, Last: 2000}},
				[]netfilter.Member{netfilter.PortMember(1000), netfilter.PortMember(1500)}))
			name := func(n string) string {
				k, err := sets.KernelName(n)
				require.NoError(t, err)
				return k
			}
			fw := netfilter.Chain{Name: "fw", Rules: []netfilter.Rule{
				{Matches: []netfilter.Match{netfilter.SourceIPSet(name("hosts"))}, Action: netfilter.Accept()},
				{Matches: []netfilter.Match{netfilter.Not(netfilter.DestIPSet(name("nets")))}, Action: netfilter.Drop()},
				{Matches: []netfilter.Match{netfilter.IPSet(name("svcs"), netfilter.Dst, netfilter.Dst)}, Action: netfilter.Accept()},
				{Matches: []netfilter.Match{netfilter.Protocol(netfilter.ProtoTCP), netfilter.DestIPSet(name("ports"))}, Action: netfilter.Accept()},
			}}
			require.NoError(t, tbl.SetChains(fw))
			require.NoError(t, tbl.InsertRules("test", netfilter.HookInput, []netfilter.Rule{jump("fw")}))
			_, err := managertest.Pass(context.Background(), nil, sets, tbl)
			require.NoError(t, err)

			assert.Equal(t, []string{"np-hosts", "np-nets", "np-ports", "np-svcs"}, sorted(ns.Sets(fam(f), "np")))
			want := map[ipfamily.Family]map[string][]string{
				ipfamily.IPv4: {
					"np-hosts": {"10.0.0.1", "10.0.0.2"},
					"np-nets":  {"10.0.0.0", "11.0.0.0 [end]", "192.168.1.1", "192.168.1.2 [end]"},
					"np-svcs":  {"10.96.0.1 . tcp . 80", "10.96.0.1 . udp . 53"},
					"np-ports": {"1000", "1500"},
				},
				ipfamily.IPv6: {
					"np-hosts": {"fd00::1", "fd00::2"},
					"np-nets":  {"2001:db8::1", "2001:db8::2 [end]", "fd00::", "fe00:: [end]"},
					"np-svcs":  {"fd96::1 . tcp . 80", "fd96::1 . udp . 53"},
					"np-ports": {"1000", "1500"},
				},
			}
			for set, elems := range want[f] {
				assert.Equal(t, elems, ns.Elements(fam(f), "np", set), set)
			}
			for _, c := range ns.Chains(fam(f), "np") {
				if c.Name == "fw" {
					var used []string
					for _, r := range c.Rules {
						used = append(used, r.Sets...)
					}
					assert.Equal(t, []string{"np-hosts", "np-nets", "np-svcs", "np-ports"}, used)
				}
			}

			// The desired state reads back as package ipsets gives it.
			assert.Equal(t, []string{"hosts", "nets", "ports", "svcs"}, sets.Names())
			m, ok := sets.Members("hosts")
			require.True(t, ok)
			assert.Equal(t, []netfilter.Member{netfilter.IPMember(a("10.0.0.1", "fd00::1")), netfilter.IPMember(a("10.0.0.2", "fd00::2"))}, m)
			meta, ok := sets.Metadata("nets")
			require.True(t, ok)
			assert.Equal(t, netfilter.SetMetadata{Name: "nets", Type: netfilter.HashNet, Family: f, MaxSize: netfilter.DefaultMaxSize}, meta)
			meta, _ = sets.Metadata("ports")
			assert.Equal(t, netfilter.PortRange{First: 1000, Last: 2000}, meta.Range)
			_, ok = sets.Members("nope")
			assert.False(t, ok)

			// A restarted agent declares the same: nothing is written.
			ns.ResetCounts()
			again := newTable(t, o)
			sets2 := newIPSets(t, again, "np-")
			for _, n := range sets.Names() {
				meta, _ := sets.Metadata(n)
				members, _ := sets.Members(n)
				require.NoError(t, sets2.AddOrReplaceSet(meta, members))
			}
			require.NoError(t, again.SetChains(fw))
			require.NoError(t, again.InsertRules("test", netfilter.HookInput, []netfilter.Rule{jump("fw")}))
			_, err = managertest.Pass(context.Background(), nil, sets2, again)
			require.NoError(t, err)
			tx, _, _, _ := ns.Counts()
			assert.Zero(t, tx, "a restarted IPSets on the same declarations writes nothing")
		})
	}
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// TestIPSetsMemberChangesWriteOnlyThem: one member more or less in a set of
// a thousand is one element written.
func TestIPSetsMemberChangesWriteOnlyThem(t *testing.T) {
	ns := nftablesfake.New()
	tbl := newTable(t, fakeOpts(ns))
	sets := newIPSets(t, tbl, "")
	var members []netfilter.Member
	for i := range 1000 {
		members = append(members, netfilter.IPMember(netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)})))
	}
	require.NoError(t, sets.AddOrReplaceSet(netfilter.SetMetadata{Name: "many", Type: netfilter.HashIP}, members))
	require.NoError(t, tbl.InsertRules("test", netfilter.HookInput, []netfilter.Rule{{Matches: []netfilter.Match{netfilter.SourceIPSet("many")}, Action: netfilter.Accept()}}))
	apply(t, tbl)
	require.Len(t, ns.Elements(v4, "np", "many"), 1000)

	extra := netfilter.IPMember(addr("10.9.9.9"))
	steps := []struct {
		name string
		do   func() error
		want int
	}{
		{"add one", func() error { return sets.AddMembers("many", []netfilter.Member{extra, extra}) }, 1001},
		{"add it again", func() error { return sets.AddMembers("many", []netfilter.Member{extra}) }, 1001},
		{"remove one", func() error { return sets.RemoveMembers("many", []netfilter.Member{members[7], members[7]}) }, 1000},
		{"remove one not there", func() error { return sets.RemoveMembers("many", []netfilter.Member{members[7]}) }, 1000},
		{"replace with one more", func() error {
			return sets.AddOrReplaceSet(netfilter.SetMetadata{Name: "many", Type: netfilter.HashIP}, append(members, extra))
		}, 1001},
	}
	for _, s := range steps {
		ns.ResetCounts()
		require.NoError(t, s.do(), s.name)
		apply(t, tbl)
		tx, _, requests, _ := ns.Counts()
		noop := strings.Contains(s.name, "again") || strings.Contains(s.name, "not there")
		if noop {
			assert.Zero(t, tx, "%s: nothing to write", s.name)
		} else {
			assert.Equal(t, 1, requests, "%s: one element", s.name)
		}
		assert.Len(t, ns.Elements(v4, "np", "many"), s.want, s.name)
		got, _ := sets.Members("many")
		assert.Len(t, got, s.want, s.name)
	}
	got, _ := sets.Members("many")
	assert.Contains(t, got, extra)
	assert.Contains(t, got, members[7], "the replace brought it back")
}

// TestIPSetsRemoveSetWaitsForTheRules: a set the Table's rules still use
// stays until they stop using it, then goes in the same transaction as
// their change.
func TestIPSetsRemoveSetWaitsForTheRules(t *testing.T) {
	ns := nftablesfake.New()
	tbl := newTable(t, fakeOpts(ns))
	sets := newIPSets(t, tbl, "np4-")
	ctx := context.Background()
	require.NoError(t, sets.AddOrReplaceSet(netfilter.SetMetadata{Name: "pools", Type: netfilter.HashNet}, []netfilter.Member{netfilter.NetMember(pfx("10.244.0.0/16"))}))
	require.NoError(t, sets.AddOrReplaceSet(netfilter.SetMetadata{Name: "unused", Type: netfilter.HashIP}, nil))
	useIt := netfilter.Chain{Name: "fw", Rules: []netfilter.Rule{{Matches: []netfilter.Match{netfilter.SourceIPSet("np4-pools")}, Action: netfilter.Accept()}}}
	require.NoError(t, tbl.SetChains(useIt))
	require.NoError(t, tbl.InsertRules("test", netfilter.HookInput, []netfilter.Rule{jump("fw")}))
	_, err := managertest.Pass(ctx, nil, sets, tbl)
	require.NoError(t, err)
	assert.Equal(t, []string{"np4-pools", "np4-unused"}, ns.Sets(v4, "np"))

	// A set nothing uses goes at once; the one in use waits.
	require.NoError(t, sets.RemoveSet("unused"))
	require.NoError(t, sets.RemoveSet("pools"))
	require.NoError(t, sets.RemoveSet("never-declared"))
	assert.Empty(t, sets.Names())
	_, ok := sets.Members("pools")
	assert.False(t, ok)
	assert.ErrorIs(t, sets.AddMembers("pools", []netfilter.Member{netfilter.NetMember(pfx("10.0.0.0/8"))}), netfilter.ErrUnknownSet)
	_, err = managertest.Pass(ctx, nil, sets, tbl)
	require.ErrorIs(t, err, dataplane.ErrPartial)
	assert.ErrorIs(t, err, netfilter.ErrSetInUse)
	assert.ErrorIs(t, err, nftables.ErrSetInUse)
	assert.Contains(t, err.Error(), "np4-pools")
	assert.Equal(t, []string{"np4-pools"}, ns.Sets(v4, "np"), "the set in use stays, with its elements")
	assert.Equal(t, []string{"10.244.0.0", "10.245.0.0 [end]"}, ns.Elements(v4, "np", "np4-pools"))

	// The rules stop using it (a manager's CompleteDeferredWork): it goes
	// in the Table's transaction of the same pass.
	require.NoError(t, tbl.SetChains(netfilter.Chain{Name: "fw", Rules: []netfilter.Rule{acceptFrom("10.0.0.0/8")}}))
	ns.ResetCounts()
	_, err = managertest.Pass(ctx, nil, sets, tbl)
	require.NoError(t, err)
	assert.Empty(t, ns.Sets(v4, "np"))
	tx, _, _, _ := ns.Counts()
	assert.Equal(t, 1, tx)

	// Declared again, it comes back.
	require.NoError(t, sets.AddOrReplaceSet(netfilter.SetMetadata{Name: "pools", Type: netfilter.HashNet}, nil))
	apply(t, tbl)
	assert.Equal(t, []string{"np4-pools"}, ns.Sets(v4, "np"))
}

// TestIPSetsRemoveThenRedeclareWhileInUse: a removal waiting for the rules
// is cancelled by a new declaration.
func TestIPSetsRemoveThenRedeclareWhileInUse(t *testing.T) {
	ns := nftablesfake.New()
	tbl := newTable(t, fakeOpts(ns))
	sets := newIPSets(t, tbl, "")
	ctx := context.Background()
	require.NoError(t, sets.AddOrReplaceSet(netfilter.SetMetadata{Name: "s", Type: netfilter.HashIP}, []netfilter.Member{netfilter.IPMember(addr("10.0.0.1"))}))
	require.NoError(t, tbl.InsertRules("test", netfilter.HookInput, []netfilter.Rule{{Matches: []netfilter.Match{netfilter.SourceIPSet("s")}, Action: netfilter.Accept()}}))
	require.NoError(t, sets.RemoveSet("s"))
	require.NoError(t, sets.AddOrReplaceSet(netfilter.SetMetadata{Name: "s", Type: netfilter.HashIP}, []netfilter.Member{netfilter.IPMember(addr("10.0.0.2"))}))
	_, err := managertest.Pass(ctx, nil, sets, tbl)
	require.NoError(t, err, "nothing waits any more")
	assert.Equal(t, []string{"10.0.0.2"}, ns.Elements(v4, "np", "s"))
}

// TestIPSetsTypeChangeInUseRefused: the kernel cannot change a set's type
// under the rules that use it; nothing changes.
func TestIPSetsTypeChangeInUseRefused(t *testing.T) {
	ns := nftablesfake.New()
	tbl := newTable(t, fakeOpts(ns))
	sets := newIPSets(t, tbl, "")
	members := []netfilter.Member{netfilter.IPMember(addr("10.0.0.1"))}
	require.NoError(t, sets.AddOrReplaceSet(netfilter.SetMetadata{Name: "s", Type: netfilter.HashNet}, members))
	require.NoError(t, tbl.InsertRules("test", netfilter.HookInput, []netfilter.Rule{{Matches: []netfilter.Match{netfilter.SourceIPSet("s")}, Action: netfilter.Accept()}}))
	apply(t, tbl)
	err := sets.AddOrReplaceSet(netfilter.SetMetadata{Name: "s", Type: netfilter.HashIP}, members)
	require.ErrorIs(t, err, netfilter.ErrSetInUse)
	assert.ErrorIs(t, err, nftables.ErrSetInUse)
	meta, _ := sets.Metadata("s")
	assert.Equal(t, netfilter.HashNet, meta.Type)
	ns.ResetCounts()
	apply(t, tbl)
	tx, _, _, _ := ns.Counts()
	assert.Zero(t, tx)

	// Unused, it changes: deleted and created anew.
	require.NoError(t, tbl.InsertRules("test", netfilter.HookInput, nil))
	require.NoError(t, sets.AddOrReplaceSet(netfilter.SetMetadata{Name: "s", Type: netfilter.HashIP}, members))
	apply(t, tbl)
	assert.Equal(t, []string{"10.0.0.1"}, ns.Elements(v4, "np", "s"))
}

func TestIPSetsLeaveOthersSetsAlone(t *testing.T) {
	ns := nftablesfake.New()
	tbl := newTable(t, fakeOpts(ns))
	require.NoError(t, tbl.SetSets(nftables.Set{Name: "mine", Key: []nftables.KeyType{nftables.TypeAddr}}))
	sets := newIPSets(t, tbl, "")
	err := sets.AddOrReplaceSet(netfilter.SetMetadata{Name: "mine", Type: netfilter.HashIP}, nil)
	require.ErrorIs(t, err, nftables.ErrDuplicate)
	assert.Empty(t, sets.Names())
	require.NoError(t, sets.RemoveSet("mine"), "not ours: nothing to do")
	apply(t, tbl)
	assert.Equal(t, []string{"mine"}, ns.Sets(v4, "np"))
	// With a prefix of its own, it lives beside.
	prefixed := newIPSets(t, tbl, "np4-")
	require.NoError(t, prefixed.AddOrReplaceSet(netfilter.SetMetadata{Name: "mine", Type: netfilter.HashIP}, nil))
	apply(t, tbl)
	assert.Equal(t, []string{"mine", "np4-mine"}, ns.Sets(v4, "np"))
}

// call is one call of the netfilter.Sets interface.
type call struct {
	name string
	do   func(s netfilter.Sets) error
}

func replace(name string, t netfilter.SetType, members ...netfilter.Member) call {
	return call{fmt.Sprintf("replace %s %s %v", name, t, members), func(s netfilter.Sets) error {
		return s.AddOrReplaceSet(netfilter.SetMetadata{Name: name, Type: t}, members)
	}}
}

func replaceMeta(meta netfilter.SetMetadata, members ...netfilter.Member) call {
	return call{fmt.Sprintf("replace %+v %v", meta, members), func(s netfilter.Sets) error { return s.AddOrReplaceSet(meta, members) }}
}

func add(name string, members ...netfilter.Member) call {
	return call{fmt.Sprintf("add %s %v", name, members), func(s netfilter.Sets) error { return s.AddMembers(name, members) }}
}

func del(name string, members ...netfilter.Member) call {
	return call{fmt.Sprintf("del %s %v", name, members), func(s netfilter.Sets) error { return s.RemoveMembers(name, members) }}
}

func remove(name string) call {
	return call{"remove " + name, func(s netfilter.Sets) error { return s.RemoveSet(name) }}
}

func kname(name string) call {
	return call{"kernel name " + name, func(s netfilter.Sets) error { _, err := s.KernelName(name); return err }}
}

// ipsetsSentinels are the errors of package ipsets a Sets may return.
var ipsetsSentinels = []error{netfilter.ErrInvalidSetName, netfilter.ErrSetNameTooLong, netfilter.ErrUnknownSetType, netfilter.ErrWrongFamily,
	netfilter.ErrInvalidMember, netfilter.ErrInvalidSetMetadata, netfilter.ErrTooManyMembers, netfilter.ErrUnknownSet, netfilter.ErrSetInUse,
	ipfamily.ErrWrongFamily, ipfamily.ErrHostBits}

// TestIPSetsValidateAsIPSetsDoes runs the same calls on an *ipsets.IPSets
// and on an IPSets: each is accepted or refused by both, with the same
// sentinels, and leaves the same desired state; a refused call changes
// nothing, in the desired state or in what the Table writes.
func TestIPSetsValidateAsIPSetsDoes(t *testing.T) {
	for _, f := range ipfamily.All {
		t.Run(f.String(), func(t *testing.T) {
			v6 := f == ipfamily.IPv6
			other := ipfamily.IPv6
			a, o := addr("10.0.0.1"), addr("fd00::1")
			n, on := pfx("10.0.0.0/8"), pfx("fd00::/8")
			zero := addr("0.0.0.0")
			if v6 {
				other, a, o, n, on, zero = ipfamily.IPv4, o, a, on, n, addr("::")
			}
			host := netip.PrefixFrom(a, n.Bits()) // host bits set
			all := netip.PrefixFrom(zero, 0)
			ref, err := ipsets.New(ipsets.Options{Family: f, Prefix: "np4-", Kernel: kernelfake.New(kernelfake.Options{})})
			require.NoError(t, err)
			ns := nftablesfake.New()
			op := fakeOpts(ns)
			op.Family = f
			tbl := newTable(t, op)
			ours := newIPSets(t, tbl, "np4-")
			calls := []call{
				replace("ips", netfilter.HashIP, netfilter.IPMember(a)),
				replace("nets", netfilter.HashNet, netfilter.NetMember(n), netfilter.IPMember(a)),
				replace("svc", netfilter.HashIPPort, netfilter.IPPortMember(a, netfilter.ProtoTCP, 80)),
				replace("ports", netfilter.BitmapPort, netfilter.PortMember(80)),
				// Names.
				replace("", netfilter.HashIP),
				replace("a b", netfilter.HashIP),
				replace("a/b", netfilter.HashIP),
				replace("é", netfilter.HashIP),
				replace(strings.Repeat("x", netfilter.MaxNameLength-4), netfilter.HashIP),
				replace(strings.Repeat("x", netfilter.MaxNameLength-3), netfilter.HashIP),
				kname("ok.name:1_2-3"),
				kname("bad name"),
				kname(strings.Repeat("x", netfilter.MaxNameLength)),
				add("a b", netfilter.IPMember(a)),
				remove("a b"),
				// Types and metadata.
				replace("t", "hash:mac"),
				replace("t", ""),
				replaceMeta(netfilter.SetMetadata{Name: "t", Type: netfilter.HashIP, Family: other}),
				replaceMeta(netfilter.SetMetadata{Name: "t", Type: netfilter.HashIP, Family: f}, netfilter.IPMember(a)),
				replaceMeta(netfilter.SetMetadata{Name: "t", Type: netfilter.HashIP, MaxSize: -1}),
				replaceMeta(netfilter.SetMetadata{Name: "t", Type: netfilter.HashIP, MaxSize: 1}, netfilter.IPMember(a), netfilter.IPMember(a)),
				replaceMeta(netfilter.SetMetadata{Name: "t", Type: netfilter.HashIP, MaxSize: 1}, netfilter.IPMember(a), netfilter.IPMember(a.Next())),
				add("t", netfilter.IPMember(a.Next())),
				replaceMeta(netfilter.SetMetadata{Name: "t", Type: netfilter.HashNet, Range: netfilter.PortRange{First: 1, Last: 2}}),
				replaceMeta(netfilter.SetMetadata{Name: "p", Type: netfilter.BitmapPort, MaxSize: 10}),
				replaceMeta(netfilter.SetMetadata{Name: "p", Type: netfilter.BitmapPort, Range: netfilter.PortRange{First: 2, Last: 1}}),
				replaceMeta(netfilter.SetMetadata{Name: "p", Type: netfilter.BitmapPort, Range: netfilter.PortRange{First: 100, Last: 200}}, netfilter.PortMember(100), netfilter.PortMember(200)),
				add("p", netfilter.PortMember(201)),
				add("p", netfilter.PortMember(150), netfilter.PortMember(150)),
				// Members.
				replace("ips", netfilter.HashIP, netfilter.IPMember(o)),
				replace("ips", netfilter.HashIP, netfilter.NetMember(n)),
				replace("ips", netfilter.HashIP, netfilter.IPMember(zero)),
				replace("ips", netfilter.HashIP, netfilter.PortMember(80)),
				replace("ips", netfilter.HashIP, netfilter.IPPortMember(a, netfilter.ProtoTCP, 80)),
				replace("ips", netfilter.HashIP, netfilter.Member{}),
				replace("nets", netfilter.HashNet, netfilter.NetMember(host)),
				replace("nets", netfilter.HashNet, netfilter.NetMember(all)),
				replace("nets", netfilter.HashNet, netfilter.NetMember(on)),
				replace("nets", netfilter.HashNet, netfilter.IPPortMember(a, netfilter.ProtoUDP, 53)),
				replace("svc", netfilter.HashIPPort, netfilter.IPMember(a)),
				replace("svc", netfilter.HashIPPort, netfilter.IPPortMember(zero, netfilter.ProtoTCP, 80)),
				replace("svc", netfilter.HashIPPort, netfilter.IPPortMember(a, 1, 80)),
				replace("ports", netfilter.BitmapPort, netfilter.IPMember(a)),
				add("ips", netfilter.IPMember(o)),
				add("ips", netfilter.IPMember(a), netfilter.NetMember(n)),
				add("nope", netfilter.IPMember(a)),
				del("ips", netfilter.NetMember(n)),
				del("nope", netfilter.IPMember(a)),
				del("svc", netfilter.IPPortMember(a, netfilter.ProtoUDP, 80)),
				add("svc", netfilter.IPPortMember(a, netfilter.ProtoUDP, 80), netfilter.IPPortMember(a, netfilter.ProtoSCTP, 9)),
				del("svc", netfilter.IPPortMember(a, netfilter.ProtoTCP, 80)),
				add("nets", netfilter.NetMember(netip.PrefixFrom(n.Addr(), n.Bits()+1))),
				del("nets", netfilter.NetMember(n)),
				remove("nope"),
				remove("ports"),
				// A type change of a set no rule uses.
				replace("ips", netfilter.HashNet, netfilter.NetMember(n)),
			}
			for _, c := range calls {
				beforeTx := txAfterApply(t, tbl, ns)
				want := c.do(ref)
				got := c.do(ours)
				require.Equal(t, want == nil, got == nil, "%s: ipsets says %v, IPSets says %v", c.name, want, got)
				for _, s := range ipsetsSentinels {
					assert.Equal(t, errors.Is(want, s), errors.Is(got, s), "%s: errors.Is %v: ipsets %v, IPSets %v", c.name, s, want, got)
				}
				if got != nil {
					assert.True(t, strings.HasPrefix(got.Error(), "nftables: "), got.Error())
					assert.Equal(t, 1, strings.Count(got.Error(), "nftables: "), got.Error())
					assert.NotContains(t, got.Error(), "ipsets: ", got.Error())
					assert.Equal(t, beforeTx, txAfterApply(t, tbl, ns), "%s: refused, yet the Table wrote", c.name)
				}
				require.Equal(t, ref.Names(), ours.Names(), c.name)
				for _, name := range ref.Names() {
					wm, _ := ref.Members(name)
					gm, _ := ours.Members(name)
					assert.Equal(t, wm, gm, "%s: members of %s", c.name, name)
					wmeta, _ := ref.Metadata(name)
					gmeta, _ := ours.Metadata(name)
					assert.Equal(t, wmeta, gmeta, "%s: metadata of %s", c.name, name)
				}
			}
			// hash:net,net: ipsets holds it, IPSets refuses it plainly.
			err = ours.AddOrReplaceSet(netfilter.SetMetadata{Name: "nn", Type: netfilter.HashNetNet}, []netfilter.Member{netfilter.NetNetMember(n, n)})
			require.ErrorIs(t, err, netfilter.ErrUnknownSetType)
			assert.Contains(t, err.Error(), "overlapping")
			// Every set the reference holds is written, as declared.
			apply(t, tbl)
			assert.Equal(t, []string{"np4-ips", "np4-nets", "np4-p", "np4-svc", "np4-t", "np4-" + strings.Repeat("x", netfilter.MaxNameLength-4)}, sorted(ns.Sets(fam(f), "np")))
		})
	}
}

// txAfterApply applies the Table and returns the transactions written so
// far.
func txAfterApply(t *testing.T, tbl *nftables.Table, ns *nftablesfake.Namespace) int {
	t.Helper()
	apply(t, tbl)
	tx, _, _, _ := ns.Counts()
	return tx
}

// TestIPSetsUnderMasquerade runs the masquerade manager on a nat Table and
// its IPSets, on the fake: the sets and the rule in one table, one
// transaction; pools change element by element.
func TestIPSetsUnderMasquerade(t *testing.T) {
	for _, f := range ipfamily.All {
		t.Run(f.String(), func(t *testing.T) {
			ns := nftablesfake.New()
			o := fakeOpts(ns)
			o.Name, o.Family, o.Role, o.ChainPrefix = "npm-nat", f, nftables.NAT, "npm-"
			nat := newTable(t, o)
			sets := newIPSets(t, nat, "")
			m, err := masquerade.New(masquerade.Options{Family: f, Sets: sets, Table: nat, Chain: "npm-masq"})
			require.NoError(t, err)
			pool, other := pfx("10.244.0.0/16"), pfx("10.96.0.0/12")
			if f == ipfamily.IPv6 {
				pool, other = pfx("fd44::/48"), pfx("fd96::/108")
			}
			m.OnUpdate(cluster.Pool{ID: "pods", CIDR: pool, Masquerade: true})
			m.OnUpdate(cluster.Pool{ID: "other", CIDR: other})
			_, err = managertest.Pass(context.Background(), []dataplane.Manager{m}, sets, nat)
			require.NoError(t, err)
			tx, _, _, _ := ns.Counts()
			assert.Equal(t, 1, tx, "sets, chains and rules in one transaction")
			assert.Equal(t, []string{masquerade.DefaultAllPoolsSet, masquerade.DefaultMasqPoolsSet}, sorted(ns.Sets(fam(f), "npm-nat")))
			masq, _ := sets.Members(masquerade.DefaultMasqPoolsSet)
			assert.Equal(t, []netfilter.Member{netfilter.NetMember(pool)}, masq)
			all, _ := sets.Members(masquerade.DefaultAllPoolsSet)
			assert.Len(t, all, 2)
			var used []string
			for _, c := range ns.Chains(fam(f), "npm-nat") {
				if c.Name == "npm-masq" {
					for _, r := range c.Rules {
						used = append(used, r.Sets...)
					}
				}
			}
			assert.ElementsMatch(t, []string{masquerade.DefaultAllPoolsSet, masquerade.DefaultMasqPoolsSet}, used)

			// The other pool goes: only elements are written.
			ns.ResetCounts()
			m.OnUpdate(cluster.PoolRemove{ID: "other"})
			_, err = managertest.Pass(context.Background(), []dataplane.Manager{m}, sets, nat)
			require.NoError(t, err)
			tx, _, requests, _ := ns.Counts()
			assert.Equal(t, 1, tx)
			assert.LessOrEqual(t, requests, 2, "the range's two bounds")
			all, _ = sets.Members(masquerade.DefaultAllPoolsSet)
			assert.Equal(t, []netfilter.Member{netfilter.NetMember(pool)}, all)
		})
	}
}
