package ipsets

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/command"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/nfcore"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/netfilter"
)

// Defaults of Options.
const (
	// DefaultMaxDestroysPerApply is the default number of sets
	// ApplyDeletions destroys per call: a destroy waits for an RCU grace
	// period in the kernel, which can take tens of milliseconds on a busy
	// node, and destroys are serialised.
	DefaultMaxDestroysPerApply = 1
	// DefaultResyncBudget is the default time an Apply spends re-reading
	// sets queued by a periodic resync.
	DefaultResyncBudget = 100 * time.Millisecond
	// DefaultRetryInterval is the default delay the driver asks the loop
	// to wait before calling it again while work remains.
	DefaultRetryInterval = 100 * time.Millisecond
	// MaxPrefixLength is the longest name prefix the driver accepts, so
	// that its temporary sets (prefix + "~" + number) fit the kernel's
	// name length.
	MaxPrefixLength = netfilter.MaxNameLength - 5
)

// Options configures an IPSets. Family and Prefix are required; every
// other zero field takes the default its comment names.
type Options struct {
	// Family is the address family of every set of the driver; required.
	Family Family
	// Prefix is prepended to every set name to form the kernel name, and
	// marks the sets the driver owns: it touches only sets whose names
	// start with it (and destroys those it does not want). Required, at
	// most MaxPrefixLength bytes of ASCII letters, digits and "_.:-". The
	// prefixes of two drivers in one network namespace must not be
	// prefixes of each other (use "np4-" and "np6-", not "np" and "np6").
	Prefix string
	// Kernel is the network namespace whose sets the IPSets manages: its
	// Runner runs the ipset binary there. A *kernel.Namespace
	// (kernel.Open, kernel.OpenCurrent) or, in tests, a
	// kernelfake.Namespace, whose Runner serves the binary from an
	// in-memory kernel. Nil means the process's network namespace: the
	// binary runs as command.Local runs it.
	Kernel kernel.Commands
	// Logger receives debug and warning messages; nil discards them.
	Logger *slog.Logger
	// Clock measures the resync budget; nil means clock.Real().
	Clock clock.Clock
	// MaxDestroysPerApply bounds the sets one ApplyDeletions destroys;
	// zero means DefaultMaxDestroysPerApply. The rest wait for the next
	// call, which the driver asks for with ApplyResult.RetryAfter.
	MaxDestroysPerApply int
	// ResyncBudget bounds the time one Apply spends re-reading the
	// members of sets queued by a periodic resync (QueueResync); at least
	// one set is read per Apply. Zero means DefaultResyncBudget.
	ResyncBudget time.Duration
	// RetryInterval is the ApplyResult.RetryAfter the driver returns while
	// work remains (sets still to re-read or to destroy), and the first
	// wait of a set that failed on its own, doubled at each failure in a
	// row up to MaxSetBackoff. Zero means DefaultRetryInterval.
	RetryInterval time.Duration
	// OnMemberChange, when set, is called for every membership change
	// written to the kernel, after the write succeeded, from the goroutine
	// that called Apply or ApplyDeletions. It must not call the IPSets.
	OnMemberChange func(netfilter.MemberChange)
}

// IPSets is the ipset backend of Sets for one address family: it holds the
// desired sets and, as a dataplane.Driver of PhaseIPSetsUpdate and a
// dataplane.DeletionApplier, converges the kernel to them through the
// ipset binary. It is safe for concurrent use; calls wait while an Apply
// runs.
type IPSets struct {
	family      Family
	prefix      string
	runner      command.Runner
	log         *slog.Logger
	clk         clock.Clock
	maxDestroys int
	budget      time.Duration
	retry       time.Duration
	onChange    func(netfilter.MemberChange)

	mu sync.Mutex
	// sets holds every desired set and every owned set known to be in the
	// kernel, by kernel name.
	sets map[string]*ipset
	// fullResync asks the next Apply to re-read every owned set: at start
	// and after a failure.
	fullResync bool
	// namesResync asks the next Apply to list the kernel's set names and
	// queue every owned set for a recheck of its members.
	namesResync bool
	// recheck is the queue of kernel names whose members are to be
	// re-read, a budget's worth per Apply.
	recheck []string
	queued  map[string]struct{}
	// tries counts destroy attempts (see ipset.tried).
	tries uint64
	// ledger holds the sets that failed on their own (to be read, written
	// or destroyed), by kernel name, with their backoff.
	ledger *dataplane.Ledger[string]
	// writes counts the objects (sets and members) written and destroyed.
	writes uint64
}

