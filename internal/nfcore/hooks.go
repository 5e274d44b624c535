package nfcore

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/nodeplane/nodeplane/netfilter"
)

// HookRules holds, for each hook and each of its two groups (the rules of
// InsertRules at the hook's top, those of AppendRules at its bottom), the
// rules each owner declared. A group is the concatenation of its owners'
// rules in the order of their names, so the result depends only on what is
// declared, never on the order of the declarations: a restarted agent
// whose managers declare in another order renders the same rules. The zero
// value is ready to use; it is not safe for concurrent use.
type HookRules struct {
	groups map[groupKey]map[string][]netfilter.Rule
}

type groupKey struct {
	hook     netfilter.Hook
	appended bool
}

// ValidateOwner checks the owner name of a hook group: non-empty, at most
// 64 bytes, printable UTF-8 without spaces.
func ValidateOwner(owner string) error {
	if owner == "" || len(owner) > 64 || !utf8.ValidString(owner) || strings.IndexFunc(owner, func(r rune) bool { return !unicode.IsPrint(r) || unicode.IsSpace(r) }) >= 0 {
		return fmt.Errorf("%w: hook rule owner %q (1 to 64 bytes of printable UTF-8 without spaces)", netfilter.ErrInvalidRule, owner)
	}
	return nil
}

// With returns the whole group at hook (appended: the AppendRules group)
// as it would be with owner's rules replaced by rules (none: owner
// removed), without changing h. The result is a new slice.
func (h *HookRules) With(hook netfilter.Hook, appended bool, owner string, rules []netfilter.Rule) []netfilter.Rule {
	byOwner := h.groups[groupKey{hook, appended}]
	owners := make([]string, 0, len(byOwner)+1)
	for o := range byOwner {
		if o != owner {
			owners = append(owners, o)
		}
	}
	if len(rules) > 0 {
		owners = append(owners, owner)
	}
	slices.Sort(owners)
	var out []netfilter.Rule
	for _, o := range owners {
		if o == owner {
			out = append(out, rules...)
		} else {
			out = append(out, byOwner[o]...)
		}
	}
	return out
}

// Group returns the whole group at hook (appended: the AppendRules group),
// as a new slice.
func (h *HookRules) Group(hook netfilter.Hook, appended bool) []netfilter.Rule {
	return h.With(hook, appended, "", nil)
}

// Set records rules as owner's at hook (appended: the AppendRules group);
// none removes the owner from the group.
func (h *HookRules) Set(hook netfilter.Hook, appended bool, owner string, rules []netfilter.Rule) {
	k := groupKey{hook, appended}
	if len(rules) == 0 {
		delete(h.groups[k], owner)
		if len(h.groups[k]) == 0 {
			delete(h.groups, k)
		}
		return
	}
	if h.groups == nil {
		h.groups = map[groupKey]map[string][]netfilter.Rule{}
	}
	if h.groups[k] == nil {
		h.groups[k] = map[string][]netfilter.Rule{}
	}
	h.groups[k][owner] = slices.Clone(rules)
}
