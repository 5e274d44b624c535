package dataplane

import (
	"context"
	"fmt"
	"strings"

	"github.com/nodeplane/nodeplane/internal/textform"
)

// Planner is implemented by drivers that can say what their next Apply
// would write. The loop's Plan collects it from every driver that has it.
type Planner interface {
	// Plan returns the exact kernel writes the next Apply would make, in
	// the order it would make them, and writes nothing. It reads the
	// kernel where the next Apply would read it (a driver that keeps a
	// view reads it on the first call and after QueueResync, and that
	// read then serves the Apply). It decides with the code Apply decides
	// with, counting every write a success, so an Apply right after it
	// (with nothing changed in between and no write refused) makes
	// exactly these writes, and an Apply whose Plan is empty writes
	// nothing. A DeletionApplier's Plan includes what its ApplyDeletions
	// would write. It is safe to call while the loop runs.
	Plan(ctx context.Context) (Plan, error)
}

// Plan is what one driver's next Apply would write: its Writes, in the
// order the Apply would make them. Its text (String) reads like a diff,
// one write a line.
type Plan struct {
	// Driver is the driver's name, such as "routetable-ipv4-254".
	Driver string
	// Writes are the kernel writes, in order; none when the kernel is as
	// the driver wants it (or nothing is due: an object waiting for its
	// retry is not written).
	Writes []Write
}

// Empty reports whether the plan writes nothing.
func (p Plan) Empty() bool { return len(p.Writes) == 0 }

// String returns the plan as text: a header line with the driver's name
// and the number of writes, then one line per write (see Write.String),
// such as
//
//	routetable-ipv4-254: 2 writes
//	+ route 10.0.1.0/24 via 10.0.0.2 dev eth0 proto 80
//	- route 10.0.9.0/24 dev eth0 proto 80
//
// An empty plan is the header alone: "routetable-ipv4-254: no writes".
func (p Plan) String() string {
	var b strings.Builder
	b.WriteString(p.Driver)
	switch len(p.Writes) {
	case 0:
		b.WriteString(": no writes")
	case 1:
		b.WriteString(": 1 write")
	default:
		fmt.Fprintf(&b, ": %d writes", len(p.Writes))
	}
	for _, w := range p.Writes {
		b.WriteByte('\n')
		b.WriteString(w.String())
	}
	return b.String()
}

// Write is one kernel write of a Plan: what it does (Op) to which object
// (Kind, and Object, the object's text as the driver writes it).
//
// Every driver speaks in the same terms. routetable writes routes
// ("route"), static neighbours ("neighbour") and the deletion of the
// conntrack entries of addresses ("conntrack"); routerule writes rules
// ("rule"); sysctls.Driver writes sysctls ("sysctl", its Object "key =
// value"). A netfilter driver writes chains ("chain", replaced whole, or
// added and deleted), hook rules ("rule") and, on nftables, its table
// ("table", when rebuilt whole); a set driver sets ("set") and their
// members ("element"). A tunnel writes its device ("link"), FDB entries
// ("fdb") and neighbours ("neighbour"); WireGuard its device ("device":
// key, port, mark), its link ("link") and peers ("peer", by public key).
// A BPF map sync writes its entries ("entry", "key → value"), the service
// proxy its program attachments ("attach").
type Write struct {
	// Op is what the write does to the object.
	Op WriteOp
	// Kind is what the object is, as in an ObjectError.
	Kind ObjectKind
	// Object is the object's text: what is written, or, for a deletion,
	// what is deleted, in the driver's canonical form.
	Object string
	// Detail says more: what a replace replaces, why a write is made.
	// Empty when there is nothing to add.
	Detail string
}

// String returns the write in one line: Op's sign, the kind, the object
// and the detail in parentheses, such as "~ sysctl net.ipv4.ip_forward =
// 1 (was 0)".
func (w Write) String() string {
	s := w.Op.sign() + " " + string(w.Kind) + " " + w.Object
	if w.Detail != "" {
		s += " (" + w.Detail + ")"
	}
	return s
}

// WriteOp is what a Write does to its object.
type WriteOp uint8

// The write operations. The zero WriteOp is not valid.
const (
	// WriteAdd creates an object the kernel does not hold ("+").
	WriteAdd WriteOp = iota + 1
	// WriteReplace changes an object the kernel holds into the desired
	// one ("~").
	WriteReplace
	// WriteDelete removes an object ("-").
	WriteDelete
)

// String returns "add", "replace" or "delete".
func (o WriteOp) String() string {
	switch o {
	case WriteAdd:
		return "add"
	case WriteReplace:
		return "replace"
	case WriteDelete:
		return "delete"
	}
	return fmt.Sprintf("WriteOp(%d)", int(o))
}

// sign is the op's mark in a Plan's text: "+", "~" or "-" ("?" for an
// invalid op).
func (o WriteOp) sign() string {
	switch o {
	case WriteAdd:
		return "+"
	case WriteReplace:
		return "~"
	case WriteDelete:
		return "-"
	}
	return "?"
}

// MarshalText returns String's text: "add", "replace" or "delete"
// (encoding.TextMarshaler); an invalid op gives "WriteOp(n)", which does
// not unmarshal.
func (o WriteOp) MarshalText() ([]byte, error) { return []byte(o.String()), nil }

// UnmarshalText sets o to the op whose String is text (encoding.TextUnmarshaler).
// Any other text is an error, and o is left as it was.
func (o *WriteOp) UnmarshalText(text []byte) error {
	v, err := textform.Parse(text, WriteAdd, WriteReplace, WriteDelete)
	if err == nil {
		*o = v
	}
	return err
}

// Plan returns the Plan of every registered driver that implements
// Planner, in phase order (drivers of one phase in registration order).
// Drivers that are not Planners are left out. Nothing is written. A
// driver whose Plan fails (or panics) is left out and its error, naming
// it, is joined into the returned error; the others' plans are returned
// all the same. It may be called at any time, also while Run runs and on
// an inactive loop, whose drivers are never applied: their plans are what
// they would write if applied now. A nil ctx is context.Background().
func (l *Loop) Plan(ctx context.Context) ([]Plan, error) {
	return collect(l, ctx, "Plan", func(ctx context.Context, p Planner) (Plan, error) { return p.Plan(ctx) })
}

// Unplanned returns the names of the registered drivers that are not
// Planners, in phase order: what a Plan leaves out. A program that shows
// a plan to people says so with it.
func (l *Loop) Unplanned() []string {
	var out []string
	l.eachDriver(func(e *driverEntry) {
		if _, ok := e.d.(Planner); !ok {
			out = append(out, e.name)
		}
	})
	return out
}