// ipset is one set, as desired and as last seen in the kernel.
type ipset struct {
	kname  string
	name   string                // kname without the prefix
	meta   netfilter.SetMetadata // desired, when wanted
	wanted bool
	// kernel is the set's header as last read or written; nil when the set
	// is not in the kernel.
	kernel *header
	// members tracks the desired members against the kernel's.
	members memberSet
	// foreign holds kernel members the driver cannot represent (for
	// example an ICMP entry added by hand); they are deleted.
	foreign []string
	// tried orders the attempts to destroy an unwanted set, so that sets
	// that failed take turns with the others.
	tried uint64
	// unread is set while ipset cannot read the set: it is neither
	// written nor destroyed until it is read.
	unread bool
}

// New returns an IPSets for opts. It does no I/O: the first Apply reads the
// kernel's sets.
func New(opts Options) (*IPSets, error) {
	if !opts.Family.Valid() {
		return nil, fmt.Errorf("%w: Family %v must be IPv4 or IPv6", ErrInvalidOptions, opts.Family)
	}
	if !netfilter.ValidSetName(opts.Prefix) || len(opts.Prefix) > MaxPrefixLength {
		return nil, fmt.Errorf("%w: Prefix %q must be 1-%d bytes of ASCII letters, digits and \"_.:-\"", ErrInvalidOptions, opts.Prefix, MaxPrefixLength)
	}
	if opts.MaxDestroysPerApply < 0 || opts.ResyncBudget < 0 || opts.RetryInterval < 0 {
		return nil, fmt.Errorf("%w: MaxDestroysPerApply, ResyncBudget and RetryInterval must not be negative", ErrInvalidOptions)
	}
	s := &IPSets{
		family:      opts.Family,
		prefix:      opts.Prefix,
		runner:      runnerOf(opts.Kernel),
		log:         opts.Logger,
		clk:         clock.OrReal(opts.Clock),
		maxDestroys: opts.MaxDestroysPerApply,
		budget:      opts.ResyncBudget,
		retry:       opts.RetryInterval,
		onChange:    opts.OnMemberChange,
		sets:        map[string]*ipset{},
		fullResync:  true,
		queued:      map[string]struct{}{},
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.maxDestroys == 0 {
		s.maxDestroys = DefaultMaxDestroysPerApply
	}
	if s.budget == 0 {
		s.budget = DefaultResyncBudget
	}
	if s.retry == 0 {
		s.retry = DefaultRetryInterval
	}
	s.ledger = dataplane.NewLedger[string](dataplane.Backoff{Initial: s.retry, Max: MaxSetBackoff}, s.clk)
	return s, nil
}

// runnerOf returns the runner of k, or command.Local for nil.
func runnerOf(k kernel.Commands) command.Runner {
	if k == nil {
		return command.Local{}
	}
	return k.Runner()
}

// Name returns "ipsets-" and the prefix, for the loop's logs.
func (s *IPSets) Name() string { return "ipsets-" + s.prefix }

// Phase returns dataplane.PhaseIPSetsUpdate: sets are created and filled
// before the rule writers run; ApplyDeletions runs after them.
func (s *IPSets) Phase() dataplane.Phase { return dataplane.PhaseIPSetsUpdate }

// Family returns the driver's address family.
func (s *IPSets) Family() Family { return s.family }

// Prefix returns the driver's name prefix.
func (s *IPSets) Prefix() string { return s.prefix }

// KernelName returns prefix + name, the name to use in rules (for
// example `-m set --match-set <KernelName> src`).
func (s *IPSets) KernelName(name string) (string, error) {
	if err := s.checkName(name); err != nil {
		return "", err
	}
	return s.prefix + name, nil
}

// QueueResync makes the next Apply list the kernel's sets, repair missing
// and leftover sets at once, and re-read the members of every owned set,
// a ResyncBudget's worth per Apply. The loop calls it periodically and
// after a failure; after its own failures the driver re-reads everything
// anyway.
func (s *IPSets) QueueResync() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.namesResync = true
}

