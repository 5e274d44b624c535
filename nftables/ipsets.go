package nftables

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/errs"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/netfilter"
)

// IPSetsOptions configures an IPSets. The zero value is the default: sets
// named as given.
type IPSetsOptions struct {
	// Prefix starts the nftables name of every set (see KernelName), as
	// ipsets.Options.Prefix does for the kernel's ip sets: it keeps the
	// sets apart from those the Table's owner declares with SetSets and
	// from those of another IPSets on the same Table. Letters, digits and
	// "_.:-", not starting with "-"; with the set's name, at most
	// netfilter.MaxNameLength bytes. Empty means no prefix.
	Prefix string
}

// IPSets is the netfilter.Sets of a Table: the node managers' sets (hash:ip,
// hash:net, hash:ip,port and bitmap:port) as named nftables sets of the
// Table's own table, where its rules match them with netfilter.MatchSet
// (a native nftables table looks up its own sets, not the kernel's ip
// sets). Give a manager the IPSets and the Table it was made on, and it
// runs on nftables as it runs on iptables with an *ipsets.IPSets.
//
// The mutating methods validate as package ipsets does (the same input is
// refused, with the same sentinels) and declare the sets on the Table at
// once (Table.SetSets, AddElements, DeleteElements), so that the rules
// declared next can use them and the Table's Apply writes sets and rules
// in one transaction, only what changed. Members change element by
// element: adding one member to a set of a hundred thousand writes one
// element. The Table reads and repairs the sets with the rest of its
// table, so QueueResync does nothing; Apply and ApplyDeletions do no I/O:
// they remove the sets whose removal had to wait until the Table's rules
// stopped using them (see RemoveSet).
//
// An IPSets is safe for concurrent use.
type IPSets struct {
	tbl    *Table
	family ipfamily.Family
	prefix string

	mu sync.Mutex
	// sets are the desired sets, by unprefixed name.
	sets map[string]*nftIPSet
	// removing are the kernel names of sets no longer desired that the
	// Table still declares because its rules use them; ledger holds each
	// (ErrSetInUse, by kernel name) until its removal goes through.
	removing map[string]bool
	ledger   *dataplane.Ledger[string]
}

// nftIPSet is one desired set.
type nftIPSet struct {
	meta    netfilter.SetMetadata // normalized
	members map[netfilter.Member]struct{}
}

var (
	_ netfilter.Sets    = (*IPSets)(nil)
	_ dataplane.Named   = (*IPSets)(nil)
	_ dataplane.Planner = (*IPSets)(nil)
	_ dataplane.Stater  = (*IPSets)(nil)
)

// NewIPSets returns the IPSets of tbl, of tbl's IP family, with nothing
// declared. It validates opts and does no I/O.
func NewIPSets(tbl *Table, opts IPSetsOptions) (*IPSets, error) {
	if tbl == nil {
		return nil, fmt.Errorf("%w: NewIPSets needs a Table", ErrInvalidOptions)
	}
	if p := opts.Prefix; p != "" {
		if !validIPSetName(p) {
			return nil, errs.Also(fmt.Errorf("%w: IPSets prefix %q (use ASCII letters, digits and \"_.:-\", not starting with \"-\")", ErrInvalidOptions, p), netfilter.ErrInvalidSetName)
		}
		if len(p) >= netfilter.MaxNameLength {
			return nil, errs.Also(fmt.Errorf("%w: IPSets prefix %q leaves no room for a set name (%d bytes in all)", ErrInvalidOptions, p, netfilter.MaxNameLength), netfilter.ErrSetNameTooLong)
		}
	}
	return &IPSets{tbl: tbl, family: tbl.opts.Family, prefix: opts.Prefix,
		sets: map[string]*nftIPSet{}, removing: map[string]bool{}, ledger: dataplane.NewLedger[string](dataplane.Backoff{}, tbl.opts.Clock)}, nil
}

