package managerutil

import "github.com/nodeplane/nodeplane/netfilter"

// Placement says where a manager puts the jumps to its chains. Its values
// are those of the managers' own Jump types (masquerade.Jump,
// floatingips.Jump, serviceloop.Jump), which convert to it.
type Placement uint8

const (
	// Insert puts them at the top of their hooks, before every foreign rule
	// (netfilter.Table.InsertRules). The zero value.
	Insert Placement = iota
	// Append puts them at the bottom of their hooks, after every foreign
	// rule (netfilter.Table.AppendRules).
	Append
	// None puts them nowhere: the caller jumps to the chains from chains of
	// its own.
	None
)

// HookJump is a jump from a hook to a manager's chain.
type HookJump struct {
	// Hook is where the jump stands.
	Hook netfilter.Hook
	// Chain is the chain it jumps to.
	Chain string
}

// DeclareJumps declares on t, as owner's rules, the jumps from their hooks
// to their chains: with InsertRules for Insert, with AppendRules for
// Append, the jumps of one hook in their order; None declares nothing. It
// replaces only what owner declared at those hooks before, so managers
// sharing t keep each other's jumps. It stops at the first error.
func DeclareJumps(t netfilter.Table, p Placement, owner string, jumps ...HookJump) error {
	set := t.InsertRules
	switch p {
	case None:
		return nil
	case Append:
		set = t.AppendRules
	}
	var hooks []netfilter.Hook
	byHook := map[netfilter.Hook][]netfilter.Rule{}
	for _, j := range jumps {
		if _, ok := byHook[j.Hook]; !ok {
			hooks = append(hooks, j.Hook)
		}
		byHook[j.Hook] = append(byHook[j.Hook], netfilter.Rule{Action: netfilter.Jump(j.Chain)})
	}
	for _, h := range hooks {
		if err := set(owner, h, byHook[h]); err != nil {
			return err
		}
	}
	return nil
}
