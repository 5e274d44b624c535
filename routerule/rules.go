package routerule

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/nodeplane/nodeplane/dataplane"
)

// Rules keeps the kernel's routing policy rules of one family, at the owned
// priorities, equal to a declared set. Create it with New; it is safe for
// concurrent use.
type Rules struct {
	opt options

	mu      sync.Mutex
	desired map[ruleKey]Rule
	// dirty is set when the desired set changed since the last successful
	// Apply.
	dirty bool
	// resync makes the next Apply dump the kernel before writing.
	resync bool
	// groups holds our rules in the kernel, by priority, in kernel order.
	groups map[uint32][]*entry
	// failed holds the writes the kernel refused, with their backoff.
	failed *dataplane.Ledger[write]
	// writes counts the rules added and deleted since New.
	writes uint64
}

// New validates o and returns an instance with nothing desired. It does no
// I/O and starts no goroutine: the first Apply reads the kernel.
func New(o Options) (*Rules, error) {
	v, err := o.validate()
	if err != nil {
		return nil, err
	}
	return &Rules{
		opt:     v,
		desired: map[ruleKey]Rule{},
		groups:  map[uint32][]*entry{},
		failed:  dataplane.NewLedger[write](dataplane.Backoff{}, v.clk),
		resync:  true,
	}, nil
}

// check validates rule for this instance and returns its canonical form.
func (r *Rules) check(rule Rule) (Rule, error) {
	c, err := rule.canonical(r.opt.family)
	if err != nil {
		return Rule{}, err
	}
	if _, ok := r.opt.priorities[c.Priority]; !ok {
		return Rule{}, ruleError(rule, fmt.Sprintf("priority %d is not owned (owned: %v)", c.Priority, sortedKeys(r.opt.priorities)), ErrNotOwned)
	}
	if l, ok := c.Action.(ActionLookup); ok {
		if _, ok := r.opt.tables[l.Table]; !ok {
			return Rule{}, ruleError(rule, fmt.Sprintf("table %d is not owned (owned: %v)", l.Table, sortedKeys(r.opt.tables)), ErrNotOwned)
		}
	}
	return c, nil
}

// SetRule adds rule to the desired set, or replaces the desired rule the
// kernel would take for the same one (equal in everything but Invert and
// the goto target). A rule that is malformed, of the other family, or at a
// priority or table this instance does not own is an error wrapping
// ErrInvalidRule, and nothing changes. The kernel changes at the next
// Apply.
func (r *Rules) SetRule(rule Rule) error {
	c, err := r.check(rule)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	k := c.key()
	if cur, ok := r.desired[k]; !ok || cur != c {
		r.desired[k] = c
		r.dirty = true
	}
	return nil
}

// RemoveRule removes rule from the desired set; a rule that is not desired
// (exactly, Invert and goto target included) is ignored. An invalid rule is
// an error wrapping ErrInvalidRule. The kernel changes at the next Apply.
func (r *Rules) RemoveRule(rule Rule) error {
	c, err := r.check(rule)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	k := c.key()
	if cur, ok := r.desired[k]; ok && cur == c {
		delete(r.desired, k)
		r.dirty = true
	}
	return nil
}

// SetRules replaces the whole desired set with rules. Exact duplicates are
// merged; two rules the kernel cannot hold together (equal but for Invert
// or the goto target) are an error wrapping ErrConflict. On any error
// nothing changes. The kernel changes at the next Apply.
func (r *Rules) SetRules(rules []Rule) error {
	next := make(map[ruleKey]Rule, len(rules))
	for _, rule := range rules {
		c, err := r.check(rule)
		if err != nil {
			return err
		}
		k := c.key()
		if prev, ok := next[k]; ok && prev != c {
			return ruleError(rule, fmt.Sprintf("the kernel cannot hold it together with %q (rules equal but for invert or goto target)", prev), ErrConflict)
		}
		next[k] = c
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !maps.Equal(next, r.desired) {
		r.desired = next
		r.dirty = true
	}
	return nil
}

// Desired returns the desired rules in canonical form (masked prefixes,
// default mark mask, value actions), ordered by priority.
func (r *Rules) Desired() []Rule {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := slices.Collect(maps.Values(r.desired))
	sortRules(out)
	return out
}

// sortRules orders rules by priority and, within a priority, in an order
// the kernel accepts: fewer address matches first, then by text.
func sortRules(rules []Rule) {
	type sortKey struct {
		rule Rule
		spec int
		text string
	}
	keys := make([]sortKey, len(rules))
	for i, r := range rules {
		keys[i] = sortKey{r, r.addrSpecificity(), r.String()}
	}
	slices.SortFunc(keys, func(a, b sortKey) int {
		return cmp.Or(
			cmp.Compare(a.rule.Priority, b.rule.Priority),
			cmp.Compare(a.spec, b.spec),
			cmp.Compare(a.text, b.text),
		)
	})
	for i := range keys {
		rules[i] = keys[i].rule
	}
}

// QueueResync makes the next Apply re-read the kernel's rules before
// writing, repairing rules deleted or changed behind its back. A
// dataplane.Loop calls it every dataplane.Options.ResyncInterval; a Rules
// used on its own has no periodic resync unless its user calls QueueResync.
func (r *Rules) QueueResync() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.resync = true
}

// Protocol is the protocol of the rules a Rules writes (0x4e, shown as
// "proto 78" by `ip rule`; routetable's DefaultProtocol too). A delete
// request carries it, so that it hits our rule and never an equal rule of
// the kernel's or of another's. Ownership stays by priority (and table):
// rules of ours written without it (protocol 0) are adopted; deleting one
// that an equal kernel rule precedes fails with ErrAmbiguous, and nothing
// is deleted.
const Protocol uint8 = 0x4e

// Stats returns the instance's counts: the desired rules, our rules in the
// kernel (as last read or written), the writes failing, and the rules
// added and deleted since New.
func (r *Rules) Stats() dataplane.DriverStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	in := 0
	for p := range r.groups {
		in += len(r.present(p))
	}
	return dataplane.DriverStats{Desired: len(r.desired), InKernel: in, Failing: r.failed.Len(), Writes: r.writes}
}

// Phase returns dataplane.PhaseRoutes: rules are written with routes.
func (r *Rules) Phase() dataplane.Phase { return dataplane.PhaseRoutes }

// Name returns Options.Name, or "routerule-v4" / "routerule-v6".
func (r *Rules) Name() string { return r.opt.name }

// Family returns the instance's address family.
func (r *Rules) Family() Family { return r.opt.family }