// Name returns the Table's name and "-sets", such as
// "nftables-ip-np-nat-sets", for the loop's logs.
func (s *IPSets) Name() string { return s.tbl.Name() + "-sets" }

// Table returns the Table that holds the sets.
func (s *IPSets) Table() *Table { return s.tbl }

// Prefix returns the prefix of the sets' nftables names.
func (s *IPSets) Prefix() string { return s.prefix }

// Family returns the Table's IP family, that of every set.
func (s *IPSets) Family() ipfamily.Family { return s.family }

// Phase returns dataplane.PhaseIPSetsUpdate, as every ip set driver's.
func (s *IPSets) Phase() dataplane.Phase { return dataplane.PhaseIPSetsUpdate }

// KernelName returns Prefix + name, the name of the nftables set, for
// rules (netfilter.SourceIPSet(name) and the like). It fails, as
// AddOrReplaceSet does, for an invalid or too long name.
func (s *IPSets) KernelName(name string) (string, error) {
	if err := s.checkName(name); err != nil {
		return "", err
	}
	return s.prefix + name, nil
}

// AddOrReplaceSet makes meta.Name a desired set holding exactly members
// (duplicates are ignored) and declares it on the Table: the next
// Table.Apply writes only the elements that changed. The set's Type
// decides its nftables shape: hash:ip a set of addresses, hash:net an
// interval set of prefixes, hash:ip,port a set of address . protocol .
// port (matched with netfilter.IPSet(name, side, side)), bitmap:port a set
// of ports (a rule matching it needs a tcp, udp or sctp protocol
// criterion). hash:net,net is refused (ErrUnknownType): the kernel's sets
// of concatenated ranges refuse overlapping pairs, which an ip set holds.
// MaxSize bounds the members as in package ipsets; nothing of it reaches
// the kernel. A change of Type while the Table's rules use the set is
// refused (netfilter.ErrSetInUse and ErrSetInUse): change the rules first.
// Bad input is an error and nothing changes.
func (s *IPSets) AddOrReplaceSet(meta netfilter.SetMetadata, members []netfilter.Member) error {
	meta, err := s.normalize(meta)
	if err != nil {
		return err
	}
	if err := checkMembers(&meta, members); err != nil {
		return err
	}
	uniq := make(map[netfilter.Member]struct{}, len(members))
	for _, m := range members {
		uniq[m] = struct{}{}
	}
	if meta.Type != netfilter.BitmapPort && len(uniq) > meta.MaxSize {
		return errs.Also(fmt.Errorf("nftables: %s: set %q has %d members, MaxSize is %d", errBare(netfilter.ErrTooManyMembers), meta.Name, len(uniq), meta.MaxSize), netfilter.ErrTooManyMembers)
	}
	kname := s.prefix + meta.Name
	set := Set{Name: kname, Key: keyOf(meta.Type), Interval: meta.Type == netfilter.HashNet, Elements: make([]Element, 0, len(uniq))}
	for m := range uniq {
		set.Elements = append(set.Elements, elementOf(meta.Type, m))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sets[meta.Name] == nil && !s.removing[kname] && s.tbl.declaresSet(kname) {
		return fmt.Errorf("%w: set %s is declared on the Table by someone else (SetSets, or another IPSets without a prefix of its own)", ErrDuplicate, kname)
	}
	if err := s.tbl.SetSets(set); err != nil {
		return tableErr(err)
	}
	delete(s.removing, kname)
	s.ledger.Forget(kname)
	s.sets[meta.Name] = &nftIPSet{meta: meta, members: uniq}
	return nil
}

// AddMembers adds members to the desired set name, and their elements to
// the Table's set: the next Table.Apply writes only them.
func (s *IPSets) AddMembers(name string, members []netfilter.Member) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	set, added, elems, err := s.changes(name, members, false)
	if err != nil || len(added) == 0 {
		return err
	}
	if n := len(set.members) + len(added); set.meta.Type != netfilter.BitmapPort && n > set.meta.MaxSize {
		return errs.Also(fmt.Errorf("nftables: %s: set %q would have %d members, MaxSize is %d", errBare(netfilter.ErrTooManyMembers), name, n, set.meta.MaxSize), netfilter.ErrTooManyMembers)
	}
	if err := s.tbl.AddElements(s.prefix+name, elems...); err != nil {
		return tableErr(err)
	}
	for _, m := range added {
		set.members[m] = struct{}{}
	}
	return nil
}

