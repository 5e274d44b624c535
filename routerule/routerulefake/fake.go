package routerulefake

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"syscall"

	"github.com/vishvananda/netlink"

	"github.com/nodeplane/nodeplane/routerule/internal/fib"
)

// Op names one of the three netlink calls the fake serves.
type Op uint8

// The calls, for Calls, FailNext and hooks.
const (
	// OpList is RuleList.
	OpList Op = iota + 1
	// OpAdd is RuleAdd.
	OpAdd
	// OpDel is RuleDel.
	OpDel
)

// String returns the call's name, such as "RuleAdd".
func (o Op) String() string {
	switch o {
	case OpList:
		return "RuleList"
	case OpAdd:
		return "RuleAdd"
	case OpDel:
		return "RuleDel"
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// Hook is consulted before every call the fake serves, with the call and
// its rule (nil for OpList, whose family is then in family). A non-nil error
// fails the call without changing anything; for OpList, an error matching
// netlink.ErrDumpInterrupted is returned together with the full list, as
// the netlink library does for an interrupted dump.
type Hook func(op Op, family int, rule *netlink.Rule) error

// Kernel is an in-memory stand-in for one network namespace's routing
// policy rules, both families, served through the three calls of
// *netlink.Handle that routerule uses. It is safe for concurrent use.
type Kernel struct {
	mu    sync.Mutex
	lists map[int][]fib.Rule
	calls map[Op]int
	fails map[Op][]error
	hook  Hook
}

// New returns a fake holding the rules of a fresh network namespace: for
// IPv4 "0: lookup local", "32766: lookup main" and "32767: lookup default";
// for IPv6 "0: lookup local" and "32766: lookup main".
func New() *Kernel {
	k := NewEmpty()
	for _, d := range []struct {
		fam   int
		prio  uint32
		table uint32
	}{
		{fib.FamilyV4, 0, 255}, {fib.FamilyV4, 32766, 254}, {fib.FamilyV4, 32767, 253},
		{fib.FamilyV6, 0, 255}, {fib.FamilyV6, 32766, 254},
	} {
		k.lists[d.fam] = append(k.lists[d.fam], fib.Rule{
			Family: d.fam, Priority: d.prio, HasPriority: true, Action: fib.ActionToTable,
			Table: d.table, Protocol: 2, SuppressPrefixlen: -1, SuppressIfgroup: -1,
		})
	}
	return k
}

// NewEmpty returns a fake with no rules at all.
func NewEmpty() *Kernel {
	return &Kernel{
		lists: map[int][]fib.Rule{},
		calls: map[Op]int{},
		fails: map[Op][]error{},
	}
}

// enter counts a call and returns the error it must fail with, if any.
func (k *Kernel) enter(op Op, family int, r *netlink.Rule) error {
	k.calls[op]++
	if q := k.fails[op]; len(q) > 0 {
		err := q[0]
		k.fails[op] = q[1:]
		return err
	}
	if k.hook != nil {
		return k.hook(op, family, r)
	}
	return nil
}

// RuleList returns the rules of family (netlink.FAMILY_V4, FAMILY_V6, or
// FAMILY_ALL for both), in the kernel's order, as netlink's RuleList reports
// them: in particular without their action (Type is 0), so blackhole,
// unreachable, prohibit and nop rules look the same.
func (k *Kernel) RuleList(family int) ([]netlink.Rule, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	err := k.enter(OpList, family, nil)
	if err != nil && !errors.Is(err, netlink.ErrDumpInterrupted) {
		return nil, err
	}
	out := make([]netlink.Rule, 0)
	for _, fam := range families(family) {
		for _, r := range k.lists[fam] {
			out = append(out, r.Dump())
		}
	}
	return out, err
}

func families(family int) []int {
	switch family {
	case fib.FamilyV4, fib.FamilyV6:
		return []int{family}
	case 0:
		return []int{fib.FamilyV4, fib.FamilyV6}
	}
	return nil
}

// RuleAdd adds a rule as the kernel does for netlink's RuleAdd (create,
// exclusive): after every rule of the same priority. It fails with EEXIST
// when the kernel would (see the package documentation), with EINVAL for a
// backward goto, a lookup without a table, an unknown action or a prefix
// longer than its family allows, and with EAFNOSUPPORT for a family other
// than IPv4 or IPv6. A rule without a priority gets the kernel's default.
func (k *Kernel) RuleAdd(r *netlink.Rule) error {
	if r == nil {
		return syscall.EINVAL
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	req, err := fib.FromRequest(r, true)
	if errors.Is(err, fib.ErrFamilyMismatch) {
		return err // refused by the netlink library: never sent
	}
	if err := k.enter(OpAdd, req.Family, r); err != nil {
		return err
	}
	if err != nil {
		return syscall.EINVAL
	}
	if req.Family != fib.FamilyV4 && req.Family != fib.FamilyV6 {
		return syscall.EAFNOSUPPORT
	}
	list := k.lists[req.Family]
	if !req.HasPriority {
		req.Priority, req.HasPriority = defaultPriority(list), true
	}
	if err := validate(req); err != nil {
		return err
	}
	for _, have := range list {
		if fib.Exists(req, have) {
			return syscall.EEXIST
		}
	}
	at := len(list)
	for i, have := range list {
		if have.Priority > req.Priority {
			at = i
			break
		}
	}
	k.lists[req.Family] = slices.Insert(list, at, req)
	return nil
}

// defaultPriority is the kernel's priority for a rule added without one:
// one less than the second rule's, or 0.
func defaultPriority(list []fib.Rule) uint32 {
	if len(list) >= 2 && list[1].Priority > 0 {
		return list[1].Priority - 1
	}
	return 0
}

func validate(req fib.Rule) error {
	bits := 32
	if req.Family == fib.FamilyV6 {
		bits = 128
	}
	for _, p := range []netip.Prefix{req.Src, req.Dst} {
		if p.IsValid() && (p.Bits() > bits || p.Addr().BitLen() != bits) {
			return syscall.EINVAL
		}
	}
	switch req.Action {
	case fib.ActionToTable:
		// IPv4 would create a fresh table here; IPv6 refuses. The fake
		// refuses both.
		if req.Table == 0 {
			return syscall.EINVAL
		}
	case fib.ActionGoto:
		if req.Target <= req.Priority {
			return syscall.EINVAL
		}
	case fib.ActionNop, fib.ActionBlackhole, fib.ActionUnreachable, fib.ActionProhibit:
	default:
		return syscall.EINVAL
	}
	if len(req.IIF) >= 16 || len(req.OIF) >= 16 {
		return syscall.EINVAL
	}
	return nil
}

// RuleDel deletes, as the kernel does, the first rule in list order that
// matches every attribute r sets (a zero attribute matches anything, and
// the invert flag and goto target are never compared). It fails with
// ENOENT when no rule matches.
func (k *Kernel) RuleDel(r *netlink.Rule) error {
	if r == nil {
		return syscall.EINVAL
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	req, err := fib.FromRequest(r, false)
	if errors.Is(err, fib.ErrFamilyMismatch) {
		return err // refused by the netlink library: never sent
	}
	if err := k.enter(OpDel, req.Family, r); err != nil {
		return err
	}
	if err != nil {
		return syscall.EINVAL
	}
	list := k.lists[req.Family]
	for i, have := range list {
		if fib.DeleteMatches(req, have) {
			k.lists[req.Family] = slices.Delete(list, i, i+1)
			return nil
		}
	}
	return syscall.ENOENT
}

// Rules returns the rules of family (FAMILY_V4, FAMILY_V6 or FAMILY_ALL) in
// the kernel's order, like RuleList but with each rule's action in Type
// (netlink.Rule.Type holds FR_ACT_* values: 1 lookup, 2 goto, 3 nop, 6
// blackhole, 7 unreachable, 8 prohibit). It is for inspection: it is not
// counted and never fails.
func (k *Kernel) Rules(family int) []netlink.Rule {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []netlink.Rule
	for _, fam := range families(family) {
		for _, r := range k.lists[fam] {
			d := r.Dump()
			d.Type = r.Action
			out = append(out, d)
		}
	}
	return out
}

// Calls returns how many times op was called (including calls that failed).
func (k *Kernel) Calls(op Op) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.calls[op]
}

// Writes returns the number of RuleAdd and RuleDel calls.
func (k *Kernel) Writes() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.calls[OpAdd] + k.calls[OpDel]
}

// ResetCalls sets every call count back to zero.
func (k *Kernel) ResetCalls() {
	k.mu.Lock()
	defer k.mu.Unlock()
	clear(k.calls)
}

// FailNext makes the next n calls of op fail with err, before any hook is
// consulted and without changing anything. Calls queue: FailNext(OpAdd, 1,
// a) then FailNext(OpAdd, 1, b) fails the next add with a and the one
// after with b. n < 1 or a nil err does nothing.
func (k *Kernel) FailNext(op Op, n int, err error) {
	if n < 1 || err == nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for range n {
		k.fails[op] = append(k.fails[op], err)
	}
}

// SetHook installs fn (nil removes it), consulted before every call that
// FailNext did not already fail.
func (k *Kernel) SetHook(fn Hook) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.hook = fn
}
