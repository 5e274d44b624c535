package hostips_test

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/hostips"
	"github.com/nodeplane/nodeplane/internal/testkit/managertest"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/ipsets"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
)

type rig struct {
	t    *testing.T
	ns   *kernelfake.Namespace
	sets *ipsets.IPSets
	m    *hostips.Manager
}

func newRig(t *testing.T, f ipfamily.Family, mutate func(*hostips.Options)) *rig {
	t.Helper()
	ns := kernelfake.New(kernelfake.Options{})
	sets := managertest.FakeSets(t, ns, f, fmt.Sprintf("np%d-", f))
	m := managertest.NewManager(t, hostips.New, hostips.Options{Family: f, Sets: sets}, mutate)
	return &rig{t: t, ns: ns, sets: sets, m: m}
}

func (r *rig) pass(msgs ...any) []string {
	r.t.Helper()
	require.NoError(r.t, managertest.UpdatePass(r.m, msgs, r.sets))
	members, ok := r.ns.IPSets().Members(r.m.SetName())
	require.True(r.t, ok)
	return members
}

func addrs(s ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, a := range s {
		out = append(out, netip.MustParsePrefix(a))
	}
	return out
}

func TestSetFollowsAddresses(t *testing.T) {
	r := newRig(t, ipfamily.IPv4, func(o *hostips.Options) { o.Exclude = []string{`^kube-ipvs0$`, `^cali`} })
	assert.Empty(t, r.pass(), "the set exists, empty, before any message")
	got := r.pass(
		hostips.InterfaceAddrs{Name: "lo", Addrs: addrs("127.0.0.1/8", "::1/128")},
		hostips.InterfaceAddrs{Name: "eth0", Addrs: addrs("198.18.0.1/24", "169.254.3.3/16", "fd00::1/64", "fe80::1/64")},
		hostips.InterfaceAddrs{Name: "kube-ipvs0", Addrs: addrs("10.96.0.1/32", "10.96.0.10/32")},
		hostips.InterfaceAddrs{Name: "cali123", Addrs: addrs("169.254.1.1/32")},
	)
	assert.Equal(t, []string{"127.0.0.1", "198.18.0.1"}, got)

	// The same address on two interfaces is one member, kept until both
	// lose it.
	got = r.pass(hostips.InterfaceAddrs{Name: "eth1", Addrs: addrs("198.18.0.1/24", "203.0.113.5/24")})
	assert.Equal(t, []string{"127.0.0.1", "198.18.0.1", "203.0.113.5"}, got)
	got = r.pass(hostips.InterfaceAddrs{Name: "eth0", Addrs: addrs("198.18.0.2/24")})
	assert.Equal(t, []string{"127.0.0.1", "198.18.0.1", "198.18.0.2", "203.0.113.5"}, got)
	got = r.pass(hostips.InterfaceAddrs{Name: "eth1"}) // gone
	assert.Equal(t, []string{"127.0.0.1", "198.18.0.2"}, got)
	assert.Equal(t, []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("198.18.0.2")}, r.m.Addrs())

	// Nothing changed: no ipset call at all.
	calls := len(r.ns.IPSets().Calls())
	r.pass(hostips.InterfaceAddrs{Name: "eth0", Addrs: addrs("198.18.0.2/24", "fd00::2/64")}, "not ours")
	assert.Len(t, r.ns.IPSets().Calls(), calls)
}

func TestIPv6AndLinkLocal(t *testing.T) {
	r := newRig(t, ipfamily.IPv6, func(o *hostips.Options) { o.IncludeLinkLocal = true; o.SetName = "mine" })
	got := r.pass(hostips.InterfaceAddrs{Name: "eth0", Addrs: addrs("198.18.0.1/24", "fd00::1/64", "fe80::1/64")})
	assert.Equal(t, []string{"fd00::1", "fe80::1"}, got)
	assert.Equal(t, "np6-mine", r.m.SetName())
	assert.Equal(t, "hostips-v6", r.m.Name())
}

func TestInvalidMessageChangesNothing(t *testing.T) {
	r := newRig(t, ipfamily.IPv4, nil)
	r.pass(hostips.InterfaceAddrs{Name: "eth0", Addrs: addrs("198.18.0.1/24")})
	for _, msg := range []hostips.InterfaceAddrs{
		{Addrs: addrs("10.0.0.1/8")},
		{Name: "eth0", Addrs: []netip.Prefix{{}}},
		// The kernel cannot hold these in a hash:ip set: the whole set was
		// refused, and held back every later change.
		{Name: "eth3", Addrs: addrs("0.0.0.0/32", "10.7.7.7/32")},
		{Name: "eth3", Addrs: addrs("::/128")},
	} {
		r.m.OnUpdate(msg)
		err := r.m.CompleteDeferredWork(context.Background())
		require.ErrorIs(t, err, hostips.ErrInvalidMessage)
		assert.Equal(t, 1, strings.Count(err.Error(), "hostips: "))
		require.NoError(t, r.m.CompleteDeferredWork(context.Background()), "reported once")
		assert.Equal(t, []string{"198.18.0.1"}, r.pass())
	}
	// The set still follows the other interfaces.
	assert.Equal(t, []string{"10.0.0.5"}, r.pass(hostips.InterfaceAddrs{Name: "eth0", Addrs: addrs("10.0.0.5/24")}))
}

func TestOptions(t *testing.T) {
	ns := kernelfake.New(kernelfake.Options{})
	sets := managertest.FakeSets(t, ns, ipfamily.IPv4, "np4-")
	good := hostips.Options{Family: ipfamily.IPv4, Sets: sets}
	var nilSets *ipsets.IPSets
	for name, mutate := range map[string]func(*hostips.Options){
		"no family":     func(o *hostips.Options) { o.Family = 0 },
		"no sets":       func(o *hostips.Options) { o.Sets = nil },
		"nil sets":      func(o *hostips.Options) { o.Sets = nilSets },
		"wrong family":  func(o *hostips.Options) { o.Family = ipfamily.IPv6 },
		"long set name": func(o *hostips.Options) { o.SetName = strings.Repeat("s", 40) },
		"bad regexp":    func(o *hostips.Options) { o.Exclude = []string{"("} },
	} {
		o := good
		mutate(&o)
		_, err := hostips.New(o)
		require.ErrorIs(t, err, hostips.ErrInvalidOptions, name)
		assert.Equal(t, 1, strings.Count(err.Error(), "hostips: "), err.Error())
		assert.NotContains(t, err.Error(), "ipsets: ")
	}
}
