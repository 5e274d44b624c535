package managerutil_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/internal/managerutil"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/ipsets"
	"github.com/nodeplane/nodeplane/iptables"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/netfilter"
)

var (
	errInvalid = errors.New("pkg: invalid options")
	errCause   = errors.New("other: bad name")
)

func TestIsNil(t *testing.T) {
	var p *iptables.Table
	var tbl netfilter.Table = p
	assert.True(t, managerutil.IsNil(nil))
	assert.True(t, managerutil.IsNil(tbl))
	assert.False(t, managerutil.IsNil(3))
	assert.False(t, managerutil.IsNil(&iptables.Table{}))
}

func TestDetailAndQuote(t *testing.T) {
	assert.Equal(t, "bad name", managerutil.Detail(errCause))
	assert.Equal(t, "no prefix here: x", managerutil.Detail(errors.New("no prefix here: x")))
	assert.Equal(t, "plain", managerutil.Detail(errors.New("plain")))

	err := managerutil.Quote(errInvalid, fmt.Errorf("%w: %q", errCause, "x"), "Chain", "more")
	assert.Equal(t, `pkg: invalid options: Chain: more: bad name: "x"`, err.Error())
	require.ErrorIs(t, err, errInvalid)
	require.ErrorIs(t, err, errCause)
	assert.Equal(t, "pkg: invalid options: bad name", managerutil.Quote(errInvalid, errCause).Error())

	err = managerutil.Invalid(errInvalid, "unknown Jump %d", 3)
	assert.Equal(t, "pkg: invalid options: unknown Jump 3", err.Error())
	require.ErrorIs(t, err, errInvalid)
}

func TestCheckKeepsTheFirstProblem(t *testing.T) {
	ns := kernelfake.New(kernelfake.Options{})
	sets, err := ipsets.New(ipsets.Options{Family: ipfamily.IPv4, Prefix: "np4-", Kernel: ns})
	require.NoError(t, err)

	c := managerutil.Check{Sentinel: errInvalid}
	c.Family(ipfamily.IPv4)
	c.Driver("Sets", sets, ipfamily.IPv4)
	c.Chain("Chain", "np-chain")
	assert.Equal(t, "np4-x", c.KernelName("Set", sets, "x"))
	require.NoError(t, c.Err())

	c.Quote("Jump", netfilter.JumpPlacement(3).Validate())
	c.Family(0) // not reported: the first problem stands
	c.Refuse(true, "never")
	c.Quote("Other", errCause)
	assert.Equal(t, "pkg: invalid options: Jump: unknown jump placement 3", c.Err().Error())
	require.ErrorIs(t, c.Err(), netfilter.ErrUnknownJumpPlacement)

	for name, check := range map[string]func(*managerutil.Check) string{
		"family": func(c *managerutil.Check) string {
			c.Family(9)
			return fmt.Sprintf("invalid Family %v", ipfamily.Family(9))
		},
		"required": func(c *managerutil.Check) string {
			c.Required("Table", (*iptables.Table)(nil))
			return "Table is required"
		},
		"nil driver": func(c *managerutil.Check) string {
			c.Driver("Sets", (*ipsets.IPSets)(nil), ipfamily.IPv4)
			return "Sets is required"
		},
		"family of driver": func(c *managerutil.Check) string {
			c.Driver("Sets", sets, ipfamily.IPv6)
			return "Sets is of family IPv4, not IPv6"
		},
		"chain": func(c *managerutil.Check) string {
			c.Chain("Chain", "")
			return `Chain: invalid chain name: "" must be 1 to 28 characters`
		},
		"quote": func(c *managerutil.Check) string {
			c.Quote("Name", nil)
			c.Quote("Name", errCause)
			return "Name: bad name"
		},
	} {
		c := managerutil.Check{Sentinel: errInvalid}
		want := check(&c)
		require.ErrorIs(t, c.Err(), errInvalid, name)
		assert.Equal(t, "pkg: invalid options: "+want, c.Err().Error(), name)
	}

	c = managerutil.Check{Sentinel: errInvalid}
	c.Rules("Marks", ipfamily.IPv4, netfilter.Rule{Matches: []netfilter.Match{netfilter.Mark(0x1, 0x1)}, Action: netfilter.Masquerade()})
	require.NoError(t, c.Err())
	c.Rules("Marks", ipfamily.IPv4, netfilter.Rule{Matches: []netfilter.Match{netfilter.Mark(0x3, 0x1)}, Action: netfilter.Masquerade()})
	require.ErrorIs(t, c.Err(), errInvalid)
	require.ErrorIs(t, c.Err(), netfilter.ErrInvalidRule)
	assert.Contains(t, c.Err().Error(), "pkg: invalid options: Marks: ")

	c = managerutil.Check{Sentinel: errInvalid}
	assert.Empty(t, c.KernelName("SetName", sets, "a-name-much-too-long-for-the-kernel-to-take"))
	require.ErrorIs(t, c.Err(), netfilter.ErrSetNameTooLong)
	assert.Contains(t, c.Err().Error(), "pkg: invalid options: SetName: ")
}

func TestRejected(t *testing.T) {
	var r managerutil.Rejected
	require.NoError(t, r.Report())
	require.NoError(t, r.Report(nil, nil))
	r.Add(errInvalid)
	err := r.Report(nil, errCause)
	assert.Equal(t, "pkg: invalid options\nother: bad name", err.Error())
	require.ErrorIs(t, err, errInvalid)
	require.NoError(t, r.Report(), "reported once")
	assert.Equal(t, "other: bad name", r.Report(errCause).Error())
}

func TestDefaults(t *testing.T) {
	assert.Equal(t, "masquerade-v6", managerutil.Name("", "masquerade", ipfamily.IPv6))
	assert.Equal(t, "mine", managerutil.Name("mine", "masquerade", ipfamily.IPv6))
	assert.NotNil(t, managerutil.Logger(nil))
}

func TestSetList(t *testing.T) {
	m := map[string][]int{}
	assert.False(t, managerutil.SetList(m, "a", nil), "nothing to delete")
	assert.True(t, managerutil.SetList(m, "a", []int{1, 2}))
	assert.False(t, managerutil.SetList(m, "a", []int{1, 2}), "equal")
	assert.True(t, managerutil.SetList(m, "a", []int{1}))
	assert.Equal(t, map[string][]int{"a": {1}}, m)
	assert.True(t, managerutil.SetList(m, "a", []int{}))
	assert.Empty(t, m)
}

func TestSortedValues(t *testing.T) {
	byValue := func(a, b int) int { return a - b }
	assert.Equal(t, []int{1, 2, 3}, managerutil.SortedValues(map[string]int{"x": 3, "y": 1, "z": 2}, byValue))
	got := managerutil.SortedValues(map[string]int{}, byValue)
	assert.NotNil(t, got)
	assert.Empty(t, got)
}
