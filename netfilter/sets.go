package netfilter

import (
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/ipfamily"
)

// Sets is the declarative surface of a set backend: the desired sets of one
// address family, and a dataplane driver that converges the kernel to them.
// *ipsets.IPSets implements it with the ipset tool, *nftables.IPSets with the sets
// of one nftables table, so managers written against Sets work with either.
//
// Names are unprefixed: the backend adds its own prefix (or table) and
// touches only what carries it. The mutating methods record intent only;
// nothing reaches the kernel before the driver's Apply (creations and
// member changes) and ApplyDeletions (removals, after the rule writers
// have dropped their references). Bad input is rejected with an error and
// changes nothing.
type Sets interface {
	dataplane.Driver
	dataplane.DeletionApplier

	// Family returns the address family of every set of the backend.
	Family() ipfamily.Family
	// KernelName returns the name the kernel knows the set by (the
	// prefixed name), for use in rules. It fails for an invalid or too
	// long name.
	KernelName(name string) (string, error)
	// AddOrReplaceSet makes meta.Name a desired set holding exactly
	// members, creating it or replacing its metadata and members.
	AddOrReplaceSet(meta SetMetadata, members []Member) error
	// AddMembers adds members to the desired set name.
	AddMembers(name string, members []Member) error
	// RemoveMembers removes members from the desired set name; members
	// that are not in it are ignored.
	RemoveMembers(name string, members []Member) error
	// RemoveSet makes name no longer desired; ApplyDeletions removes it
	// from the kernel once nothing refers to it. Removing a set that is not
	// desired does nothing.
	RemoveSet(name string) error
	// Members returns the desired members of name, sorted with
	// Member.Compare, and whether name is a desired set.
	Members(name string) ([]Member, bool)
	// Metadata returns the desired metadata of name, with defaults filled
	// in, and whether name is a desired set.
	Metadata(name string) (SetMetadata, bool)
	// Names returns the names of the desired sets, sorted.
	Names() []string
}

// MemberChange is one membership change the driver wrote to the kernel:
// a member added to or removed from a set, including repairs of foreign
// edits, the members of a set created or swapped in, and the members of a
// set destroyed. A mirror (such as a BPF map) that applies every change
// holds what the kernel holds; an add of a member it already has, or a
// removal of one it does not have, is possible after a repair and should
// be a no-op.
type MemberChange struct {
	// Set is the set's unprefixed name.
	Set string
	// Member is the member added or removed.
	Member Member
	// Added is true for an addition, false for a removal.
	Added bool
}
