package kernelfake

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"

	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake/ipsetsfake"
	"github.com/nodeplane/nodeplane/kernel/kernelfake/iptablesfake"
	"github.com/nodeplane/nodeplane/kernel/kernelfake/nftablesfake"
)

// Options configure a Namespace. The zero value models a fresh namespace
// on this project's machines, with lo up.
type Options struct {
	// Name names the namespace in String, Dump and errors; empty gives
	// "fake<N>".
	Name string
	// Kinds are the link kinds AddLink creates. Any other kind that
	// kernel.Link.Validate accepts fails with an error wrapping
	// kernel.ErrNotSupported, as the kernel answers "Unknown device type"
	// for a missing module. Nil means DefaultKinds.
	Kinds []string
}

// DefaultKinds returns the link kinds this project's machines support
// (see KERNEL.md): bridge, veth, vxlan and tun, but not ipip or wireguard,
// whose modules are missing.
func DefaultKinds() []string {
	return []string{kernel.KindBridge, kernel.KindVeth, kernel.KindVXLAN, kernel.KindTUN}
}

// host is what the namespaces created from one another share, as the
// namespaces of one machine: one lock for all of them (a veth pair may
// span two) and the table of their fake descriptors.
type host struct {
	mu     sync.Mutex
	lastNS int
	byFD   map[int]*state
}

// firstFD is the first fake namespace descriptor; high, so that it is not
// mistaken for a real descriptor of the test process.
const firstFD = 1 << 20

// state is one namespace's kernel state, guarded by h.mu.
type state struct {
	h    *host
	id   int
	name string
	fd   int

	kinds     map[string]bool
	links     map[int]*link
	lastIndex int
	macSeq    int
	routes    map[kernel.Family][]*kernel.Route
	byDst     map[dstKey][]*kernel.Route // the same routes, by destination
	rules     map[kernel.Family][]kernel.Rule
	neighs    []kernel.Neighbor
	fdb       []kernel.FDBEntry
	sysctls   map[string]string
	flows     []Flow
	subs      map[*subscription]struct{}

	calls  map[Op]int
	fails  map[Op][]error
	always map[Op]error
	refuse func(op Op, obj any) error

	iptables *iptablesfake.Kernel
	ipsets   *ipsetsfake.Kernel
	nft      *nftablesfake.Namespace
}

// Namespace is an in-memory network namespace that implements
// kernel.Kernel with the kernel's semantics (see the package
// documentation). Create it with New; it is safe for concurrent use.
//
// A Namespace and the views Admin returns share one state: the views
// differ only in whether calls are counted and can fail.
type Namespace struct {
	s     *state
	admin bool
}

var (
	_ kernel.Kernel   = (*Namespace)(nil)
	_ kernel.NFTables = (*Namespace)(nil)
)

// New returns a namespace as `ip netns add` and `ip link set lo up` leave
// it: lo (index 1, up, running, MTU 65536) with 127.0.0.1/8 and ::1/128
// and their routes, the default rules of both families, the sysctls of a
// fresh namespace, empty iptables and ipset fakes behind Runner, and an
// empty nf_tables behind OpenNFTablesSocket.
func New(opts Options) *Namespace {
	return newState(&host{byFD: map[int]*state{}}, opts)
}

// NewNamespace returns another fresh namespace on the same fake machine:
// a veth created in ns can have its peer there (kernel.Veth's
// PeerNamespaceFD set to the new namespace's FD), as with a real
// namespace descriptor.
func (ns *Namespace) NewNamespace(opts Options) *Namespace {
	return newState(ns.s.h, opts)
}

func newState(h *host, opts Options) *Namespace {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lastNS++
	s := &state{
		h:        h,
		id:       h.lastNS,
		name:     opts.Name,
		fd:       firstFD + h.lastNS,
		kinds:    map[string]bool{},
		links:    map[int]*link{},
		routes:   map[kernel.Family][]*kernel.Route{},
		byDst:    map[dstKey][]*kernel.Route{},
		rules:    defaultRules(),
		sysctls:  defaultSysctls(),
		subs:     map[*subscription]struct{}{},
		calls:    map[Op]int{},
		fails:    map[Op][]error{},
		always:   map[Op]error{},
		iptables: iptablesfake.New(),
		ipsets:   ipsetsfake.New(),
		nft:      nftablesfake.New(),
	}
	s.iptables.UseSets(s.ipsets.Family) // a rule matches the namespace's sets
	if s.name == "" {
		s.name = fmt.Sprintf("fake%d", s.id)
	}
	kinds := opts.Kinds
	if kinds == nil {
		kinds = DefaultKinds()
	}
	for _, k := range kinds {
		s.kinds[k] = true
	}
	h.byFD[s.fd] = s
	s.addLoopback()
	return &Namespace{s: s}
}

// addLoopback creates lo and brings it up with its addresses, as a fresh
// namespace does once lo is set up.
func (s *state) addLoopback() {
	lo := s.newLink(kernel.Link{Name: "lo", Kind: kernel.KindDevice, MTU: 65536})
	s.setAdmin(lo, true)
	s.addAddr(lo, netip.MustParsePrefix("127.0.0.1/8"))
	s.addAddr(lo, netip.MustParsePrefix("::1/128"))
}