// RemoveMembers removes members from the desired set name, and their
// elements from the Table's set. Members not in the set are ignored, but
// every member must be valid for the set.
func (s *IPSets) RemoveMembers(name string, members []netfilter.Member) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	set, gone, elems, err := s.changes(name, members, true)
	if err != nil || len(gone) == 0 {
		return err
	}
	if err := s.tbl.DeleteElements(s.prefix+name, elems...); err != nil {
		return tableErr(err)
	}
	for _, m := range gone {
		delete(set.members, m)
	}
	return nil
}

// changes returns the desired set name and, of members (checked for it),
// each distinct one that is in the set (in) or not (!in), with its
// element: the members an addition (!in) or removal (in) changes. The
// caller holds the lock.
func (s *IPSets) changes(name string, members []netfilter.Member, in bool) (*nftIPSet, []netfilter.Member, []Element, error) {
	set, err := s.wanted(name)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := checkMembers(&set.meta, members); err != nil {
		return nil, nil, nil, err
	}
	var picked []netfilter.Member
	var elems []Element
	var seen map[netfilter.Member]struct{}
	for _, m := range members {
		if _, ok := set.members[m]; ok != in {
			continue
		}
		if _, ok := seen[m]; ok {
			continue
		}
		if seen == nil {
			seen = map[netfilter.Member]struct{}{}
		}
		seen[m] = struct{}{}
		picked = append(picked, m)
		elems = append(elems, elementOf(set.meta.Type, m))
	}
	return set, picked, elems, nil
}

// RemoveSet makes name no longer desired and removes it from the Table,
// whose next Apply deletes it in the same transaction as the rules that
// stop using it. While the Table's declared rules still use the set, it
// stays declared on the Table (with its elements) and the removal waits:
// Apply and ApplyDeletions, which the loop calls in every pass after the
// managers have declared their rules, remove it once no rule uses it.
// Removing a set that is not desired does nothing.
func (s *IPSets) RemoveSet(name string) error {
	if err := s.checkName(name); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sets[name] == nil {
		return nil
	}
	kname := s.prefix + name
	if err := s.tbl.RemoveSets(kname); err != nil {
		if !errors.Is(err, ErrSetInUse) {
			return tableErr(err)
		}
		s.removing[kname] = true
	}
	delete(s.sets, name)
	return nil
}

// Members returns the desired members of name, sorted with
// netfilter.Member.Compare, and whether name is a desired set.
func (s *IPSets) Members(name string) ([]netfilter.Member, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	set := s.sets[name]
	if set == nil {
		return nil, false
	}
	out := make([]netfilter.Member, 0, len(set.members))
	for m := range set.members {
		out = append(out, m)
	}
	slices.SortFunc(out, netfilter.Member.Compare)
	return out, true
}

// Metadata returns the desired metadata of name, with defaults filled in
// (Family, MaxSize, Range), and whether name is a desired set.
func (s *IPSets) Metadata(name string) (netfilter.SetMetadata, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	set := s.sets[name]
	if set == nil {
		return netfilter.SetMetadata{}, false
	}
	return set.meta, true
}

