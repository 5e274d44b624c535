package hostips

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"regexp"
	"slices"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/managerutil"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/netfilter"
)

// DefaultSetName is the set's name, without the set driver's prefix, when
// Options.SetName is empty.
const DefaultSetName = "host-ips"

// InterfaceAddrs is the full set of one interface's addresses, as
// ifacemonitor's OnAddrs reports it: send one from that callback,
//
//	OnAddrs: func(name string, addrs []netip.Prefix) {
//		_ = loop.Send(ctx, hostips.InterfaceAddrs{Name: name, Addrs: addrs})
//	},
//
// Nil Addrs means the interface has no address any more, or is gone.
type InterfaceAddrs struct {
	// Name is the interface's name; required.
	Name string
	// Addrs are its addresses with their prefix lengths, both families;
	// each Manager takes its own family's.
	Addrs []netip.Prefix
}

// Validate reports whether m is well formed: a name and valid addresses,
// none of them unspecified (0.0.0.0, ::).
// The error wraps ErrInvalidMessage.
func (m InterfaceAddrs) Validate() error {
	if m.Name == "" {
		return fmt.Errorf("%w: no interface name", ErrInvalidMessage)
	}
	for _, p := range m.Addrs {
		switch a := p.Addr(); {
		case !p.IsValid() || !ipfamily.Of(a).Valid():
			return fmt.Errorf("%w: interface %s: invalid address %v", ErrInvalidMessage, m.Name, p)
		case a.IsUnspecified():
			return fmt.Errorf("%w: interface %s: the unspecified address %v is no host address", ErrInvalidMessage, m.Name, a)
		}
	}
	return nil
}

// Options configure a Manager. Family and Sets are required.
type Options struct {
	// Family is IPv4 or IPv6: one Manager per family.
	Family ipfamily.Family
	// Sets is the family's ip set driver (an *ipsets.IPSets); the Manager
	// declares its one hash:ip set there.
	Sets netfilter.Sets
	// SetName names the set, without the set driver's prefix; empty means
	// DefaultSetName.
	SetName string
	// Exclude leaves out the addresses of interfaces whose names match any
	// of these regular expressions (unanchored, as ifacemonitor reads
	// them), such as `^kube-ipvs0$` (a service proxy's dummy holding every
	// service IP) or the workload interfaces' pattern. Empty excludes
	// none.
	Exclude []string
	// IncludeLinkLocal keeps link-local addresses (169.254.0.0/16,
	// fe80::/10), which are left out by default: every host has the same
	// ones, so they do not tell this host apart.
	IncludeLinkLocal bool
	// Logger receives debug logs; nil discards them.
	Logger *slog.Logger
	// Name is returned by Name, for the loop's logs; empty means
	// "hostips-v4" or "hostips-v6".
	Name string
}

// Manager keeps an ip set of the host's own addresses, of one IP family,
// equal to what the interface monitor reports. It is a dataplane.Manager:
// register it with the loop together with its Sets driver. Its methods are
// called from the loop's goroutine only.
type Manager struct {
	o       Options
	log     *slog.Logger
	kname   string
	exclude []*regexp.Regexp
	ifaces  map[string][]netip.Addr // interface → its addresses of the family, kept
	dirty   bool
	invalid managerutil.Rejected
}

// New validates opts and returns a Manager whose set is empty until the
// first InterfaceAddrs. It does no I/O.
func New(opts Options) (*Manager, error) {
	c := managerutil.Check{Sentinel: ErrInvalidOptions}
	c.Family(opts.Family)
	c.Driver("Sets", opts.Sets, opts.Family)
	if opts.SetName == "" {
		opts.SetName = DefaultSetName
	}
	kname := c.KernelName("SetName", opts.Sets, opts.SetName)
	if err := c.Err(); err != nil {
		return nil, err
	}
	m := &Manager{o: opts, kname: kname, ifaces: map[string][]netip.Addr{}, dirty: true}
	for _, e := range opts.Exclude {
		re, err := regexp.Compile(e)
		if err != nil {
			return nil, managerutil.Invalid(ErrInvalidOptions, "Exclude %q: %v", e, err)
		}
		m.exclude = append(m.exclude, re)
	}
	m.log = managerutil.Logger(opts.Logger)
	m.o.Name = managerutil.Name(opts.Name, "hostips", opts.Family)
	return m, nil
}

// Name returns the Manager's name for the loop's logs.
func (m *Manager) Name() string { return m.o.Name }

// SetName returns the kernel name of the set, for rules that match it
// (`-m set --match-set <SetName> dst`).
func (m *Manager) SetName() string { return m.kname }

// Addrs returns the addresses the set holds (or will hold once applied),
// sorted.
func (m *Manager) Addrs() []netip.Addr {
	var out []netip.Addr
	for _, addrs := range m.ifaces {
		out = append(out, addrs...)
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}

// OnUpdate records InterfaceAddrs messages; it ignores every other type.
// An invalid message changes nothing: the next CompleteDeferredWork
// reports it once.
func (m *Manager) OnUpdate(msg any) {
	u, ok := msg.(InterfaceAddrs)
	if !ok {
		return
	}
	if err := u.Validate(); err != nil {
		m.invalid.Add(err)
		return
	}
	var keep []netip.Addr
	if !m.excluded(u.Name) {
		for _, p := range u.Addrs {
			a := p.Addr()
			if ipfamily.Of(a) != m.o.Family || (a.IsLinkLocalUnicast() && !m.o.IncludeLinkLocal) {
				continue
			}
			keep = append(keep, a)
		}
		slices.SortFunc(keep, netip.Addr.Compare)
		keep = slices.Compact(keep)
	}
	if managerutil.SetList(m.ifaces, u.Name, keep) {
		m.dirty = true
	}
}

func (m *Manager) excluded(name string) bool {
	for _, re := range m.exclude {
		if re.MatchString(name) {
			return true
		}
	}
	return false
}

// CompleteDeferredWork declares the set with every kept address on the
// Sets driver; it returns at once when nothing changed. It does no I/O.
// Invalid messages received since the last call are reported here, once,
// in an error wrapping ErrInvalidMessage; they changed nothing.
func (m *Manager) CompleteDeferredWork(context.Context) error {
	return m.invalid.Report(m.declare())
}

// declare declares the set when its addresses changed.
func (m *Manager) declare() error {
	if !m.dirty {
		return nil
	}
	addrs := m.Addrs()
	members := make([]netfilter.Member, len(addrs))
	for i, a := range addrs {
		members[i] = netfilter.IPMember(a)
	}
	if err := m.o.Sets.AddOrReplaceSet(netfilter.SetMetadata{Name: m.o.SetName, Type: netfilter.HashIP}, members); err != nil {
		return err
	}
	m.log.Debug("hostips: set declared", "addresses", len(members))
	m.dirty = false
	return nil
}

var _ dataplane.Manager = (*Manager)(nil)
