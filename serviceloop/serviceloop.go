package serviceloop

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/errs"
	"github.com/nodeplane/nodeplane/internal/managerutil"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/netfilter"
)

// ServiceCIDRs is the full set of service ranges of the cluster: the
// cluster IP range, and any external or load-balancer ranges that the node
// only ever reaches through a service proxy. Each message replaces the one
// before; a manager takes the prefixes of its own family.
type ServiceCIDRs struct {
	// CIDRs are the ranges, networks of either family (10.96.0.0/12, not
	// 10.96.0.1/12).
	CIDRs []netip.Prefix
}

// Validate reports whether every prefix is a valid network, and a range
// a service proxy can serve: not /0 (every address) and not an IPv4
// range written as IPv6 (::ffff:a.b.c.d). The error wraps ErrInvalidCIDR
// and names the first bad prefix.
func (s ServiceCIDRs) Validate() error {
	for _, p := range s.CIDRs {
		f := ipfamily.Of(p.Addr())
		if !p.IsValid() || !f.Valid() {
			return fmt.Errorf("%w: %v is not a valid prefix", ErrInvalidCIDR, p)
		}
		if err := f.CheckNet(p); err != nil {
			return errs.Also(fmt.Errorf("%w: %s has host bits set (the network is %s)", ErrInvalidCIDR, p, p.Masked()), err)
		}
		if p.Bits() == 0 || p.Addr().Is4In6() {
			// Every address, or IPv4 spelled as IPv6: no range a proxy
			// serves, and dropping it would drop every forwarded packet.
			return fmt.Errorf("%w: %s is no service range", ErrInvalidCIDR, p)
		}
	}
	return nil
}

// Verdict is what happens to a looped packet.
type Verdict uint8

const (
	// Drop drops it silently. The zero value.
	Drop Verdict = iota
	// Reject drops it and answers the sender with ICMP administratively
	// prohibited, so a client fails at once instead of timing out.
	Reject
)

// Options configure a Manager. Family, Table and Chain are required.
type Options struct {
	// Family is IPv4 or IPv6: one Manager per family.
	Family ipfamily.Family
	// Table is the family's filter table (an *iptables.Table of the
	// "filter" table, or another netfilter.Table writer); the Manager
	// declares Chain there and, unless Jump is netfilter.JumpNone, its
	// jump from FORWARD, as the rules of owner Chain: managers that share
	// the Table keep each other's jumps.
	Table netfilter.Table
	// Chain is the Manager's chain; it must carry the Table's chain prefix.
	Chain string
	// Jump says where the jump to Chain goes: at the top of FORWARD,
	// before every foreign rule (netfilter.JumpInsert, the zero value), at
	// its bottom, after every foreign rule (netfilter.JumpAppend), or
	// nowhere (netfilter.JumpNone: the caller jumps to Chain from a chain
	// of its own).
	Jump netfilter.JumpPlacement
	// Verdict is what happens to a packet to a service range in the
	// forward path; the zero value is Drop.
	Verdict Verdict
	// RejectMarks are the marks of a service proxy that passes on, with
	// the mark, the packets of new connections to a service without a
	// ready backend (bpf/proxy's Options.RejectMark): the chain answers
	// them first, as kube-proxy does — TCP with a reset, others with ICMP
	// (ICMPv6) port unreachable — whatever their destination.
	RejectMarks []netfilter.MatchMark
	// Logger receives debug logs; nil discards them.
	Logger *slog.Logger
	// Name is returned by Name, for the loop's logs; empty means
	// "serviceloop-v4" or "serviceloop-v6".
	Name string
}

// Manager keeps the rules that stop service traffic looping, for one IP
// family. It is a dataplane.Manager: register it with the loop together
// with its Table. Its methods are called from the loop's goroutine only.
type Manager struct {
	o        Options
	log      *slog.Logger
	cidrs    []netip.Prefix // of the family, sorted, unique
	dirty    bool
	jumpDone bool
	invalid  managerutil.Rejected
}

