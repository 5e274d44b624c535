package routerulefake_test

import (
	"errors"
	"net"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/nodeplane/nodeplane/routerule/routerulefake"
)

func TestFakeSemantics(t *testing.T) {
	errs, dumps := runSteps(t, routerulefake.New())
	for i, s := range steps {
		assert.Equal(t, s.want, errs[i], "step %q", s.name)
		if i > 0 && s.want != 0 {
			assert.Equal(t, dumps[i-1], dumps[i], "failed step %q must change nothing", s.name)
		}
	}
}

func TestFakeDumpHasNoAction(t *testing.T) {
	k := routerulefake.NewEmpty()
	for _, typ := range []uint8{6, 7, 8} {
		r := netlink.NewRule()
		r.Priority, r.Type, r.Mark = 10, typ, uint32(typ)
		require.NoError(t, k.RuleAdd(r))
	}
	listed, err := k.RuleList(netlink.FAMILY_V4)
	require.NoError(t, err)
	inspected := k.Rules(netlink.FAMILY_V4)
	require.Len(t, listed, 3)
	require.Len(t, inspected, 3)
	for i := range listed {
		assert.Zero(t, listed[i].Type, "RuleList drops the action, as netlink does")
		assert.Zero(t, listed[i].Table)
		assert.Equal(t, -1, listed[i].Goto)
		assert.Equal(t, uint8(listed[i].Mark), inspected[i].Type, "Rules keeps it")
	}
}

func TestFakeFamilies(t *testing.T) {
	k := routerulefake.New()
	v4, err := k.RuleList(netlink.FAMILY_V4)
	require.NoError(t, err)
	v6, err := k.RuleList(netlink.FAMILY_V6)
	require.NoError(t, err)
	all, err := k.RuleList(netlink.FAMILY_ALL)
	require.NoError(t, err)
	assert.Len(t, v4, 3)
	assert.Len(t, v6, 2)
	assert.Equal(t, append(v4, v6...), all)
	other, err := k.RuleList(7)
	require.NoError(t, err)
	assert.Empty(t, other)

	r := netlink.NewRule()
	r.Family, r.Priority, r.Table = 7, 1, 1
	require.ErrorIs(t, k.RuleAdd(r), syscall.EAFNOSUPPORT)

	mixed := netlink.NewRule()
	mixed.Priority, mixed.Table = 1, 1
	_, mixed.Src, _ = net.ParseCIDR("10.0.0.0/8")
	_, mixed.Dst, _ = net.ParseCIDR("fd00::/8")
	require.Error(t, k.RuleAdd(mixed))
	require.Error(t, k.RuleDel(mixed))
	require.ErrorIs(t, k.RuleAdd(nil), syscall.EINVAL)
	require.ErrorIs(t, k.RuleDel(nil), syscall.EINVAL)
}

func TestFakeValidation(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*netlink.Rule)
	}{
		{"lookup without table", func(r *netlink.Rule) { r.Table = 0 }},
		{"unknown action", func(r *netlink.Rule) { r.Type = 4 }},
		{"long iif", func(r *netlink.Rule) { r.IifName = "abcdefghijklmnop" }},
		{"prefix longer than the family", func(r *netlink.Rule) {
			r.Src = &net.IPNet{IP: net.ParseIP("10.0.0.0").To4(), Mask: net.CIDRMask(40, 128)}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := routerulefake.NewEmpty()
			r := netlink.NewRule()
			r.Priority, r.Table = 10, 10
			tt.mod(r)
			require.ErrorIs(t, k.RuleAdd(r), syscall.EINVAL)
			assert.Empty(t, k.Rules(netlink.FAMILY_ALL))
		})
	}
}

func TestFakeFailureInjection(t *testing.T) {
	k := routerulefake.NewEmpty()
	r := netlink.NewRule()
	r.Priority, r.Table = 10, 10

	k.FailNext(routerulefake.OpAdd, 2, syscall.ENOMEM)
	k.FailNext(routerulefake.OpAdd, 0, syscall.EIO) // ignored
	k.FailNext(routerulefake.OpAdd, 1, nil)         // ignored
	require.ErrorIs(t, k.RuleAdd(r), syscall.ENOMEM)
	require.ErrorIs(t, k.RuleAdd(r), syscall.ENOMEM)
	require.NoError(t, k.RuleAdd(r))
	assert.Equal(t, 3, k.Calls(routerulefake.OpAdd))

	k.FailNext(routerulefake.OpList, 1, netlink.ErrDumpInterrupted)
	rules, err := k.RuleList(netlink.FAMILY_V4)
	require.ErrorIs(t, err, netlink.ErrDumpInterrupted)
	assert.Len(t, rules, 1, "an interrupted dump still returns what it read")
	k.FailNext(routerulefake.OpList, 1, syscall.EBUSY)
	rules, err = k.RuleList(netlink.FAMILY_V4)
	require.ErrorIs(t, err, syscall.EBUSY)
	assert.Nil(t, rules)

	var seen []routerulefake.Op
	errHook := errors.New("hook says no")
	k.SetHook(func(op routerulefake.Op, family int, rule *netlink.Rule) error {
		seen = append(seen, op)
		if op == routerulefake.OpDel {
			return errHook
		}
		return nil
	})
	require.ErrorIs(t, k.RuleDel(r), errHook)
	_, err = k.RuleList(netlink.FAMILY_V4)
	require.NoError(t, err)
	assert.Equal(t, []routerulefake.Op{routerulefake.OpDel, routerulefake.OpList}, seen)
	assert.Len(t, k.Rules(netlink.FAMILY_V4), 1, "a failed delete changes nothing")
	k.SetHook(nil)
	require.NoError(t, k.RuleDel(r))
	assert.Equal(t, 5, k.Writes(), "three adds and two deletes, failed ones included")

	k.ResetCalls()
	assert.Zero(t, k.Calls(routerulefake.OpList)+k.Writes())
}

func TestOpString(t *testing.T) {
	for op, want := range map[routerulefake.Op]string{
		routerulefake.OpList: "RuleList", routerulefake.OpAdd: "RuleAdd", routerulefake.OpDel: "RuleDel", 9: "Op(9)",
	} {
		assert.Equal(t, want, op.String())
	}
}
