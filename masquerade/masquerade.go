package masquerade

import (
	"context"
	"log/slog"
	"slices"
	"strings"

	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/managerutil"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/netfilter"
)

// Default names of the two sets, without the ip set driver's prefix.
const (
	DefaultAllPoolsSet  = "all-pools"
	DefaultMasqPoolsSet = "masq-pools"
)

// Options configure a Manager. Family, Sets, Table and Chain are required.
type Options struct {
	// Family is IPv4 or IPv6: one Manager per family.
	Family ipfamily.Family
	// Sets is the family's ip set driver (an *ipsets.IPSets); the Manager
	// declares its two sets there.
	Sets netfilter.Sets
	// Table is the family's nat table (an *iptables.Table of the "nat"
	// table, or any other netfilter.Table writer of source NAT); the
	// Manager declares Chain there and, unless Jump is netfilter.JumpNone,
	// its jump from POSTROUTING, as the rules of owner Chain: managers that
	// share the Table keep each other's jumps.
	Table netfilter.Table
	// Chain is the Manager's chain; it must carry the Table's chain prefix
	// (such as "np-masq" for a Table owning "np-").
	Chain string
	// Jump says where the jump to Chain goes: at the top of POSTROUTING,
	// before every foreign rule (netfilter.JumpInsert, the zero value), at
	// its bottom, after every foreign rule (netfilter.JumpAppend), or
	// nowhere (netfilter.JumpNone: the caller jumps to Chain from a chain
	// of its own, in the order it chooses).
	Jump netfilter.JumpPlacement
	// AllPoolsSet and MasqPoolsSet name the sets of every pool and of the
	// pools that masquerade, without the set driver's prefix. Empty means
	// DefaultAllPoolsSet and DefaultMasqPoolsSet.
	AllPoolsSet, MasqPoolsSet string
	// Marks are packet marks that are masqueraded too, whatever their
	// addresses: a service proxy (package bpf/proxy) marks the connections
	// from other hosts that it sends to a backend on another node, so the
	// reply comes back through this node. Each needs a non-zero Mask that
	// holds its Mark.
	Marks []netfilter.MatchMark
	// NoRandomFully leaves out --random-fully (source ports chosen fully at
	// random, which avoids port collisions between masqueraded flows) for
	// kernels before 3.14 and iptables before 1.6.2, which lack it.
	NoRandomFully bool
	// Logger receives debug logs; nil discards them.
	Logger *slog.Logger
	// Name is returned by Name, for the loop's logs; empty means
	// "masquerade-v4" or "masquerade-v6".
	Name string
}

// Manager keeps the pool sets and the masquerade rule of one IP family.
// It is a dataplane.Manager: register it with the loop together with its
// Sets and Table drivers. Its methods are called from the loop's goroutine
// only.
type Manager struct {
	o               Options
	log             *slog.Logger
	allSet, masqSet string // kernel names
	pools           map[string]cluster.Pool
	dirty           bool // the sets must be declared again
	chainDone       bool // chain and jump declared
	invalid         managerutil.Rejected
}

// New validates opts and returns a Manager with no pools. It does no I/O.
func New(opts Options) (*Manager, error) {
	c := managerutil.Check{Sentinel: ErrInvalidOptions}
	c.Family(opts.Family)
	c.Driver("Sets", opts.Sets, opts.Family)
	c.Required("Table", opts.Table)
	c.Quote("Jump", opts.Jump.Validate())
	c.Chain("Chain", opts.Chain)
	if opts.AllPoolsSet == "" {
		opts.AllPoolsSet = DefaultAllPoolsSet
	}
	if opts.MasqPoolsSet == "" {
		opts.MasqPoolsSet = DefaultMasqPoolsSet
	}
	c.Refuse(opts.AllPoolsSet == opts.MasqPoolsSet, "AllPoolsSet and MasqPoolsSet are both %q", opts.AllPoolsSet)
	opts.Marks = slices.Clone(opts.Marks)
	m := &Manager{o: opts, pools: map[string]cluster.Pool{}, dirty: true}
	c.Rules("Marks", opts.Family, m.markRules()...)
	m.allSet = c.KernelName("AllPoolsSet", opts.Sets, opts.AllPoolsSet)
	m.masqSet = c.KernelName("MasqPoolsSet", opts.Sets, opts.MasqPoolsSet)
	if err := c.Err(); err != nil {
		return nil, err
	}
	m.log = managerutil.Logger(opts.Logger)
	m.o.Name = managerutil.Name(opts.Name, "masquerade", opts.Family)
	return m, nil
}

// Name returns the Manager's name for the loop's logs.
func (m *Manager) Name() string { return m.o.Name }

// AllPoolsSet returns the kernel name of the set of every pool of the
// family, for rules of the caller's own (such as floating IPs that must
// not be translated towards pods).
func (m *Manager) AllPoolsSet() string { return m.allSet }

