package routerule_test

import (
	"context"
	"math"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/routerule"
)

var (
	v4Src = netip.MustParsePrefix("10.1.0.0/16")
	v6Src = netip.MustParsePrefix("fd00:1::/64")
)

func lookup(t uint32) routerule.Action { return routerule.ActionLookup{Table: t} }

// embedded is an action type outside the package that satisfies Action by
// embedding one of its types.
type embedded struct {
	routerule.ActionLookup
	extra []int
}

func TestRuleValidate(t *testing.T) {
	tests := []struct {
		name    string
		rule    routerule.Rule
		wantErr string // empty: valid
	}{
		{"lookup", routerule.Rule{Priority: 10, Src: v4Src, Action: lookup(100)}, ""},
		{"lookup main", routerule.Rule{Priority: 10, Action: lookup(kernel.TableMain)}, ""},
		{"pointer action", routerule.Rule{Priority: 10, Action: &routerule.ActionGoto{Priority: 11}}, ""},
		{"blackhole", routerule.Rule{Priority: 10, Dst: v6Src, Action: routerule.ActionBlackhole{}}, ""},
		{"mask without mark", routerule.Rule{Priority: 10, Mask: 0x4, Action: lookup(1)}, ""},
		{"inverted mark", routerule.Rule{Priority: 10, Mark: 1, Mask: 1, Invert: true, Action: lookup(1)}, ""},
		{"15-byte interface", routerule.Rule{Priority: 10, IIF: strings.Repeat("a", 15), Action: lookup(1)}, ""},
		{"max values", routerule.Rule{Priority: math.MaxUint32 - 1, Action: routerule.ActionGoto{Priority: math.MaxUint32}}, ""},

		{"priority 0", routerule.Rule{Action: lookup(1)}, "priority 0"},

		{"no action", routerule.Rule{Priority: 10}, "no action"},
		{"nil lookup pointer", routerule.Rule{Priority: 10, Action: (*routerule.ActionLookup)(nil)}, "nil *ActionLookup"},
		{"nil goto pointer", routerule.Rule{Priority: 10, Action: (*routerule.ActionGoto)(nil)}, "nil *ActionGoto"},
		{"nil blackhole pointer", routerule.Rule{Priority: 10, Action: (*routerule.ActionBlackhole)(nil)}, "nil *ActionBlackhole"},
		{"foreign action type", routerule.Rule{Priority: 10, Action: embedded{extra: []int{1}}}, "unsupported action type"},
		{"table 0", routerule.Rule{Priority: 10, Action: lookup(0)}, "table 0"},
		{"backward goto", routerule.Rule{Priority: 10, Action: routerule.ActionGoto{Priority: 9}}, "greater than the rule's priority"},
		{"goto self", routerule.Rule{Priority: 10, Action: routerule.ActionGoto{Priority: 10}}, "greater than the rule's priority"},
		{"mixed families", routerule.Rule{Priority: 10, Src: v4Src, Dst: v6Src, Action: lookup(1)}, "different families"},
		{"mapped address", routerule.Rule{Priority: 10, Src: netip.MustParsePrefix("::ffff:10.0.0.0/104"), Action: lookup(1)}, "IPv4-mapped"},
		{"invalid prefix", routerule.Rule{Priority: 10, Src: netip.PrefixFrom(netip.MustParseAddr("10.0.0.1"), 33), Action: lookup(1)}, "invalid source prefix"},
		{"mark outside mask", routerule.Rule{Priority: 10, Mark: 0x5, Mask: 0x4, Action: lookup(1)}, "bits outside mask"},
		{"invert without match", routerule.Rule{Priority: 10, Invert: true, Action: lookup(1)}, "Invert without any match"},
		{"invert with only /0", routerule.Rule{Priority: 10, Invert: true, Src: netip.MustParsePrefix("0.0.0.0/0"), Action: lookup(1)}, "Invert without any match"},
		{"long iif", routerule.Rule{Priority: 10, IIF: strings.Repeat("a", 16), Action: lookup(1)}, "longer than 15"},
		{"slash in oif", routerule.Rule{Priority: 10, OIF: "a/b", Action: lookup(1)}, `oif: interface name "a/b" contains '/'`},
		{"space in iif", routerule.Rule{Priority: 10, IIF: "a b", Action: lookup(1)}, `contains ' '`},
		{"dot oif", routerule.Rule{Priority: 10, OIF: "..", Action: lookup(1)}, `interface name ".." is not a valid name`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.rule.Validate()
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, routerule.ErrInvalidRule)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

func TestRuleString(t *testing.T) {
	tests := []struct {
		rule routerule.Rule
		want string
	}{
		{routerule.Rule{Priority: 5, Action: lookup(100)}, "5: from all lookup 100"},
		{routerule.Rule{Priority: 5, Src: v4Src, Dst: netip.MustParsePrefix("10.2.0.0/16"), Action: lookup(kernel.TableMain)},
			"5: from 10.1.0.0/16 to 10.2.0.0/16 lookup main"},
		{routerule.Rule{Priority: 5, Mark: 0x10, Action: lookup(kernel.TableLocal)}, "5: from all fwmark 0x10 lookup local"},
		{routerule.Rule{Priority: 5, Mark: 0x10, Mask: 0xff, Action: lookup(kernel.TableDefault)}, "5: from all fwmark 0x10/0xff lookup default"},
		{routerule.Rule{Priority: 5, Mask: 0x4, Invert: true, IIF: "eth0", OIF: "eth1", Action: routerule.ActionBlackhole{}},
			"5: not from all fwmark 0/0x4 iif eth0 oif eth1 blackhole"},
		{routerule.Rule{Priority: 5, IIF: "a b", Action: routerule.ActionBlackhole{}}, `5: from all iif "a b" blackhole`},
		{routerule.Rule{Priority: 5, Action: routerule.ActionGoto{Priority: 9}}, "5: from all goto 9"},
		{routerule.Rule{Priority: 5}, "5: from all <no action>"},
		{routerule.Rule{Priority: 5, Action: (*routerule.ActionLookup)(nil)}, "5: from all <nil lookup>"},
		{routerule.Rule{Priority: 5, Action: &routerule.ActionBlackhole{}}, "5: from all blackhole"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, tt.rule.String())
	}
}

func TestFamily(t *testing.T) {
	for _, tt := range []struct {
		f     routerule.Family
		valid bool
		s     string
	}{{routerule.IPv4, true, "IPv4"}, {routerule.IPv6, true, "IPv6"}, {0, false, "Family(0)"}, {5, false, "Family(5)"}} {
		assert.Equal(t, tt.valid, tt.f.Valid())
		assert.Equal(t, tt.s, tt.f.String())
	}
}

func TestNewOptions(t *testing.T) {
	fake := kernelfake.New(kernelfake.Options{})
	good := routerule.Options{Family: routerule.IPv4, Kernel: fake, Priorities: []uint32{100}, Tables: []uint32{100}}
	tests := []struct {
		name    string
		mod     func(*routerule.Options)
		wantErr string
	}{
		{"valid", func(*routerule.Options) {}, ""},
		{"no tables", func(o *routerule.Options) { o.Tables = nil }, ""},
		{"main table", func(o *routerule.Options) { o.Tables = []uint32{kernel.TableMain} }, ""},
		{"no family", func(o *routerule.Options) { o.Family = 0 }, "family"},
		{"bad family", func(o *routerule.Options) { o.Family = 5 }, "family"},
		{"no kernel", func(o *routerule.Options) { o.Kernel = nil }, "Kernel is required"},
		{"nil *kernel.Namespace", func(o *routerule.Options) { o.Kernel = (*kernel.Namespace)(nil) }, "Kernel is required"},
		{"nil *kernelfake.Namespace", func(o *routerule.Options) { o.Kernel = (*kernelfake.Namespace)(nil) }, "Kernel is required"},
		{"no priorities", func(o *routerule.Options) { o.Priorities = nil }, "priority"},
		{"priority 0", func(o *routerule.Options) { o.Priorities = []uint32{100, 0} }, "priority 0"},
		{"table 0", func(o *routerule.Options) { o.Tables = []uint32{100, 0} }, "table 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := good
			tt.mod(&o)
			r, err := routerule.New(o)
			if tt.wantErr == "" {
				require.NoError(t, err)
				require.NotNil(t, r)
				return
			}
			require.ErrorIs(t, err, routerule.ErrInvalidOptions)
			assert.Contains(t, err.Error(), tt.wantErr)
			assert.Nil(t, r)
		})
	}
	assert.Zero(t, fake.Calls(kernelfake.OpRules)+fake.Writes(), "New does no I/O")
}

func TestNameFamilyPhase(t *testing.T) {
	for _, tt := range []struct {
		fam  routerule.Family
		name string
		want string
	}{{routerule.IPv4, "", "routerule-v4"}, {routerule.IPv6, "", "routerule-v6"}, {routerule.IPv4, "policy", "policy"}} {
		r, err := routerule.New(routerule.Options{Family: tt.fam, Kernel: kernelfake.New(kernelfake.Options{}), Priorities: []uint32{1}, Name: tt.name})
		require.NoError(t, err)
		assert.Equal(t, tt.want, r.Name())
		assert.Equal(t, tt.fam, r.Family())
		assert.Equal(t, dataplane.PhaseRoutes, r.Phase())
	}
}

// newFakeRules returns a Rules of family fam owning priorities 100 and 101
// and table 100, on a fake namespace.
func newFakeRules(t *testing.T, fam routerule.Family) (*routerule.Rules, *kernelfake.Namespace) {
	t.Helper()
	k := kernelfake.New(kernelfake.Options{})
	r, err := routerule.New(routerule.Options{Family: fam, Kernel: k, Priorities: []uint32{100, 101}, Tables: []uint32{100}})
	require.NoError(t, err)
	return r, k
}

func TestSetRuleRejectsWithoutChange(t *testing.T) {
	good := routerule.Rule{Priority: 100, Src: v4Src, Action: lookup(100)}
	tests := []struct {
		name    string
		rule    routerule.Rule
		wantErr []error
	}{
		{"other family", routerule.Rule{Priority: 100, Src: v6Src, Action: lookup(100)}, []error{routerule.ErrInvalidRule}},
		{"priority not owned", routerule.Rule{Priority: 7, Action: lookup(100)}, []error{routerule.ErrInvalidRule, routerule.ErrNotOwned}},
		{"table not owned", routerule.Rule{Priority: 100, Action: lookup(200)}, []error{routerule.ErrInvalidRule, routerule.ErrNotOwned}},
		{"malformed", routerule.Rule{Priority: 100, Action: lookup(0)}, []error{routerule.ErrInvalidRule}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, k := newFakeRules(t, routerule.IPv4)
			require.NoError(t, r.SetRule(good))
			before := r.Desired()
			for _, call := range []func(routerule.Rule) error{
				r.SetRule, r.RemoveRule,
				func(x routerule.Rule) error { return r.SetRules([]routerule.Rule{good, x}) },
			} {
				err := call(tt.rule)
				for _, want := range tt.wantErr {
					require.ErrorIs(t, err, want)
				}
				assert.Equal(t, before, r.Desired())
			}
			assert.Zero(t, k.Calls(kernelfake.OpRules)+k.Writes())
		})
	}
}

