package routetable_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	rt "github.com/nodeplane/nodeplane/routetable"
)

// Bad input is refused with an error whose text names the package once and
// names what is wrong, that errors.Is matches against every sentinel it
// speaks of, and that writes nothing.
func TestBadInputErrors(t *testing.T) {
	k, tbl, _ := newFake(t, rt.IPv4, "np-a")
	require.NoError(t, tbl.SetRoutes(1, "np-a", []rt.Target{{CIDR: mustP("10.0.1.0/24")}}))
	ctx := context.Background()
	_, err := tbl.Apply(ctx)
	require.NoError(t, err)
	writes, declared := k.Writes(), tbl.Counters().Declared

	fake := kernelfake.New(kernelfake.Options{})
	for _, tc := range []struct {
		name string
		call func() error
		is   []error
		text string // a part the text must contain
	}{
		{"host bits", func() error {
			return tbl.SetRoutes(1, "np-a", []rt.Target{{CIDR: mustP("10.0.0.1/24")}})
		}, []error{rt.ErrInvalidTarget, ipfamily.ErrHostBits}, "10.0.0.1/24: host bits set (the network is 10.0.0.0/24)"},
		{"host bits in a removal", func() error {
			return tbl.RouteRemove(1, "np-a", rt.RouteKey{CIDR: mustP("10.0.1.1/24")})
		}, []error{rt.ErrInvalidTarget, ipfamily.ErrHostBits}, "10.0.1.1/24"},
		{"next hop interface", func() error {
			return tbl.RouteUpdate(1, rt.InterfaceNone, rt.Target{CIDR: mustP("10.0.2.0/24"),
				NextHops: []rt.NextHop{{Iface: "np-a"}, {Iface: "a-name-that-is-too-long"}}})
		}, []error{rt.ErrInvalidTarget, rt.ErrInvalidInterface}, `next hop 1: invalid interface name: interface name "a-name-that-is-too-long" is longer than 15 bytes`},
		{"interface", func() error {
			return tbl.SetRoutes(1, "np:a", nil)
		}, []error{rt.ErrInvalidInterface}, `interface name "np:a" contains ':'`},
		{"MTU above the kernel's", func() error {
			return tbl.RouteUpdate(1, "np-a", rt.Target{CIDR: mustP("10.0.2.0/24"), MTU: 65521})
		}, []error{rt.ErrInvalidTarget}, "MTU 65521 is above 65520"},
		{"unspecified gateway", func() error {
			return tbl.RouteUpdate(1, "np-a", rt.Target{CIDR: mustP("10.0.2.0/24"), Gateway: mustA("0.0.0.0")})
		}, []error{rt.ErrInvalidTarget}, "gateway 0.0.0.0"},
		{"family", func() error {
			return tbl.RouteUpdate(1, "np-a", rt.Target{CIDR: mustP("fd00::/64")})
		}, []error{rt.ErrInvalidTarget}, "fd00::/64: not an IPv4 prefix"},
		{"duplicate", func() error {
			return tbl.SetRoutes(1, "np-a", []rt.Target{{CIDR: mustP("10.0.2.0/24")}, {CIDR: mustP("10.0.2.0/24")}})
		}, []error{rt.ErrDuplicateRoute}, "10.0.2.0/24"},
		{"table 0", func() error {
			_, err := rt.New(rt.Options{Kernel: fake, Family: rt.IPv4})
			return err
		}, []error{rt.ErrInvalidOptions}, "table 0"},
		{"exclusive main table", func() error {
			_, err := rt.New(rt.Options{Kernel: fake, Family: rt.IPv4, Table: kernel.TableMain, Ownership: rt.ExclusivePolicy{}})
			return err
		}, []error{rt.ErrInvalidOptions}, "table 254"},
		{"pattern", func() error {
			_, err := rt.New(rt.Options{Kernel: fake, Family: rt.IPv4, Table: 1000, InterfacePatterns: []string{"np-("}})
			return err
		}, []error{rt.ErrInvalidOptions}, `"np-("`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			require.Error(t, err)
			text := err.Error()
			assert.True(t, strings.HasPrefix(text, "routetable: "), "%q", text)
			assert.Equal(t, 1, strings.Count(text, "routetable: "), "one package prefix: %q", text)
			assert.Contains(t, text, tc.text)
			for _, s := range tc.is {
				assert.ErrorIs(t, err, s)
			}
			assert.False(t, errors.Is(err, rt.ErrRouteFailed))
		})
	}
	_, err = tbl.Apply(ctx)
	require.NoError(t, err)
	assert.Equal(t, writes, k.Writes(), "nothing written")
	assert.Equal(t, declared, tbl.Counters().Declared, "nothing recorded")
	assert.Zero(t, fake.Writes()+fake.Calls(kernelfake.OpDumpRoutes)+fake.Calls(kernelfake.OpLinks))

	// A zoned gateway: said so (not "not an IPv6 address").
	_, tbl6, _ := newFake(t, rt.IPv6, "np-a")
	err = tbl6.RouteUpdate(1, "np-a", rt.Target{CIDR: mustP("fd00::/64"), Gateway: mustA("fe80::1%np-a")})
	require.ErrorIs(t, err, rt.ErrInvalidTarget)
	assert.Contains(t, err.Error(), "gateway fe80::1%np-a has a zone")
}

// Table 0 is refused whatever the policy: the kernel takes it for the
// main table. A policy that owns the routes the kernel and the system put
// in a table (ExclusivePolicy) is refused for the reserved tables, whose
// default, connected and local routes the host needs; elsewhere it is
// fine, and so is the default policy in the main table.
func TestNewRefusesTableZeroAndReservedExclusive(t *testing.T) {
	k := kernelfake.New(kernelfake.Options{})
	claimAll, err := rt.NewDefaultPolicy(kernel.ProtoBoot, nil) // owns every route added by hand or at boot
	require.NoError(t, err)
	for _, tc := range []struct {
		table  uint32
		policy rt.OwnershipPolicy
		ok     bool
	}{
		{0, nil, false},
		{0, rt.ExclusivePolicy{}, false},
		{kernel.TableDefault, rt.ExclusivePolicy{}, false},
		{kernel.TableMain, rt.ExclusivePolicy{}, false},
		{kernel.TableLocal, rt.ExclusivePolicy{}, false},
		{kernel.TableMain, &rt.ExclusivePolicy{}, false},
		{kernel.TableMain, claimAll, false},
		{kernel.TableMain, nil, true},
		{kernel.TableLocal, nil, true},
		{252, rt.ExclusivePolicy{}, true},
		{1000, rt.ExclusivePolicy{}, true},
	} {
		tbl, err := rt.New(rt.Options{Kernel: k, Family: rt.IPv4, Table: tc.table, Ownership: tc.policy})
		if tc.ok {
			require.NoError(t, err, "table %d %T", tc.table, tc.policy)
			assert.Equal(t, tc.table, tbl.Index())
			continue
		}
		require.ErrorIs(t, err, rt.ErrInvalidOptions, "table %d %T", tc.table, tc.policy)
		assert.Nil(t, tbl)
	}
	assert.Zero(t, k.Writes()+k.Calls(kernelfake.OpDumpRoutes), "New does no I/O")
}
