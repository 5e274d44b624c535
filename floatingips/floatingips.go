package floatingips

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"

	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/managerutil"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/netfilter"
)

// Options configure a Manager. Family, Table, DNATChain and SNATChain are
// required.
type Options struct {
	// Family is IPv4 or IPv6: one Manager per family.
	Family ipfamily.Family
	// Table is the family's nat table (an *iptables.Table of the "nat"
	// table, or another netfilter.Table writer). Table.InsertRules and
	// AppendRules set the jumps as the rules of owner DNATChain: managers
	// that share the Table keep each other's jumps.
	Table netfilter.Table
	// DNATChain and SNATChain are the Manager's two chains; they must
	// carry the Table's chain prefix.
	DNATChain, SNATChain string
	// Jump says where the jumps to the chains go, from PREROUTING and
	// OUTPUT to DNATChain and from POSTROUTING to SNATChain: at the top of
	// those hooks, before every foreign rule (netfilter.JumpInsert, the
	// zero value), at their bottom, after every foreign rule
	// (netfilter.JumpAppend), or nowhere (netfilter.JumpNone: the caller
	// jumps to the chains from chains of its own).
	Jump netfilter.JumpPlacement
	// OutboundSNAT also translates the source of every connection an
	// endpoint opens (not only of those to its own floating IP) to its
	// floating IP: a full 1:1 NAT. Connections to the destinations in
	// NoSNATSet keep the endpoint's address.
	OutboundSNAT bool
	// NoSNATSet, with OutboundSNAT, is the name of a set of destinations
	// that are not translated, typically the set of every pod pool
	// (masquerade.Manager.AllPoolsSet), so that pod-to-pod traffic keeps
	// pod addresses: a kernel ip set for iptables, a set of the same
	// nftables table for a native nftables Table. Empty translates towards
	// every destination.
	NoSNATSet string
	// Logger receives debug logs; nil discards them.
	Logger *slog.Logger
	// Name is returned by Name, for the loop's logs; empty means
	// "floatingips-v4" or "floatingips-v6".
	Name string
}

// Manager keeps the 1:1 NAT rules of the floating IPs of one IP family.
// It is a dataplane.Manager: register it with the loop together with its
// Table. Its methods are called from the loop's goroutine only.
type Manager struct {
	o         Options
	log       *slog.Logger
	endpoints map[string][]cluster.NAT // of the family, sorted
	// addrs are every endpoint's addresses of the family, which no
	// floating IP may be.
	addrs     map[string][]netip.Prefix
	dirty     bool
	jumpsDone bool
	invalid   managerutil.Rejected
}

// New validates opts and returns a Manager with no floating IP. It checks
// the chains and the family against a Table that says them
// (netfilter.CheckTable). It does no I/O.
func New(opts Options) (*Manager, error) {
	c := managerutil.Check{Sentinel: ErrInvalidOptions}
	c.Family(opts.Family)
	c.Required("Table", opts.Table)
	c.Quote("Jump", opts.Jump.Validate())
	c.Refuse(opts.DNATChain == opts.SNATChain, "DNATChain and SNATChain are both %q", opts.DNATChain)
	c.Refuse(opts.NoSNATSet != "" && !opts.OutboundSNAT, "NoSNATSet without OutboundSNAT")
	c.Chain("DNATChain", opts.DNATChain)
	c.Chain("SNATChain", opts.SNATChain)
	if c.Err() == nil {
		c.Quote("Table", netfilter.CheckTable(opts.Table, opts.Family, opts.DNATChain, opts.SNATChain))
	}
	if err := c.Err(); err != nil {
		return nil, err
	}
	if opts.NoSNATSet != "" {
		// The rule model checks set names; a rule with it must validate.
		r := netfilter.Rule{Matches: []netfilter.Match{netfilter.DestIPSet(opts.NoSNATSet)}, Action: netfilter.Accept()}
		if err := r.Validate(opts.Family); err != nil {
			return nil, managerutil.Quote(ErrInvalidOptions, err, "NoSNATSet")
		}
	}
	opts.Name = managerutil.Name(opts.Name, "floatingips", opts.Family)
	return &Manager{o: opts, log: managerutil.Logger(opts.Logger), endpoints: map[string][]cluster.NAT{},
		addrs: map[string][]netip.Prefix{}, dirty: true}, nil
}