// Admin returns a view of the same namespace whose calls are neither
// counted nor failed nor refused: it changes the kernel as an
// administrator or another agent would, behind the back of the code under
// test. Events are sent for its changes as for any other.
func (ns *Namespace) Admin() *Namespace { return &Namespace{s: ns.s, admin: true} }

// FD returns the namespace's fake descriptor: pass it as
// kernel.Veth.PeerNamespaceFD to create a veth peer here from another
// namespace of the same machine (see NewNamespace).
func (ns *Namespace) FD() int { return ns.s.fd }

// IPTables returns the iptables fake that Runner runs the iptables and
// ip6tables binaries on.
func (ns *Namespace) IPTables() *iptablesfake.Kernel { return ns.s.iptables }

// IPSets returns the ipset fake that Runner runs the ipset binary on.
func (ns *Namespace) IPSets() *ipsetsfake.Kernel { return ns.s.ipsets }

// NFTables returns the namespace's nf_tables fake, which
// OpenNFTablesSocket serves.
func (ns *Namespace) NFTables() *nftablesfake.Namespace { return ns.s.nft }

// OpenNFTablesSocket returns a socket to the namespace's nf_tables fake
// (the kernel.NFTables capability): package nftables programs it as it
// programs a real namespace.
func (ns *Namespace) OpenNFTablesSocket() (kernel.NFTablesSocket, error) {
	return ns.s.nft.OpenNFTablesSocket()
}

// String returns the namespace's name.
func (ns *Namespace) String() string { return "kernelfake " + ns.s.name }

// lock locks the machine's state and returns its unlock function.
func (ns *Namespace) lock() func() {
	ns.s.h.mu.Lock()
	return ns.s.h.mu.Unlock
}

// begin checks ctx, locks the state and counts a call of op, returning
// the error the call must fail with (ctx's, or an injected one). The
// caller must call the returned unlock function in every case.
func (ns *Namespace) begin(ctx context.Context, op Op) (unlock func(), err error) {
	if ctx == nil {
		ctx = context.Background()
	}
	unlock = ns.lock()
	if err := ns.enter(op); err != nil {
		return unlock, err
	}
	return unlock, ctx.Err()
}

// applyEach performs a batched write as kernel.Namespace does, under the
// lock: each of ops counts as a call of op (an injected error fails it)
// and checks ctx, then apply performs it. An operation fails alone, with a
// *kernel.OpError whose Op and Object describe gives.
func applyEach[T any](ns *Namespace, ctx context.Context, op Op, ops []T, apply func(*T) error, describe func(*T) (op, object string)) []error {
	if ctx == nil {
		ctx = context.Background()
	}
	defer ns.lock()()
	errs := make([]error, len(ops))
	for i := range ops {
		err := ns.enter(op)
		if err == nil {
			err = ctx.Err()
		}
		if err == nil {
			err = apply(&ops[i])
		}
		if err != nil {
			name, obj := describe(&ops[i])
			errs[i] = &kernel.OpError{Op: name, Object: obj, Err: classify(err)}
		}
	}
	return errs
}

// Flow is one conntrack entry: the original direction's addresses and,
// when set, the reply direction's (unset means the reverse of the
// original, an entry without NAT).
type Flow struct {
	// Family is the entry's family.
	Family kernel.Family
	// Src and Dst are the original direction's source and destination.
	Src, Dst netip.Addr
	// ReplySrc and ReplyDst are the reply direction's, for a NATed flow.
	ReplySrc, ReplyDst netip.Addr
}

// AddFlow adds a conntrack entry, as traffic would; DeleteConntrack
// deletes it.
func (ns *Namespace) AddFlow(f Flow) {
	defer ns.lock()()
	ns.s.flows = append(ns.s.flows, f)
}

// Flows returns the conntrack entries.
func (ns *Namespace) Flows() []Flow {
	defer ns.lock()()
	return slices.Clone(ns.s.flows)
}

// DeleteConntrack implements kernel.Conntrack: it deletes every entry of
// family in which one of addrs is the source or destination of either
// direction.
func (ns *Namespace) DeleteConntrack(ctx context.Context, family kernel.Family, addrs []netip.Addr) (int, error) {
	unlock, err := ns.begin(ctx, OpDeleteConntrack)
	defer unlock()
	if err != nil {
		return 0, err
	}
	if !family.Valid() {
		return 0, invalidf("conntrack: %v is neither IPv4 nor IPv6", family)
	}
	if err := ns.refused(OpDeleteConntrack, addrs); err != nil {
		return 0, err
	}
	n := 0
	ns.s.flows = slices.DeleteFunc(ns.s.flows, func(f Flow) bool {
		hit := f.Family == family && slices.ContainsFunc(addrs, func(a netip.Addr) bool {
			return a == f.Src || a == f.Dst || a == f.ReplySrc || a == f.ReplyDst
		})
		if hit {
			n++
		}
		return hit
	})
	return n, nil
}