// Names returns the names of the desired sets, sorted.
func (s *IPSets) Names() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.sets))
	for n := range s.sets {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Apply removes from the Table the sets whose removal waited for its rules
// (see RemoveSet) and that no declared rule uses any more, so that the
// Table's Apply, later in the same pass, deletes them. It does no I/O:
// the Table writes the sets. The sets still in use are reported by
// ApplyDeletions.
func (s *IPSets) Apply(context.Context) (dataplane.ApplyResult, error) {
	s.removeWaiting()
	return dataplane.ApplyResult{}, nil
}

// ApplyDeletions tries the waiting removals again (see Apply) and returns
// its ledger's dataplane.PartialError naming each set that the Table's
// declared rules still use: a *dataplane.ObjectError (Kind KindSet, the
// set's kernel name, Reason ErrSetInUse; it matches netfilter.ErrSetInUse
// too), held until the rules stop using the set. It does no I/O.
func (s *IPSets) ApplyDeletions(context.Context) (dataplane.ApplyResult, error) {
	return dataplane.ApplyResult{}, s.removeWaiting()
}

// removeWaiting removes the waiting sets that no rule uses any more, and
// holds the others on the ledger.
func (s *IPSets) removeWaiting() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ledger.Begin()
	for _, kname := range sortedKeys(s.removing) {
		err := s.tbl.RemoveSets(kname)
		if err != nil {
			s.ledger.Hold(kname, &dataplane.ObjectError{Driver: driverName, Kind: KindSet, Name: kname, Reason: ErrSetInUse,
				Detail: "its removal waits for the rules that use it", Err: tableErr(err)})
			continue
		}
		delete(s.removing, kname)
		s.ledger.Forget(kname)
	}
	return s.ledger.Err()
}

// Plan implements dataplane.Planner: an empty plan, for Apply and
// ApplyDeletions write nothing (the Table writes the sets: its Plan lists
// their creation, deletion and elements).
func (s *IPSets) Plan(context.Context) (dataplane.Plan, error) {
	return dataplane.Plan{Driver: s.Name()}, nil
}

// State implements dataplane.Stater: the sets of the IPSets (desired, or
// waiting for their removal) that the Table's table holds in the kernel,
// with their elements, how the desired ones differ from the kernel's, and
// the sets whose removal waits (see ApplyDeletions). It reads the kernel
// where the Table's next Apply would (see Table.State), and writes
// nothing. A nil ctx is context.Background().
func (s *IPSets) State(ctx context.Context) (dataplane.State, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := dataplane.State{Driver: s.Name()}
	t := s.tbl
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, err := t.picture(ctx); err != nil {
		return st, err
	}
	for name := range s.sets {
		t.setState(&st, s.prefix+name)
	}
	for kname := range s.removing {
		t.setState(&st, kname)
	}
	st.Failing = s.ledger.Errors()
	dataplane.SortState(&st)
	return st, nil
}

// QueueResync does nothing: the Table reads its sets with the rest of its
// table (Table.QueueResync).
func (s *IPSets) QueueResync() {}

// declaresSet reports whether the Table declares set name.
func (t *Table) declaresSet(name string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.sets[name] != nil
}

// wanted returns the desired set name, or an error.
func (s *IPSets) wanted(name string) (*nftIPSet, error) {
	if err := s.checkName(name); err != nil {
		return nil, err
	}
	set := s.sets[name]
	if set == nil {
		return nil, errs.Also(fmt.Errorf("%w %q: not a desired set of the IPSets", ErrUnknownSet, name), netfilter.ErrUnknownSet)
	}
	return set, nil
}

// errBare returns an error of package netfilter's set model (a sentinel
// or one wrapping it) without its prefix, for the text of an error of ours
// that matches it.
func errBare(err error) string { return strings.TrimPrefix(err.Error(), "netfilter: ") }

// tableErr adds to an error of the Table the sentinel of package netfilter
// it stands for, for callers that hold a netfilter.Sets.
func tableErr(err error) error {
	switch {
	case errors.Is(err, ErrSetInUse):
		return errs.Also(err, netfilter.ErrSetInUse)
	case errors.Is(err, ErrInvalidElement):
		return errs.Also(err, netfilter.ErrInvalidMember)
	}
	return err
}