// Name returns the Manager's name for the loop's logs.
func (m *Manager) Name() string { return m.o.Name }

// OnUpdate records cluster.Endpoint and cluster.EndpointRemove messages;
// it ignores every other type. An Endpoint's FloatingIPs replace those it
// had (none withdraws them all); the Manager takes those of its family,
// and the endpoint's addresses of its family, which no floating IP may be
// (see NATs). An invalid message changes nothing: the next
// CompleteDeferredWork reports it once.
func (m *Manager) OnUpdate(msg any) {
	switch msg := msg.(type) {
	case cluster.Endpoint:
		if err := msg.Validate(); err != nil {
			m.invalid.Add(managerutil.Refused(ErrInvalidEndpoint, err))
			return
		}
		var mine []cluster.NAT
		for _, n := range msg.FloatingIPs {
			if ipfamily.Of(n.Floating) == m.o.Family {
				mine = append(mine, n)
			}
		}
		slices.SortFunc(mine, compareNAT)
		mine = slices.Compact(mine)
		var addrs []netip.Prefix
		for _, p := range msg.Addrs {
			if ipfamily.Of(p.Addr()) == m.o.Family {
				addrs = append(addrs, p.Masked())
			}
		}
		if managerutil.SetList(m.endpoints, msg.ID, mine) {
			m.dirty = true
		}
		if managerutil.SetList(m.addrs, msg.ID, addrs) && len(m.endpoints) > 0 {
			m.dirty = true
		}
	case cluster.EndpointRemove:
		if err := msg.Validate(); err != nil {
			m.invalid.Add(managerutil.Refused(ErrInvalidEndpoint, err))
			return
		}
		if _, had := m.endpoints[msg.ID]; had {
			delete(m.endpoints, msg.ID)
			m.dirty = true
		}
		if _, had := m.addrs[msg.ID]; had {
			delete(m.addrs, msg.ID)
			m.dirty = m.dirty || len(m.endpoints) > 0
		}
	}
}

func compareNAT(a, b cluster.NAT) int {
	if c := a.Floating.Compare(b.Floating); c != 0 {
		return c
	}
	return a.Internal.Compare(b.Internal)
}