func TestSetRulesConflict(t *testing.T) {
	r, _ := newFakeRules(t, routerule.IPv4)
	a := routerule.Rule{Priority: 100, Mark: 1, Mask: 1, Action: lookup(100)}
	b := a
	b.Invert = true
	require.NoError(t, r.SetRules([]routerule.Rule{a, a}), "exact duplicates merge")
	assert.Len(t, r.Desired(), 1)
	err := r.SetRules([]routerule.Rule{a, b})
	require.ErrorIs(t, err, routerule.ErrConflict)
	require.ErrorIs(t, err, routerule.ErrInvalidRule)
	assert.Equal(t, []routerule.Rule{a}, r.Desired())

	// SetRule replaces instead; RemoveRule only removes an exact match.
	require.NoError(t, r.SetRule(b))
	assert.Equal(t, []routerule.Rule{b}, r.Desired())
	require.NoError(t, r.RemoveRule(a))
	assert.Equal(t, []routerule.Rule{b}, r.Desired())
	require.NoError(t, r.RemoveRule(b))
	assert.Empty(t, r.Desired())
}

func TestDesiredIsCanonical(t *testing.T) {
	r, _ := newFakeRules(t, routerule.IPv6)
	require.NoError(t, r.SetRules([]routerule.Rule{
		{Priority: 101, Src: netip.MustParsePrefix("fd00:1::/64"), Dst: netip.MustParsePrefix("::/0"), Mark: 0x10, Action: &routerule.ActionLookup{Table: 100}},
		{Priority: 100, Action: &routerule.ActionBlackhole{}},
	}))
	assert.Equal(t, []routerule.Rule{
		{Priority: 100, Action: routerule.ActionBlackhole{}},
		{Priority: 101, Src: netip.MustParsePrefix("fd00:1::/64"), Mark: 0x10, Mask: math.MaxUint32, Action: routerule.ActionLookup{Table: 100}},
	}, r.Desired())
	// The canonical form of a desired rule is the same rule.
	require.NoError(t, r.SetRule(routerule.Rule{Priority: 101, Src: netip.MustParsePrefix("fd00:1::/64"), Mark: 0x10, Mask: math.MaxUint32, Action: lookup(100)}))
	assert.Len(t, r.Desired(), 2)
}

