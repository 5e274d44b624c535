package kernelfake

import (
	"cmp"
	"context"
	"fmt"
	"net/netip"
	"slices"
	"syscall"

	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel"
)

// Neighbors implements kernel.Neighbors: the entries of family on the
// interface with index linkIndex (0: every interface), by interface and
// address.
func (ns *Namespace) Neighbors(ctx context.Context, family kernel.Family, linkIndex int) ([]kernel.Neighbor, error) {
	unlock, err := ns.begin(ctx, OpNeighbors)
	defer unlock()
	if err != nil {
		return nil, err
	}
	if !family.Valid() {
		return nil, invalidf("neighbours: %v is neither IPv4 nor IPv6", family)
	}
	var out []kernel.Neighbor
	for _, n := range ns.s.neighs {
		if ipfamily.Of(n.IP) == family && (linkIndex == 0 || n.LinkIndex == linkIndex) {
			n.MAC = slices.Clone(n.MAC)
			out = append(out, n)
		}
	}
	slices.SortFunc(out, func(a, b kernel.Neighbor) int {
		return cmp.Or(cmp.Compare(a.LinkIndex, b.LinkIndex), a.IP.Compare(b.IP))
	})
	return out, nil
}

// ApplyNeighbors implements kernel.Neighbors: OpReplace creates or
// replaces the entry of (LinkIndex, IP), OpAdd fails with EEXIST when it
// exists, OpDelete fails with ENOENT when it does not; a missing interface
// fails with ENODEV. Entries keep the Protocol they were written with,
// which dumps report; a replace with Protocol 0 keeps the entry's (the
// kernel keeps it when NDA_PROTOCOL is left out). Entries go when their
// interface goes down (all) or loses its carrier (all but permanent ones).
func (ns *Namespace) ApplyNeighbors(ctx context.Context, ops []kernel.NeighborOp) []error {
	return applyEach(ns, ctx, OpApplyNeighbors, ops, ns.applyNeighbor, func(op *kernel.NeighborOp) (string, string) {
		return opName(op.Kind, "neighbor"), fmt.Sprintf("%s dev %d", op.Neighbor.IP, op.Neighbor.LinkIndex)
	})
}

func (ns *Namespace) applyNeighbor(op *kernel.NeighborOp) error {
	n := op.Neighbor
	n.MAC = slices.Clone(n.MAC)
	switch op.Kind {
	case kernel.OpReplace, kernel.OpAdd:
		if err := n.Validate(); err != nil {
			return err
		}
		if n.State == 0 {
			n.State = kernel.NUDPermanent
		}
	case kernel.OpDelete:
		if n.LinkIndex <= 0 || !n.IP.IsValid() || n.IP.Zone() != "" || n.IP.Is4In6() || n.IP.IsUnspecified() {
			return invalidf("neighbour %s on interface %d", n.IP, n.LinkIndex)
		}
	default:
		return invalidf("unknown operation kind %d", uint8(op.Kind))
	}
	if err := ns.refused(OpApplyNeighbors, kernel.NeighborOp{Kind: op.Kind, Neighbor: n}); err != nil {
		return err
	}
	s := ns.s
	if s.links[n.LinkIndex] == nil {
		return syscall.ENODEV
	}
	i := slices.IndexFunc(s.neighs, func(x kernel.Neighbor) bool { return x.LinkIndex == n.LinkIndex && x.IP == n.IP })
	switch {
	case op.Kind == kernel.OpDelete && i < 0:
		return syscall.ENOENT
	case op.Kind == kernel.OpDelete:
		s.neighs = slices.Delete(s.neighs, i, i+1)
	case i >= 0 && op.Kind == kernel.OpAdd:
		return syscall.EEXIST
	case i >= 0:
		if n.Protocol == 0 {
			n.Protocol = s.neighs[i].Protocol
		}
		s.neighs[i] = n
	default:
		s.neighs = append(s.neighs, n)
	}
	return nil
}