// NATs returns the floating IPs in force, by endpoint ID then floating IP,
// and the conflicts left out (errors wrapping ErrConflict). A floating IP
// or an internal address claimed by two endpoints (or twice by one) goes
// to the first, by ID and then by floating IP. A floating IP that is an
// endpoint's own address (in its Addrs; another endpoint's, or another of
// its own) is never in force: its translation would take that endpoint's
// connections.
func (m *Manager) NATs() (nats []EndpointNAT, conflicts []error) {
	ids := make([]string, 0, len(m.endpoints))
	for id := range m.endpoints {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	floating := map[netip.Addr]string{}
	internal := map[netip.Addr]string{}
	for _, id := range ids {
		for _, n := range m.endpoints[id] {
			if by, taken := m.addressOf(n.Floating); taken {
				conflicts = append(conflicts, fmt.Errorf("%w: floating IP %v of endpoint %q is an address of endpoint %q", ErrConflict, n.Floating, id, by))
				continue
			}
			if by, taken := floating[n.Floating]; taken {
				conflicts = append(conflicts, fmt.Errorf("%w: floating IP %v of endpoint %q is endpoint %q's", ErrConflict, n.Floating, id, by))
				continue
			}
			if by, taken := internal[n.Internal]; taken {
				conflicts = append(conflicts, fmt.Errorf("%w: internal address %v of endpoint %q already has a floating IP (endpoint %q)", ErrConflict, n.Internal, id, by))
				continue
			}
			floating[n.Floating], internal[n.Internal] = id, id
			nats = append(nats, EndpointNAT{ID: id, NAT: n})
		}
	}
	return nats, conflicts
}

// addressOf returns the endpoint (the first by ID) one of whose addresses
// holds a, and whether there is one.
func (m *Manager) addressOf(a netip.Addr) (string, bool) {
	by, found := "", false
	for id, ps := range m.addrs {
		if (!found || id < by) && slices.ContainsFunc(ps, func(p netip.Prefix) bool { return p.Contains(a) }) {
			by, found = id, true
		}
	}
	return by, found
}

// EndpointNAT is one floating IP in force and its endpoint.
type EndpointNAT struct {
	// ID is the endpoint's.
	ID string
	// NAT is the translation.
	NAT cluster.NAT
}

// Chains returns the two chains the Manager declares for the floating IPs
// in force (see NATs):
//
//   - DNATChain, jumped to from PREROUTING and OUTPUT: to Floating, DNAT to
//     Internal, so the world and the host itself reach the endpoint;
//   - SNATChain, jumped to from POSTROUTING: from Internal to Internal,
//     SNAT to Floating (an endpoint reaching itself through its floating
//     IP, which it would otherwise see come from its own address and
//     drop); and with OutboundSNAT, from Internal (to anything outside
//     NoSNATSet), SNAT to Floating.
//
// Replies need no rule: connection tracking translates them back, so a
// reply to a connection made to the floating IP leaves from the floating
// IP.
func (m *Manager) Chains() (dnat, snat netfilter.Chain) {
	nats, _ := m.NATs()
	dnat.Name, snat.Name = m.o.DNATChain, m.o.SNATChain
	host := func(a netip.Addr) netip.Prefix { return netip.PrefixFrom(a, a.BitLen()) }
	for _, en := range nats {
		n, comment := en.NAT, []string{"floating IP of " + en.ID}
		dnat.Rules = append(dnat.Rules, netfilter.Rule{
			Matches:  []netfilter.Match{netfilter.DestNet(host(n.Floating))},
			Action:   netfilter.DNAT(netip.AddrPortFrom(n.Internal, 0)),
			Comments: comment,
		})
		snat.Rules = append(snat.Rules, netfilter.Rule{
			Matches:  []netfilter.Match{netfilter.SourceNet(host(n.Internal)), netfilter.DestNet(host(n.Internal))},
			Action:   netfilter.SNAT(n.Floating),
			Comments: comment,
		})
		if m.o.OutboundSNAT {
			out := netfilter.Rule{
				Matches:  []netfilter.Match{netfilter.SourceNet(host(n.Internal))},
				Action:   netfilter.SNAT(n.Floating),
				Comments: comment,
			}
			if m.o.NoSNATSet != "" {
				out.Matches = append(out.Matches, netfilter.Not(netfilter.DestIPSet(m.o.NoSNATSet)))
			}
			snat.Rules = append(snat.Rules, out)
		}
	}
	return dnat, snat
}

// CompleteDeferredWork declares the two chains (Chains) and the jumps to
// them on the Table; it returns at once when nothing changed. It does no
// I/O. Invalid messages received since the last call are reported here,
// once, in an error wrapping ErrInvalidEndpoint, and so are, after each
// change, the conflicts that stand (ErrConflict): the conflicting NATs are
// left out, the rest is declared.
func (m *Manager) CompleteDeferredWork(context.Context) error {
	conflicts, err := m.declare()
	return m.invalid.Report(append(conflicts, err)...)
}

// declare declares the chains when they changed, and the jumps to them
// once; it returns the conflicts that stand after a change.
func (m *Manager) declare() ([]error, error) {
	var conflicts []error
	if m.dirty {
		_, standing := m.NATs()
		dnat, snat := m.Chains()
		if err := m.o.Table.SetChains(dnat, snat); err != nil {
			return nil, err
		}
		m.log.Debug("floatingips: chains declared", "dnat", len(dnat.Rules), "snat", len(snat.Rules))
		m.dirty = false
		conflicts = standing
	}
	if !m.jumpsDone {
		if err := netfilter.DeclareJumps(m.o.Table, m.o.Jump, m.o.DNATChain,
			netfilter.HookJump{Hook: netfilter.HookPrerouting, Chain: m.o.DNATChain},
			netfilter.HookJump{Hook: netfilter.HookOutput, Chain: m.o.DNATChain},
			netfilter.HookJump{Hook: netfilter.HookPostrouting, Chain: m.o.SNATChain},
		); err != nil {
			return conflicts, err
		}
		m.jumpsDone = true
	}
	return conflicts, nil
}

var _ dataplane.Manager = (*Manager)(nil)