// validIPSetName reports whether s is made of the characters package ipsets
// allows in a set name and does not start with "-" (a set name in a rule
// cannot).
func validIPSetName(s string) bool {
	if s == "" || s[0] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(isAlnum(c) || c == '_' || c == '.' || c == ':' || c == '-') {
			return false
		}
	}
	return true
}

// checkName validates an unprefixed set name as package ipsets does.
func (s *IPSets) checkName(name string) error {
	if !validIPSetName(s.prefix+name) || name == "" || !validIPSetName("x"+name) {
		return errs.Also(fmt.Errorf("nftables: %s: %q (use ASCII letters, digits and \"_.:-\"; the set's nftables name %q must not start with \"-\")",
			errBare(netfilter.ErrInvalidSetName), name, s.prefix+name), netfilter.ErrInvalidSetName, ErrInvalidSet)
	}
	if n := len(s.prefix) + len(name); n > netfilter.MaxNameLength {
		return errs.Also(fmt.Errorf("nftables: %s: %q is %d bytes with prefix %q, nftables set names in rules take %d",
			errBare(netfilter.ErrSetNameTooLong), s.prefix+name, n, s.prefix, netfilter.MaxNameLength), netfilter.ErrSetNameTooLong, ErrInvalidSet)
	}
	return nil
}

// normalize validates meta as package ipsets does (netfilter.SetMetadata.Normalize)
// and fills its defaults in: Family, MaxSize for hash types, Range for
// bitmap:port. It refuses hash:net,net, which package ipsets holds.
func (s *IPSets) normalize(m netfilter.SetMetadata) (netfilter.SetMetadata, error) {
	if err := s.checkName(m.Name); err != nil {
		return m, err
	}
	if m.Type == netfilter.HashNetNet {
		return m, errs.Also(fmt.Errorf("nftables: %s: %q (set %q): nftables sets of concatenated ranges refuse overlapping pairs, which an ip set of this type holds",
			errBare(netfilter.ErrUnknownSetType), string(m.Type), m.Name), netfilter.ErrUnknownSetType, ErrInvalidSet)
	}
	n, err := m.Normalize(s.family, s.prefix)
	if err != nil {
		return m, errs.Also(fmt.Errorf("nftables: %s", errBare(err)), err, ErrInvalidSet)
	}
	return n, nil
}

// checkMembers validates members for a set of meta (normalized) as every
// backend of netfilter.Sets does (netfilter.SetMetadata.CheckMember); the
// error says which member of which set.
func checkMembers(meta *netfilter.SetMetadata, members []netfilter.Member) error {
	for i, m := range members {
		if err := meta.CheckMember(m); err != nil {
			return errs.Also(fmt.Errorf("%w %s: member %d: %s", ErrInvalidElement, meta.Name, i, errBare(err)), err)
		}
	}
	return nil
}

// keyOf is the nftables key of a set of type t.
func keyOf(t netfilter.SetType) []KeyType {
	switch t {
	case netfilter.HashIPPort:
		return []KeyType{TypeAddr, TypeProto, TypePort}
	case netfilter.BitmapPort:
		return []KeyType{TypePort}
	}
	return []KeyType{TypeAddr}
}

// elementOf is the element of member m (valid for t) in a set of type t.
func elementOf(t netfilter.SetType, m netfilter.Member) Element {
	switch t {
	case netfilter.HashNet:
		return Elem(Prefix(m.Prefix()))
	case netfilter.HashIPPort:
		return Elem(Addr(m.Addr()), Proto(netfilter.Proto(m.Protocol())), Port(m.Port()))
	case netfilter.BitmapPort:
		return Elem(Port(m.Port()))
	}
	return Elem(Addr(m.Addr()))
}