// A nil context is context.Background(); a cancelled one is refused before
// any I/O.
func TestApplyNilAndCancelledContext(t *testing.T) {
	r, k := newFakeRules(t, routerule.IPv4)
	require.NoError(t, r.SetRule(routerule.Rule{Priority: 100, Action: lookup(100)}))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := r.Apply(ctx)
	require.ErrorIs(t, err, context.Canceled)
	assert.Zero(t, k.Calls(kernelfake.OpRules)+k.Writes())
	//lint:ignore SA1012 a nil context is the input under test
	_, err = r.Apply(nil) //nolint:staticcheck
	require.NoError(t, err)
	assert.Equal(t, 1, k.Writes())
}

// Periodic resync is the loop's: Apply asks for no call of its own when
// nothing failed.
func TestNoRetryWhenNothingFailed(t *testing.T) {
	r, _ := newFakeRules(t, routerule.IPv4)
	require.NoError(t, r.SetRule(routerule.Rule{Priority: 100, Action: lookup(100)}))
	res, err := r.Apply(context.Background())
	require.NoError(t, err)
	assert.Zero(t, res.RetryAfter)
}

// Rules of ours that this package cannot express (unreachable, prohibit and
// nop rules, or attributes such as a TOS) are deleted; a blackhole rule is
// ours to keep when desired.
func TestInexpressibleRulesOfOursAreDeleted(t *testing.T) {
	for _, k := range []kernel.Rule{
		{Action: kernel.RuleUnreachable}, {Action: kernel.RuleProhibit}, {Action: kernel.RuleNop},
		{Action: kernel.RuleLookup, Table: 100, TOS: 0x10},
		{Action: kernel.RuleLookup, Table: 100, SuppressPrefixLen: kernel.Suppressor{Set: true}},
		{Action: kernel.RuleBlackhole, DstPorts: kernel.PortRange{Start: 80, End: 80}, IPProto: 6},
	} {
		r, ns := newFakeRules(t, routerule.IPv4)
		k.Family, k.Priority = kernel.IPv4, 100
		require.NoError(t, ns.Admin().AddRule(context.Background(), k))
		_, err := r.Apply(context.Background())
		require.NoError(t, err)
		rules, err := ns.Admin().Rules(context.Background(), kernel.IPv4)
		require.NoError(t, err)
		for _, kr := range rules {
			assert.NotEqual(t, uint32(100), kr.Priority, "%+v", k)
		}
	}
	r, ns := newFakeRules(t, routerule.IPv4)
	require.NoError(t, ns.Admin().AddRule(context.Background(), kernel.Rule{Family: kernel.IPv4, Priority: 100, Action: kernel.RuleBlackhole}))
	require.NoError(t, r.SetRule(routerule.Rule{Priority: 100, Action: routerule.ActionBlackhole{}}))
	ns.ResetCounts()
	_, err := r.Apply(context.Background())
	require.NoError(t, err)
	assert.Zero(t, ns.Writes(), "the blackhole rule found is the one desired")
}

func TestConcurrentUse(t *testing.T) {
	r, k := newFakeRules(t, routerule.IPv4)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for j := range 50 {
				rule := routerule.Rule{Priority: 100, Mark: uint32(i*100 + j + 1), Action: lookup(100)}
				assert.NoError(t, r.SetRule(rule))
				if j%2 == 0 {
					assert.NoError(t, r.RemoveRule(rule))
				}
				if j%10 == 0 {
					r.QueueResync()
					_, err := r.Apply(context.Background())
					assert.NoError(t, err)
				}
			}
		})
	}
	wg.Wait()
	_, err := r.Apply(context.Background())
	require.NoError(t, err)
	var got []uint32
	rules, err := k.Admin().Rules(context.Background(), kernel.IPv4)
	require.NoError(t, err)
	for _, kr := range rules {
		if kr.Priority == 100 {
			got = append(got, kr.Mark)
		}
	}
	var want []uint32
	for _, d := range r.Desired() {
		want = append(want, d.Mark)
	}
	assert.Len(t, want, 4*25)
	assert.ElementsMatch(t, want, got)
}
