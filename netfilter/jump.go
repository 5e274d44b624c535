package netfilter

import "fmt"

// JumpPlacement says where a manager puts the jumps from hooks to its
// chains (DeclareJumps). The managers that own chains of a shared Table
// (masquerade, floatingips, serviceloop) take one in their Options.
type JumpPlacement uint8

const (
	// JumpInsert puts them at the top of their hooks, before every foreign
	// rule (Table.InsertRules). The zero value.
	JumpInsert JumpPlacement = iota
	// JumpAppend puts them at the bottom of their hooks, after every
	// foreign rule (Table.AppendRules).
	JumpAppend
	// JumpNone puts them nowhere: the caller jumps to the chains from
	// chains of its own.
	JumpNone
)

// Validate returns nil for JumpInsert, JumpAppend and JumpNone, and for any
// other value an error matching ErrUnknownJumpPlacement.
func (p JumpPlacement) Validate() error {
	if p > JumpNone {
		return fmt.Errorf("%w %d", ErrUnknownJumpPlacement, uint8(p))
	}
	return nil
}

// HookJump is a jump from a hook to a manager's chain.
type HookJump struct {
	// Hook is where the jump stands.
	Hook Hook
	// Chain is the chain it jumps to.
	Chain string
}

// DeclareJumps declares on t, as owner's rules, the jumps from their hooks
// to their chains: with InsertRules for JumpInsert, with AppendRules for
// JumpAppend, the jumps of one hook in their order; JumpNone declares
// nothing. It replaces only what owner declared at those hooks before, so
// managers sharing t keep each other's jumps. A placement that Validate
// refuses is an error and declares nothing; otherwise DeclareJumps stops at
// the first error of t.
func DeclareJumps(t Table, p JumpPlacement, owner string, jumps ...HookJump) error {
	if err := p.Validate(); err != nil {
		return err
	}
	set := t.InsertRules
	switch p {
	case JumpNone:
		return nil
	case JumpAppend:
		set = t.AppendRules
	}
	var hooks []Hook
	byHook := map[Hook][]Rule{}
	for _, j := range jumps {
		if _, ok := byHook[j.Hook]; !ok {
			hooks = append(hooks, j.Hook)
		}
		byHook[j.Hook] = append(byHook[j.Hook], Rule{Action: Jump(j.Chain)})
	}
	for _, h := range hooks {
		if err := set(owner, h, byHook[h]); err != nil {
			return err
		}
	}
	return nil
}
