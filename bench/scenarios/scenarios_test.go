//go:build linux

package scenarios

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/bench/internal/harness"
)

// Every registered scenario must be runnable and comparable: a unique
// name, a size, exactly one "ours" variant with a Run, and at least one
// peer or floor to compare it with (the heap scenarios measure ours alone).
func TestRegisteredScenariosAreWellFormed(t *testing.T) {
	all := harness.Registered(nil)
	require.NotEmpty(t, all)
	seen := map[string]bool{}
	for _, s := range all {
		assert.False(t, seen[s.Name], "duplicate scenario %s", s.Name)
		seen[s.Name] = true
		assert.Positive(t, s.Size, s.Name)
		ours, others := 0, 0
		names := map[string]bool{}
		for _, v := range s.Variants {
			assert.NotNil(t, v.Run, "%s/%s has no Run", s.Name, v.Name)
			assert.False(t, names[v.Name], "%s: duplicate variant %s", s.Name, v.Name)
			names[v.Name] = true
			if v.Role == harness.Ours {
				ours++
			} else {
				others++
			}
		}
		assert.Equal(t, 1, ours, "%s: variants of role ours", s.Name)
		if !strings.Contains(s.Name, "/heap/") {
			assert.Positive(t, others, "%s: nothing to compare ours with", s.Name)
		}
	}
	for _, area := range []string{"ipsets/", "iptables/", "routes/", "routetable/"} {
		found := false
		for name := range seen {
			found = found || strings.Contains(name, area)
		}
		assert.True(t, found, "no scenario for %s", area)
	}
}