// MasqPoolsSet returns the kernel name of the set of the pools that
// masquerade.
func (m *Manager) MasqPoolsSet() string { return m.masqSet }

// Rules returns the rules of Chain: Rule, then one per Options.Marks.
func (m *Manager) Rules() []netfilter.Rule {
	return append([]netfilter.Rule{m.Rule()}, m.markRules()...)
}

// markRules are the rules of Options.Marks.
func (m *Manager) markRules() []netfilter.Rule {
	var rules []netfilter.Rule
	for _, mk := range m.o.Marks {
		rules = append(rules, netfilter.Rule{
			Matches:  []netfilter.Match{mk},
			Action:   netfilter.ActionMasquerade{RandomFully: !m.o.NoRandomFully},
			Comments: []string{"masquerade what carries the mark"},
		})
	}
	return rules
}

// Rule returns the first rule of Chain: packets from a masquerading pool to
// anything outside every pool are masqueraded.
func (m *Manager) Rule() netfilter.Rule {
	return netfilter.Rule{
		Matches: []netfilter.Match{
			netfilter.SourceIPSet(m.masqSet),
			netfilter.Not(netfilter.DestIPSet(m.allSet)),
		},
		Action:   netfilter.ActionMasquerade{RandomFully: !m.o.NoRandomFully},
		Comments: []string{"masquerade from pools to outside the pools"},
	}
}

// OnUpdate records cluster.Pool and cluster.PoolRemove messages; it
// ignores every other type. A pool of the other family is not the
// Manager's: a pool whose CIDR moves to the other family is forgotten. An
// invalid message changes nothing: the next CompleteDeferredWork reports it
// once.
func (m *Manager) OnUpdate(msg any) {
	switch msg := msg.(type) {
	case cluster.Pool:
		if err := msg.Validate(); err != nil {
			m.invalid.Add(managerutil.Refused(ErrInvalidPool, err))
			return
		}
		old, had := m.pools[msg.ID]
		if ipfamily.Of(msg.CIDR.Addr()) != m.o.Family {
			if had {
				delete(m.pools, msg.ID)
				m.dirty = true
			}
			return
		}
		if !had || old != msg {
			m.pools[msg.ID] = msg
			m.dirty = true
		}
	case cluster.PoolRemove:
		if err := msg.Validate(); err != nil {
			m.invalid.Add(managerutil.Refused(ErrInvalidPool, err))
			return
		}
		if _, had := m.pools[msg.ID]; had {
			delete(m.pools, msg.ID)
			m.dirty = true
		}
	}
}

// CompleteDeferredWork declares the two sets (every pool, the pools that
// masquerade), the chain with its one rule (Rule) and the jump to it, on the
// drivers; it returns at once when nothing changed. It does no I/O. Invalid
// messages received since the last call are reported here, once, in an
// error wrapping ErrInvalidPool; they changed nothing.
func (m *Manager) CompleteDeferredWork(context.Context) error {
	return m.invalid.Report(m.declare())
}

func (m *Manager) declare() error {
	if m.dirty {
		var all, masq []netfilter.Member
		for _, p := range m.sortedPools() {
			all = append(all, netfilter.NetMembers(p.CIDR)...)
			if p.Masquerade {
				masq = append(masq, netfilter.NetMembers(p.CIDR)...)
			}
		}
		if err := m.o.Sets.AddOrReplaceSet(netfilter.SetMetadata{Name: m.o.AllPoolsSet, Type: netfilter.HashNet}, all); err != nil {
			return err
		}
		if err := m.o.Sets.AddOrReplaceSet(netfilter.SetMetadata{Name: m.o.MasqPoolsSet, Type: netfilter.HashNet}, masq); err != nil {
			return err
		}
		m.log.Debug("masquerade: pools declared", "pools", len(all), "masquerading", len(masq))
		m.dirty = false
	}
	if m.chainDone {
		return nil
	}
	if err := m.o.Table.SetChains(netfilter.Chain{Name: m.o.Chain, Rules: m.Rules()}); err != nil {
		return err
	}
	if err := netfilter.DeclareJumps(m.o.Table, m.o.Jump, m.o.Chain,
		netfilter.HookJump{Hook: netfilter.HookPostrouting, Chain: m.o.Chain}); err != nil {
		return err
	}
	m.chainDone = true
	return nil
}

// Pools returns the declared pools of the Manager's family, by ID.
func (m *Manager) Pools() []cluster.Pool { return m.sortedPools() }

func (m *Manager) sortedPools() []cluster.Pool {
	return managerutil.SortedValues(m.pools, func(a, b cluster.Pool) int { return strings.Compare(a.ID, b.ID) })
}

var _ dataplane.Manager = (*Manager)(nil)
