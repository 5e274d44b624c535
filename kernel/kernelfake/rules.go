package kernelfake

import (
	"context"
	"slices"
	"syscall"

	"github.com/nodeplane/nodeplane/kernel"
)

// Rules implements kernel.Rules: the rules of family in the kernel's
// order.
func (ns *Namespace) Rules(ctx context.Context, family kernel.Family) ([]kernel.Rule, error) {
	unlock, err := ns.begin(ctx, OpRules)
	defer unlock()
	if err != nil {
		return nil, err
	}
	if !family.Valid() {
		return nil, invalidf("rules: %v is neither IPv4 nor IPv6", family)
	}
	return slices.Clone(ns.s.rules[family]), nil
}

// AddRule implements kernel.Rules: the rule goes after every rule of its
// priority (Priority 0: one less than the second rule's, as the kernel
// chooses); one the kernel counts as identical (see fib.go) fails with
// an error wrapping kernel.ErrExists and EEXIST.
func (ns *Namespace) AddRule(ctx context.Context, r kernel.Rule) error {
	unlock, err := ns.begin(ctx, OpAddRule)
	defer unlock()
	if err != nil {
		return err
	}
	if err := r.Validate(); err != nil {
		return err
	}
	if err := ns.refused(OpAddRule, r); err != nil {
		return err
	}
	r = storedRule(r)
	list := ns.s.rules[r.Family]
	if r.Priority == 0 {
		r.Priority = defaultRulePriority(list)
	}
	for i := range list {
		if ruleExists(&r, &list[i]) {
			return errnof(syscall.EEXIST, "add rule priority %d: exists", r.Priority)
		}
	}
	ns.s.rules[r.Family] = insertRule(list, r)
	return nil
}

// DeleteRule implements kernel.Rules: it deletes the first rule that
// matches every field r sets (zero fields, and -1 suppressors, match
// anything); none fails with an error wrapping
// kernel.ErrNotFound and ENOENT.
func (ns *Namespace) DeleteRule(ctx context.Context, r kernel.Rule) error {
	unlock, err := ns.begin(ctx, OpDeleteRule)
	defer unlock()
	if err != nil {
		return err
	}
	if !r.Family.Valid() {
		return invalidf("delete rule: %v is neither IPv4 nor IPv6", r.Family)
	}
	if (r.Src.IsValid() && r.Family.CheckPrefix(r.Src) != nil) || (r.Dst.IsValid() && r.Family.CheckPrefix(r.Dst) != nil) {
		return invalidf("delete rule: source %v or destination %v is not an %v prefix", r.Src, r.Dst, r.Family)
	}
	if err := ns.refused(OpDeleteRule, r); err != nil {
		return err
	}
	r = storedRule(r)
	list := ns.s.rules[r.Family]
	for i := range list {
		if ruleDeleteMatches(&r, &list[i]) {
			ns.s.rules[r.Family] = slices.Delete(list, i, i+1)
			return nil
		}
	}
	return errnof(syscall.ENOENT, "delete rule priority %d: no such rule", r.Priority)
}