// checkMembers validates members against meta. The error keeps the
// model's text and sentinels under the package's prefix, and says which
// member of which set it is about.
func checkMembers(meta *netfilter.SetMetadata, members []netfilter.Member) error {
	for i, m := range members {
		if err := meta.CheckMember(m); err != nil {
			return nfcore.Quote("ipsets", err, fmt.Sprintf(" (set %q, member %d)", meta.Name, i))
		}
	}
	return nil
}

// setErr returns err, an error of package netfilter's set model, under the
// package's prefix.
func setErr(err error) error { return nfcore.Quote("ipsets", err, "") }

// checkName validates an unprefixed set name for the driver's prefix.
func (s *IPSets) checkName(name string) error {
	return setErr(netfilter.ValidateSetName(name, s.prefix))
}

// AddOrReplaceSet makes meta.Name a desired set holding exactly members
// (duplicates are ignored). A change of MaxSize or Range of a set in the
// kernel swaps a new, filled set in; a change of Type needs the set to be
// unreferenced (see netfilter.ErrSetInUse). A set that failed is tried again at the
// next Apply when this changes its declaration.
func (s *IPSets) AddOrReplaceSet(meta netfilter.SetMetadata, members []netfilter.Member) error {
	meta, err := meta.Normalize(s.family, s.prefix)
	if err != nil {
		return setErr(err)
	}
	if err := checkMembers(&meta, members); err != nil {
		return err
	}
	if len(members) > meta.MaxSize && meta.Type != netfilter.BitmapPort {
		if n := countUnique(members); n > meta.MaxSize {
			return setErr(fmt.Errorf("%w: set %q has %d members, MaxSize is %d", netfilter.ErrTooManyMembers, meta.Name, n, meta.MaxSize))
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	set := s.entry(s.prefix + meta.Name)
	changed := set.members.replaceDesired(members)
	if changed || set.meta != meta || !set.wanted {
		s.ledger.Forget(set.kname) // a new declaration is tried at once
	}
	set.meta, set.wanted = meta, true
	return nil
}

func countUnique(members []netfilter.Member) int {
	seen := make(map[netfilter.Member]struct{}, len(members))
	for _, m := range members {
		seen[m] = struct{}{}
	}
	return len(seen)
}

// wantedSet returns the desired set called name, or an error.
func (s *IPSets) wantedSet(name string) (*ipset, error) {
	if err := s.checkName(name); err != nil {
		return nil, err
	}
	set := s.sets[s.prefix+name]
	if set == nil || !set.wanted {
		return nil, setErr(fmt.Errorf("%w: %q", netfilter.ErrUnknownSet, name))
	}
	return set, nil
}

// AddMembers adds members to the desired set name.
func (s *IPSets) AddMembers(name string, members []netfilter.Member) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	set, err := s.wantedSet(name)
	if err != nil {
		return err
	}
	if err := checkMembers(&set.meta, members); err != nil {
		return err
	}
	d := &set.members
	if set.meta.Type != netfilter.BitmapPort {
		var added map[netfilter.Member]struct{}
		for _, m := range members {
			if !d.desiredHas(m) {
				if added == nil {
					added = map[netfilter.Member]struct{}{}
				}
				added[m] = struct{}{}
			}
		}
		if n := d.desiredLen() + len(added); n > set.meta.MaxSize {
			return setErr(fmt.Errorf("%w: set %q would have %d members, MaxSize is %d", netfilter.ErrTooManyMembers, name, n, set.meta.MaxSize))
		}
	}
	for _, m := range members {
		if d.want(m) {
			s.ledger.Forget(set.kname)
		}
	}
	return nil
}

// RemoveMembers removes members from the desired set name. Members not in
// the set are ignored, but every member must be valid for the set.
func (s *IPSets) RemoveMembers(name string, members []netfilter.Member) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	set, err := s.wantedSet(name)
	if err != nil {
		return err
	}
	if err := checkMembers(&set.meta, members); err != nil {
		return err
	}
	for _, m := range members {
		if set.members.unwant(m) {
			s.ledger.Forget(set.kname)
		}
	}
	return nil
}