// FDB implements kernel.FDB: the entries written to the interface with
// index linkIndex (0: every interface), in the order they were added. The
// entries the kernel makes itself (a bridge's own addresses, multicast
// ones) are not modelled.
func (ns *Namespace) FDB(ctx context.Context, linkIndex int) ([]kernel.FDBEntry, error) {
	unlock, err := ns.begin(ctx, OpFDB)
	defer unlock()
	if err != nil {
		return nil, err
	}
	if linkIndex != 0 {
		if _, err := ns.s.linkAt("FDB", linkIndex); err != nil {
			return nil, err
		}
	}
	var out []kernel.FDBEntry
	for _, e := range ns.s.fdb {
		if linkIndex == 0 || e.LinkIndex == linkIndex {
			e.MAC = slices.Clone(e.MAC)
			out = append(out, e)
		}
	}
	return out, nil
}

// ApplyFDB implements kernel.FDB. OpReplace of an all-zero or multicast
// MAC (the flood list of a VXLAN device) adds Dst to the MAC's remotes;
// of a unicast MAC it replaces the MAC's first remote. OpAdd fails with
// EEXIST when the MAC has an entry. On a VXLAN device a write needs a
// Dst (EINVAL). OpDelete deletes the remote Dst of the MAC (nothing, with
// success, when the MAC has no such remote), or all of its remotes when
// Dst is unset, and fails with ENOENT when the MAC has no entry. Entries that are not permanent go when their device
// goes down.
func (ns *Namespace) ApplyFDB(ctx context.Context, ops []kernel.FDBOp) []error {
	return applyEach(ns, ctx, OpApplyFDB, ops, ns.applyFDB, func(op *kernel.FDBOp) (string, string) {
		return opName(op.Kind, "fdb"), fmt.Sprintf("%v dst %v dev %d", op.Entry.MAC, op.Entry.Dst, op.Entry.LinkIndex)
	})
}

func (ns *Namespace) applyFDB(op *kernel.FDBOp) error {
	e := op.Entry
	e.MAC = slices.Clone(e.MAC)
	if op.Kind != kernel.OpReplace && op.Kind != kernel.OpAdd && op.Kind != kernel.OpDelete {
		return invalidf("unknown operation kind %d", uint8(op.Kind))
	}
	if err := e.Validate(); err != nil {
		return err
	}
	if err := ns.refused(OpApplyFDB, kernel.FDBOp{Kind: op.Kind, Entry: e}); err != nil {
		return err
	}
	s := ns.s
	l := s.links[e.LinkIndex]
	if l == nil {
		return syscall.ENODEV
	}
	if !e.Dst.IsValid() && l.VXLAN != nil {
		if op.Kind != kernel.OpDelete {
			return syscall.EINVAL // a VXLAN entry needs a remote
		}
		e.Dst = netip.IPv4Unspecified()
	}
	sameMAC := func(x kernel.FDBEntry) bool { return x.LinkIndex == e.LinkIndex && slices.Equal(x.MAC, e.MAC) }
	i := slices.IndexFunc(s.fdb, sameMAC)
	switch {
	case op.Kind == kernel.OpDelete && i < 0:
		return syscall.ENOENT
	case op.Kind == kernel.OpDelete:
		s.fdb = slices.DeleteFunc(s.fdb, func(x kernel.FDBEntry) bool {
			return sameMAC(x) && (!op.Entry.Dst.IsValid() || x.Dst == e.Dst)
		})
		return nil
	case i >= 0 && op.Kind == kernel.OpAdd:
		return syscall.EEXIST
	case i >= 0 && floods(e.MAC):
		if !slices.ContainsFunc(s.fdb, func(x kernel.FDBEntry) bool { return sameMAC(x) && x.Dst == e.Dst }) {
			s.fdb = append(s.fdb, e)
		}
	case i >= 0:
		s.fdb[i].Dst = e.Dst
	default:
		s.fdb = append(s.fdb, e)
	}
	for j := range s.fdb { // the state is the MAC's, shared by its remotes
		if sameMAC(s.fdb[j]) {
			s.fdb[j].Permanent = e.Permanent
		}
	}
	return nil
}

// floods reports whether mac is all zeros or multicast: its FDB entry is
// a list of remotes that all get the frames.
func floods(mac []byte) bool {
	return mac[0]&1 != 0 || !slices.ContainsFunc(mac, func(b byte) bool { return b != 0 })
}
