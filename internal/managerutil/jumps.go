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

// DeclareJumps declares on t, for each jump in order, the one rule of ours
// at its hook, which jumps to its chain: with InsertRules for Insert, with
// AppendRules for Append; None declares nothing. Either replaces what was
// declared at the hook before. It stops at the first error.
func DeclareJumps(t netfilter.Table, p Placement, jumps ...HookJump) error {
	set := t.InsertRules
	switch p {
	case None:
		return nil
	case Append:
		set = t.AppendRules
	}
	for _, j := range jumps {
		if err := set(j.Hook, []netfilter.Rule{{Action: netfilter.Jump(j.Chain)}}); err != nil {
			return err
		}
	}
	return nil
}