// RemoveSet makes name no longer desired. ApplyDeletions destroys it once
// no rule refers to it.
func (s *IPSets) RemoveSet(name string) error {
	if err := s.checkName(name); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	set := s.sets[s.prefix+name]
	if set == nil || !set.wanted {
		return nil
	}
	set.wanted = false
	s.ledger.Forget(set.kname)
	set.meta = netfilter.SetMetadata{}
	set.members.clearDesired()
	if set.kernel == nil {
		delete(s.sets, set.kname)
	}
	return nil
}

// Members returns the desired members of name, sorted with Member.Compare.
func (s *IPSets) Members(name string) ([]netfilter.Member, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	set, err := s.wantedSet(name)
	if err != nil {
		return nil, false
	}
	out := make([]netfilter.Member, 0, set.members.desiredLen())
	for m := range set.members.desired() {
		out = append(out, m)
	}
	slices.SortFunc(out, netfilter.Member.Compare)
	return out, true
}

// Metadata returns the desired metadata of name, defaults filled in.
func (s *IPSets) Metadata(name string) (netfilter.SetMetadata, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	set, err := s.wantedSet(name)
	if err != nil {
		return netfilter.SetMetadata{}, false
	}
	return set.meta, true
}

// Names returns the names of the desired sets, sorted.
func (s *IPSets) Names() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, set := range s.sets {
		if set.wanted {
			out = append(out, set.name)
		}
	}
	slices.Sort(out)
	return out
}

// Stats returns the driver's dataplane.DriverStats, counting a set and
// each of its members as one object each: the desired sets and members,
// those the kernel holds of the owned sets as last read and then written
// (members the driver cannot represent included), the sets failing (the
// ledger's), and the sets and members written, swapped in, deleted and
// destroyed since New (the writes a Plan lists). It implements
// dataplane.StatsReporter; it does no I/O.
func (s *IPSets) Stats() dataplane.DriverStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := dataplane.DriverStats{Failing: s.ledger.Len(), Writes: s.writes}
	for _, set := range s.sets {
		if set.wanted {
			st.Desired += 1 + set.members.desiredLen()
		}
		if set.kernel != nil {
			st.InKernel += 1 + set.members.kernelLen() + len(set.foreign)
		}
	}
	return st
}

var _ dataplane.StatsReporter = (*IPSets)(nil)

// owned reports whether kname carries the driver's prefix.
func (s *IPSets) owned(kname string) bool {
	return strings.HasPrefix(kname, s.prefix) && len(kname) > len(s.prefix)
}

// entry returns the set for an owned kernel name, creating an unwanted one.
func (s *IPSets) entry(kname string) *ipset {
	set := s.sets[kname]
	if set == nil {
		set = &ipset{kname: kname, name: kname[len(s.prefix):]}
		s.sets[kname] = set
	}
	return set
}
