package policy

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/nodeplane/nodeplane/nftables"
)

// RuleCounter is what one rule of a policy or profile counted in the
// kernel: the packets and bytes its action was taken for.
type RuleCounter struct {
	// Policy is the ID of the policy or, with Profile set, the profile.
	Policy string
	// Profile says Policy names a profile.
	Profile bool
	// Ingress says the rule is an ingress rule; else an egress one.
	Ingress bool
	// Rule is the rule's index in its direction's list.
	Rule int
	// Packets and Bytes are what it counted since its chain was written.
	Packets, Bytes uint64
}

// countedChain is what Counters needs to know about a policy chain.
type countedChain struct {
	id      string
	profile bool
	ingress bool
	acts    []int // per model rule, its acting rule's index (-1: left out)
}

// Counters reads the packet and byte counters of every rule of every
// policy and profile the Manager declared, from the kernel, sorted by
// policy, direction and rule; a rule left out of this family (or not yet
// written) counts zero. It needs a Filter that counts per rule: an
// *nftables.Table made with Options.Counters; any other Filter is an error
// wrapping ErrNotSupported. It writes nothing and may be called from any
// goroutine.
func (m *Manager) Counters(ctx context.Context) ([]RuleCounter, error) {
	t, ok := m.o.Filter.(*nftables.Table)
	if !ok || !t.Options().Counters {
		return nil, fmt.Errorf("%w: per-rule counters need an nftables Filter with Options.Counters", ErrNotSupported)
	}
	kernel, err := t.Counters(ctx)
	if err != nil {
		return nil, fmt.Errorf("policy: counters: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []RuleCounter
	for name, c := range m.counted {
		counts := kernel[name]
		for i, at := range c.acts {
			rc := RuleCounter{Policy: c.id, Profile: c.profile, Ingress: c.ingress, Rule: i}
			if at >= 0 && at < len(counts) {
				rc.Packets, rc.Bytes = counts[at].Packets, counts[at].Bytes
			}
			out = append(out, rc)
		}
	}
	slices.SortFunc(out, func(a, b RuleCounter) int {
		return cmp.Or(cmp.Compare(a.Policy, b.Policy), boolCompare(a.Profile, b.Profile),
			boolCompare(!a.Ingress, !b.Ingress), cmp.Compare(a.Rule, b.Rule))
	})
	return out, nil
}

func boolCompare(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}
