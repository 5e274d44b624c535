package netfilter_test

import (
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/iptables"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/kernel/kernelfake/iptablesfake"
	"github.com/nodeplane/nodeplane/netfilter"
)

func TestJumpPlacementValidate(t *testing.T) {
	for _, p := range []netfilter.JumpPlacement{netfilter.JumpInsert, netfilter.JumpAppend, netfilter.JumpNone} {
		require.NoError(t, p.Validate(), "%v", p)
	}
	err := netfilter.JumpPlacement(3).Validate()
	require.ErrorIs(t, err, netfilter.ErrUnknownJumpPlacement)
	require.EqualError(t, err, "netfilter: unknown jump placement 3")
}

// hashComment is the comment the iptables Table gives each of its rules.
var hashComment = regexp.MustCompile(`-m comment --comment "np:[A-Za-z0-9_-]{16}" `)

// newNAT returns an iptables nat Table on a fake namespace whose OUTPUT
// holds a foreign rule, with the chains np-a and np-b declared.
func newNAT(t *testing.T) (*kernelfake.Namespace, *iptables.Table) {
	t.Helper()
	ns := kernelfake.New(kernelfake.Options{})
	tbl, err := iptables.New(iptables.Options{Table: "nat", Family: ipfamily.IPv4, Backend: iptables.BackendNFT,
		ChainPrefix: "np-", Kernel: ns, PostWriteRecheck: []time.Duration{}})
	require.NoError(t, err)
	require.NoError(t, ns.IPTables().Exec(iptablesfake.BackendNFT, ipfamily.IPv4, "-t", "nat", "-A", "OUTPUT", "-i", "eth9", "-j", "ACCEPT"))
	require.NoError(t, tbl.SetChains(netfilter.Chain{Name: "np-a"}, netfilter.Chain{Name: "np-b"}))
	return ns, tbl
}

// rules returns the rules of the nat chain without their hash comments.
func rules(ns *kernelfake.Namespace, chain string) []string {
	var out []string
	for _, r := range ns.IPTables().Rules(iptablesfake.BackendNFT, ipfamily.IPv4, "nat", chain) {
		out = append(out, hashComment.ReplaceAllString(r, ""))
	}
	return out
}

func TestDeclareJumps(t *testing.T) {
	for _, tc := range []struct {
		p    netfilter.JumpPlacement
		want []string
	}{
		{netfilter.JumpInsert, []string{"-j np-a", "-i eth9 -j ACCEPT"}},
		{netfilter.JumpAppend, []string{"-i eth9 -j ACCEPT", "-j np-a"}},
		{netfilter.JumpNone, []string{"-i eth9 -j ACCEPT"}},
	} {
		ns, tbl := newNAT(t)
		require.NoError(t, netfilter.DeclareJumps(tbl, tc.p, "np-a",
			netfilter.HookJump{Hook: netfilter.HookOutput, Chain: "np-a"},
			netfilter.HookJump{Hook: netfilter.HookPostrouting, Chain: "np-b"}))
		_, err := tbl.Apply(t.Context())
		require.NoError(t, err)
		assert.Equal(t, tc.want, rules(ns, "OUTPUT"), "%v", tc.p)
		assert.Len(t, rules(ns, "POSTROUTING"), len(tc.want)-1, "%v", tc.p)
	}
}

// Two owners declare jumps at the same hook; each keeps its own, and the
// jumps of one owner at one hook keep their order.
func TestDeclareJumpsOwnersAndOrder(t *testing.T) {
	ns, tbl := newNAT(t)
	require.NoError(t, netfilter.DeclareJumps(tbl, netfilter.JumpAppend, "owner-b",
		netfilter.HookJump{Hook: netfilter.HookOutput, Chain: "np-b"},
		netfilter.HookJump{Hook: netfilter.HookOutput, Chain: "np-a"}))
	require.NoError(t, netfilter.DeclareJumps(tbl, netfilter.JumpAppend, "owner-a",
		netfilter.HookJump{Hook: netfilter.HookOutput, Chain: "np-a"}))
	_, err := tbl.Apply(t.Context())
	require.NoError(t, err)
	assert.Equal(t, []string{"-i eth9 -j ACCEPT", "-j np-a", "-j np-b", "-j np-a"}, rules(ns, "OUTPUT"))

	// Declaring again replaces only owner-b's jumps.
	require.NoError(t, netfilter.DeclareJumps(tbl, netfilter.JumpAppend, "owner-b",
		netfilter.HookJump{Hook: netfilter.HookOutput, Chain: "np-b"}))
	_, err = tbl.Apply(t.Context())
	require.NoError(t, err)
	assert.Equal(t, []string{"-i eth9 -j ACCEPT", "-j np-a", "-j np-b"}, rules(ns, "OUTPUT"))
}

// An unknown placement is refused before anything is declared.
func TestDeclareJumpsRefusesAnUnknownPlacement(t *testing.T) {
	ns, tbl := newNAT(t)
	err := netfilter.DeclareJumps(tbl, netfilter.JumpNone+1, "np-a",
		netfilter.HookJump{Hook: netfilter.HookOutput, Chain: "np-a"})
	require.ErrorIs(t, err, netfilter.ErrUnknownJumpPlacement)
	_, err = tbl.Apply(t.Context())
	require.NoError(t, err)
	assert.Equal(t, []string{"-i eth9 -j ACCEPT"}, rules(ns, "OUTPUT"))
}
