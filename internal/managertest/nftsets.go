//go:build linux

package managertest

import (
	"context"
	"fmt"
	"slices"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/ipsets"
	"github.com/nodeplane/nodeplane/nftables"
)

// NFTSets is an ipsets.Sets whose sets are nftables sets of one
// nftables.Table: the sets that the Table's rules match with
// netfilter.MatchSet (a native nftables table matches its own sets, not
// the kernel's ip sets). It holds hash:ip and hash:net sets, the types the
// node managers use, and declares them on the Table with SetSets, so the
// Table writes them in the same transaction as the rules that use them: its
// own Apply, ApplyDeletions and QueueResync do nothing.
//
// It lets the managers' kernel tests run on the nftables backend; it is a
// test stand-in for an nftables implementation of ipsets.Sets.
type NFTSets struct {
	tbl     *nftables.Table
	family  ipfamily.Family
	meta    map[string]ipsets.SetMetadata
	members map[string][]ipsets.Member
}

// NewNFTSets returns the sets of tbl, of family f.
func NewNFTSets(tbl *nftables.Table, f ipfamily.Family) *NFTSets {
	return &NFTSets{tbl: tbl, family: f, meta: map[string]ipsets.SetMetadata{}, members: map[string][]ipsets.Member{}}
}

// Family implements ipsets.Sets.
func (s *NFTSets) Family() ipfamily.Family { return s.family }

// KernelName implements ipsets.Sets: the nftables set has the set's name.
func (s *NFTSets) KernelName(name string) (string, error) {
	if name == "" || len(name) > ipsets.MaxNameLength {
		return "", fmt.Errorf("%w: %q", ipsets.ErrInvalidName, name)
	}
	return name, nil
}

// AddOrReplaceSet implements ipsets.Sets for hash:ip and hash:net.
func (s *NFTSets) AddOrReplaceSet(meta ipsets.SetMetadata, members []ipsets.Member) error {
	if meta.Type != ipsets.HashIP && meta.Type != ipsets.HashNet {
		return fmt.Errorf("%w: %s (NFTSets holds hash:ip and hash:net)", ipsets.ErrUnknownType, meta.Type)
	}
	return s.declare(meta, slices.Clone(members))
}

func (s *NFTSets) declare(meta ipsets.SetMetadata, members []ipsets.Member) error {
	for _, m := range members {
		if err := m.Err(); err != nil {
			return err
		}
	}
	set := nftables.Set{Name: meta.Name, Key: []nftables.KeyType{nftables.TypeAddr}, Interval: meta.Type == ipsets.HashNet}
	for _, m := range members {
		if meta.Type == ipsets.HashNet {
			set.Elements = append(set.Elements, nftables.Elem(nftables.Prefix(m.Prefix())))
		} else {
			set.Elements = append(set.Elements, nftables.Elem(nftables.Addr(m.Addr())))
		}
	}
	if err := s.tbl.SetSets(set); err != nil {
		return err
	}
	s.meta[meta.Name], s.members[meta.Name] = meta, members
	return nil
}

// AddMembers implements ipsets.Sets.
func (s *NFTSets) AddMembers(name string, members []ipsets.Member) error {
	meta, ok := s.meta[name]
	if !ok {
		return fmt.Errorf("%w: %s", ipsets.ErrUnknownSet, name)
	}
	return s.declare(meta, append(slices.Clone(s.members[name]), members...))
}

// RemoveMembers implements ipsets.Sets.
func (s *NFTSets) RemoveMembers(name string, members []ipsets.Member) error {
	meta, ok := s.meta[name]
	if !ok {
		return fmt.Errorf("%w: %s", ipsets.ErrUnknownSet, name)
	}
	keep := slices.DeleteFunc(slices.Clone(s.members[name]), func(m ipsets.Member) bool { return slices.Contains(members, m) })
	return s.declare(meta, keep)
}

// RemoveSet implements ipsets.Sets.
func (s *NFTSets) RemoveSet(name string) error {
	if _, ok := s.meta[name]; !ok {
		return nil
	}
	if err := s.tbl.RemoveSets(name); err != nil {
		return err
	}
	delete(s.meta, name)
	delete(s.members, name)
	return nil
}

// Members implements ipsets.Sets.
func (s *NFTSets) Members(name string) ([]ipsets.Member, bool) {
	m, ok := s.members[name]
	out := slices.Clone(m)
	slices.SortFunc(out, ipsets.Member.Compare)
	return slices.Compact(out), ok
}

// Metadata implements ipsets.Sets.
func (s *NFTSets) Metadata(name string) (ipsets.SetMetadata, bool) {
	m, ok := s.meta[name]
	return m, ok
}

// Names implements ipsets.Sets.
func (s *NFTSets) Names() []string {
	names := make([]string, 0, len(s.meta))
	for n := range s.meta {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Apply implements dataplane.Driver: the Table writes the sets.
func (s *NFTSets) Apply(context.Context) (dataplane.ApplyResult, error) {
	return dataplane.ApplyResult{}, nil
}

// ApplyDeletions implements dataplane.DeletionApplier: the Table deletes
// the sets.
func (s *NFTSets) ApplyDeletions(context.Context) (dataplane.ApplyResult, error) {
	return dataplane.ApplyResult{}, nil
}

// QueueResync implements dataplane.Driver: the Table reads its sets.
func (s *NFTSets) QueueResync() {}

// Phase implements dataplane.Driver.
func (s *NFTSets) Phase() dataplane.Phase { return dataplane.PhaseIPSetsUpdate }

var _ ipsets.Sets = (*NFTSets)(nil)
