package nfcore

import "github.com/nodeplane/nodeplane/internal/textform"

// What a netfilter backend programs is decided the same way in both: the
// chains reached through jumps from a set of roots, and the chains whose
// jumps cannot be written. Reach does that walk; each backend says what
// its roots are and what its chains jump to.

// Graph is the jumps between a table's chains, as Reach walks them.
type Graph struct {
	// Targets appends to dst the chains that the declared chain name
	// jumps or goes to, in the order of its rules, and returns dst.
	Targets func(dst []string, name string) []string
	// Declared reports whether name is a chain of ours that the table
	// declares: the walk goes into it.
	Declared func(name string) bool
	// Foreign reports whether a target is not the table's to declare (a
	// chain of another owner, which the kernel checks exists): the walk
	// neither goes into it nor reports it. Nil: every target is ours.
	Foreign func(name string) bool
	// Visit, if set, is called once for each chain the walk reaches, when
	// it first reaches it.
	Visit func(name string)
	// Size, if positive, is about how many chains the walk reaches (a
	// backend passes its count of declared chains): the walk sizes its
	// maps for it once instead of growing them.
	Size int
}

// BreakReason says why a chain's jump cannot be written.
type BreakReason uint8

const (
	// BreakUnknown is a jump to a chain of ours that is not declared.
	BreakUnknown BreakReason = iota + 1
	// BreakLoop is a jump that closes a loop, which the kernel refuses.
	BreakLoop
)

// String returns "unknown chain" or "loop".
func (r BreakReason) String() string {
	switch r {
	case BreakUnknown:
		return "unknown chain"
	case BreakLoop:
		return "loop"
	}
	return "break(?)"
}

// MarshalText returns String's text (encoding.TextMarshaler).
func (r BreakReason) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText sets r to the reason whose String is text
// (encoding.TextUnmarshaler); any other text is an error and r is left as
// it was.
func (r *BreakReason) UnmarshalText(text []byte) error {
	v, err := textform.Parse(text, BreakUnknown, BreakLoop)
	if err == nil {
		*r = v
	}
	return err
}

// Break is a jump that cannot be written: Chain's jump to Target.
type Break struct {
	// Chain is the chain holding the jump.
	Chain string
	// Target is the chain it jumps or goes to.
	Target string
	// Reason says why the jump cannot be written.
	Reason BreakReason
}

// Reach walks g depth first from each of roots in turn (each must be
// declared) and returns the chains reached, roots included. It calls broke,
// in the order of the walk, for every jump from a reached chain to a chain
// of ours that is not declared, and for every jump that closes a loop (the
// jump found last on the path, so the chain blamed depends only on the
// roots' order and the rules' order). A broken jump is not followed; the
// chain holding it is still reached. The walk keeps its path on a heap
// stack: no recursion, however deep the jumps go.
func Reach(g Graph, roots []string, broke func(Break)) map[string]bool {
	const (
		unseen = iota
		onPath
		done
	)
	state := make(map[string]uint8, max(g.Size, 0))
	reached := make(map[string]bool, max(g.Size, 0))
	type frame struct {
		name string
		// The frame's targets are targets[start:end]; next is the
		// next one to follow.
		start, next, end int
	}
	var (
		stack   []frame
		targets []string
	)
	push := func(name string) {
		state[name] = onPath
		reached[name] = true
		if g.Visit != nil {
			g.Visit(name)
		}
		start := len(targets)
		targets = g.Targets(targets, name)
		stack = append(stack, frame{name: name, start: start, next: start, end: len(targets)})
	}
	for _, root := range roots {
		if state[root] != unseen {
			continue
		}
		push(root)
		for len(stack) > 0 {
			top := &stack[len(stack)-1]
			if top.next == top.end {
				state[top.name] = done
				targets = targets[:top.start]
				stack = stack[:len(stack)-1]
				continue
			}
			from, target := top.name, targets[top.next]
			top.next++
			switch {
			case g.Foreign != nil && g.Foreign(target):
			case state[target] == onPath:
				broke(Break{Chain: from, Target: target, Reason: BreakLoop})
			case state[target] == done:
			case !g.Declared(target):
				broke(Break{Chain: from, Target: target, Reason: BreakUnknown})
			default:
				push(target)
			}
		}
	}
	return reached
}
