// Package ipsets keeps the kernel's ip sets equal to a declared desired
// state, through the ipset binary: the sets that iptables rules match
// thousands of addresses against.
//
// # What it owns
//
// One *IPSets owns, in one network namespace (the one its Kernel option
// names), every set whose name starts with its Prefix, for one address
// family. It creates, fills, swaps and destroys those sets and
// nothing else: a set without the prefix is never changed, flushed or
// destroyed, and its members are never read. Sets of ours that are not
// desired (left over by an earlier run, or created by hand with our
// prefix) are destroyed.
//
// # How it is used
//
//	ns, err := kernel.Open("/run/netns/pod1") // or leave Kernel nil: this namespace
//	...
//	sets, err := ipsets.New(ipsets.Options{Family: ipsets.IPv4, Prefix: "np4-", Kernel: ns})
//	...
//	err = sets.AddOrReplaceSet(netfilter.SetMetadata{Name: "allow", Type: netfilter.HashNet}, members)
//	name, err := sets.KernelName("allow") // np4-allow: -m set --match-set np4-allow src
//	res, err := sets.Apply(ctx)           // in a dataplane.Loop, the loop calls it
//
// Declare sets with the netfilter.Sets methods (AddOrReplaceSet,
// AddMembers, RemoveMembers, RemoveSet) using the rule model's typed
// members built from net/netip (netfilter.IPMember, NetMember,
// IPPortMember, NetNetMember, PortMember, ParseMember); read them back with Members and Metadata. Those calls
// validate and record intent only: a wrong family, a malformed member, an
// unknown type or a name longer than the kernel's 31 bytes (prefix
// included) is an error, and nothing changes. The supported types are
// hash:ip, hash:net, hash:ip,port, hash:net,net and bitmap:port, for IPv4
// and IPv6 (one IPSets per family). Members are canonical: 10.0.0.1/32 in a
// hash:net is 10.0.0.1. A prefix with host bits set (10.0.0.1/24) is an
// error naming it (wrapping ipfamily.ErrHostBits), never silently masked,
// and so is what the kernel would refuse, such as the unspecified address
// in a hash:ip or hash:ip,port set. Errors start with "ipsets: " and
// errors.Is matches every sentinel their text names.
//
// Register the IPSets with a dataplane.Loop: Apply runs in
// PhaseIPSetsUpdate, before the rule writers, and ApplyDeletions in
// PhaseIPSetsDelete, after them; a nil context is context.Background().
// Apply writes every creation and member
// change of a pass in one `ipset restore` (create … -exist, add, del), and
// does nothing when nothing changed. A member that stays desired is never
// missing from a set, not for a moment: a set whose members change a
// little is updated in place, every add before every delete; a set whose
// members mostly change (adds and deletes more than 60% of its desired
// size, and at least 128: the break-even measured on 100k members, where
// the swap is 2-3 times faster than the update in place when everything
// changes), whose MaxSize or Range changes, or that adding first would
// overfill, is rebuilt in a temporary set (Prefix + "~N") that is then
// swapped in and destroyed, so a rule that matches it never sees it
// missing, half filled or emptied. The kernel swaps only sets of equal
// type and family: a set whose Type changes is destroyed and created again
// when nothing refers to it, and otherwise left as it is with an error
// wrapping netfilter.ErrSetInUse.
//
// ApplyDeletions destroys sets that are no longer desired, at most
// MaxDestroysPerApply per call (each destroy is slow in the kernel). A set
// still referenced by a rule cannot be destroyed: it stays, and is tried
// again later.
//
// Plan lists what the next Apply and ApplyDeletions would write, decided
// by the code Apply decides with, without writing (a dataplane.Planner):
// sets created ("+ set np4-a hash:ip family inet maxelem 16"), swapped or
// destroyed and created ("~ set", with the header they replace) and
// destroyed ("- set"), and members added and deleted ("+ element np4-a
// 10.0.0.1"). State lists the owned sets and members the kernel holds,
// where they differ from the desired ones, and the failing sets (a
// dataplane.Stater). Stats counts a set and each member as one object:
// desired, in the kernel, failing (the sets), and written since New — the
// writes the Plans listed (a dataplane.StatsReporter).
//
// # Failures
//
// One bad set never holds the others back. A set the kernel refuses — it
// cannot be created (a set of another type took its name, the kernel
// lacks its type), a line of it is refused (the set is full of foreign
// members), it cannot be destroyed (a foreign rule still refers to it), or
// ipset cannot read it — is taken out of the pass: its lines are dropped
// from the restore, which is run again for the others in the same Apply
// (the sets written before the refused line are read back first). The set
// is retried on its own exponential backoff, from Options.RetryInterval to
// MaxSetBackoff, reset when its declaration changes; the failing sets are
// the driver's dataplane.Ledger, by kernel name. Meanwhile Apply and
// ApplyDeletions return its *dataplane.PartialError, which wraps
// dataplane.ErrPartial and one *dataplane.ObjectError per failing set
// (Driver "ipsets", Kind "set", Op "write", "read" or "destroy", Name the
// kernel name), with its causes (ErrRestore and a *command.RestoreError,
// netfilter.ErrSetInUse, ErrCommand, ErrParse): the sets that call tried
// count as failed, the others (those waiting for their retry, and the
// destroys in Apply, the writes in ApplyDeletions) as waiting. They set
// ApplyResult.RetryAfter to the first retry, so a dataplane.Loop carries
// on. Only failures that belong to no set — ipset missing or killed, the
// set list unreadable — fail the driver as a whole.
//
// # Resync
//
// The first Apply, and the first after any failure, reads every owned set
// and its members (`ipset list -name`, then `ipset save NAME` for each), so
// a restarted agent adopts what it finds and writes only the difference:
// nothing at all when the kernel already matches. QueueResync (which the
// loop calls periodically) makes the next Apply list the set names,
// recreate missing sets and destroy leftovers at once, and re-read the
// members of every set, a ResyncBudget's worth per Apply (a set is read
// whole, with one `ipset save NAME`, so the budget bounds how many sets one
// Apply reads, and at least one is); members added or removed with the
// ipset CLI are repaired.
//
// A failed `ipset restore` that belongs to no set returns ErrRestore
// wrapping a *command.RestoreError, which keeps the input, the failing
// line (Excerpt quotes the input around it) and the command's output; the
// next Apply re-reads the kernel before writing again.
//
// OnMemberChange reports every membership change written, for mirrors of
// the sets such as BPF maps, including those a failed restore wrote before
// it stopped (read back from the kernel).
//
// # Memory
//
// A member is a 38-byte value with no pointers, stored once (in one map
// entry) when the kernel agrees with the desired state: about 63 bytes of
// heap per member at 100k members, desired and kernel views together.
// Reading `ipset save` output parses it in place, without a string per
// member.
//
// # Backends and namespaces
//
// Sets is the interface a manager should hold: *IPSets implements it with
// ipset (for rules of package iptables), and *nftables.IPSets with sets of
// one nftables table (for the rules of that table).
//
// Options.Kernel is the one way to target a network namespace: ipset runs
// through its Runner (a *kernel.Namespace starts it inside its namespace;
// nil runs it as command.Local does, in the process's namespace). Unit
// tests hand the IPSets a kernelfake.Namespace, whose Runner serves ipset
// from the in-memory ipset kernel of package ipsetsfake
// (kernelfake.Namespace.IPSets), with failure injection.
package ipsets