// New validates opts and returns a Manager with no service range: its
// chain is empty until the first ServiceCIDRs. It checks the chain and
// the family against a Table that says them (netfilter.CheckTable). It
// does no I/O.
func New(opts Options) (*Manager, error) {
	c := managerutil.Check{Sentinel: ErrInvalidOptions}
	c.Family(opts.Family)
	c.Required("Table", opts.Table)
	c.Quote("Jump", opts.Jump.Validate())
	c.Refuse(opts.Verdict > Reject, "unknown Verdict %d", opts.Verdict)
	for _, mk := range opts.RejectMarks {
		c.Refuse(mk.Mark == 0 || mk.Mark&^mk.Mask != 0 || mk.Negate, "reject mark %#x/%#x must be non-zero, within its mask, not negated", mk.Mark, mk.Mask)
	}
	c.Chain("Chain", opts.Chain)
	if c.Err() == nil {
		c.Quote("Table", netfilter.CheckTable(opts.Table, opts.Family, opts.Chain))
	}
	if err := c.Err(); err != nil {
		return nil, err
	}
	opts.Name = managerutil.Name(opts.Name, "serviceloop", opts.Family)
	return &Manager{o: opts, log: managerutil.Logger(opts.Logger), dirty: true}, nil
}

// Name returns the Manager's name for the loop's logs.
func (m *Manager) Name() string { return m.o.Name }

// CIDRs returns the service ranges of the Manager's family, sorted.
func (m *Manager) CIDRs() []netip.Prefix { return slices.Clone(m.cidrs) }

// Rules returns the rules of Chain: two per reject mark (TCP reset, then
// ICMP port unreachable), then one per service range, matching packets to
// it, with the Verdict.
func (m *Manager) Rules() []netfilter.Rule {
	var action netfilter.Action = netfilter.Drop()
	if m.o.Verdict == Reject {
		action = netfilter.Reject(netfilter.RejectAdminProhibited)
	}
	rules := make([]netfilter.Rule, 0, 2*len(m.o.RejectMarks)+len(m.cidrs))
	why := []string{"service without a ready backend"}
	for _, mk := range m.o.RejectMarks {
		rules = append(rules,
			netfilter.Rule{Matches: []netfilter.Match{mk, netfilter.Protocol(netfilter.ProtoTCP)}, Action: netfilter.Reject(netfilter.RejectTCPReset), Comments: why},
			netfilter.Rule{Matches: []netfilter.Match{mk}, Action: netfilter.Reject(netfilter.RejectPortUnreachable), Comments: why})
	}
	for _, p := range m.cidrs {
		rules = append(rules, netfilter.Rule{
			Matches:  []netfilter.Match{netfilter.DestNet(p)},
			Action:   action,
			Comments: []string{"service range reached the forward path unhandled"},
		})
	}
	return rules
}

// OnUpdate records ServiceCIDRs messages; it ignores every other type. An
// invalid message changes nothing: the next CompleteDeferredWork reports
// it once.
func (m *Manager) OnUpdate(msg any) {
	s, ok := msg.(ServiceCIDRs)
	if !ok {
		return
	}
	if err := s.Validate(); err != nil {
		m.invalid.Add(err)
		return
	}
	var mine []netip.Prefix
	for _, p := range s.CIDRs {
		if ipfamily.Of(p.Addr()) == m.o.Family {
			mine = append(mine, p)
		}
	}
	slices.SortFunc(mine, netip.Prefix.Compare)
	mine = slices.Compact(mine)
	if !slices.Equal(mine, m.cidrs) {
		m.cidrs, m.dirty = mine, true
	}
}

// CompleteDeferredWork declares the chain (Rules) and the jump to it from
// FORWARD on the Table; it returns at once when nothing changed. It does no
// I/O. Invalid messages received since the last call are reported here,
// once, in an error wrapping ErrInvalidCIDR; they changed nothing.
func (m *Manager) CompleteDeferredWork(context.Context) error {
	return m.invalid.Report(m.declare())
}

// declare declares the chain when the ranges changed, and the jump to it
// once.
func (m *Manager) declare() error {
	if m.dirty {
		if err := m.o.Table.SetChains(netfilter.Chain{Name: m.o.Chain, Rules: m.Rules()}); err != nil {
			return err
		}
		m.log.Debug("serviceloop: chain declared", "ranges", len(m.cidrs))
		m.dirty = false
	}
	if !m.jumpDone {
		if err := netfilter.DeclareJumps(m.o.Table, m.o.Jump, m.o.Chain,
			netfilter.HookJump{Hook: netfilter.HookForward, Chain: m.o.Chain}); err != nil {
			return err
		}
		m.jumpDone = true
	}
	return nil
}

var _ dataplane.Manager = (*Manager)(nil)
