package nfcore_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/internal/nfcore"
	"github.com/nodeplane/nodeplane/netfilter"
)

func jump(c string) netfilter.Rule { return netfilter.Rule{Action: netfilter.Jump(c)} }

func targets(rs []netfilter.Rule) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.JumpTarget())
	}
	return out
}

// TestHookRulesOwners checks that owners keep their rules apart, in the
// order of their names whatever the order of the calls, per hook and group.
func TestHookRulesOwners(t *testing.T) {
	var h nfcore.HookRules
	post := netfilter.HookPostrouting
	h.Set(post, false, "b", []netfilter.Rule{jump("b1"), jump("b2")})
	h.Set(post, false, "a", []netfilter.Rule{jump("a1")})
	h.Set(post, true, "c", []netfilter.Rule{jump("c1")})
	assert.Equal(t, []string{"a1", "b1", "b2"}, targets(h.Group(post, false)))
	assert.Equal(t, []string{"c1"}, targets(h.Group(post, true)))
	assert.Empty(t, h.Group(netfilter.HookForward, false))

	// With previews without changing anything.
	assert.Equal(t, []string{"a1", "b9"}, targets(h.With(post, false, "b", []netfilter.Rule{jump("b9")})))
	assert.Equal(t, []string{"a1", "b1", "b2", "z1"}, targets(h.With(post, false, "z", []netfilter.Rule{jump("z1")})))
	assert.Equal(t, []string{"a1", "b1", "b2"}, targets(h.Group(post, false)))

	// Removing one owner leaves the others.
	h.Set(post, false, "a", nil)
	assert.Equal(t, []string{"b1", "b2"}, targets(h.Group(post, false)))
	h.Set(post, false, "b", nil)
	assert.Empty(t, h.Group(post, false))
	assert.Equal(t, []string{"c1"}, targets(h.Group(post, true)))
}

func TestValidateOwner(t *testing.T) {
	require.NoError(t, nfcore.ValidateOwner("np-masq"))
	for _, bad := range []string{"", "a b", "x\n", string(make([]byte, 65)), "\xff"} {
		require.ErrorIs(t, nfcore.ValidateOwner(bad), netfilter.ErrInvalidRule, "%q", bad)
	}
}
