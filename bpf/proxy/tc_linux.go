//go:build linux

package proxy

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/nodeplane/nodeplane/kernel"
)

// Classic tc attachment (AttachTC): a direct-action bpf filter named
// TCFilterPrefix+program at TCPriority and TCHandle on each direction of
// the clsact qdisc of an interface. Every netlink call runs inside the
// Proxy's namespace (Options.Kernel.Do), on a handle made there.

// attachState is how the Proxy attaches: the mode in use and whether the
// namespace's tc filters were swept.
type attachState struct {
	// mode is AttachTCX or AttachTC once decided (attachMode); AttachAuto
	// until then.
	mode AttachMode
	// tcSwept: the filters of ours on interfaces that should not have them
	// were removed (tcScan, tcStrays), once and again after a resync.
	tcSwept bool
}

// attachModeInUse is Status's attach mode: the one decided, or
// Options.Attach before.
func (p *Proxy) attachModeInUse() AttachMode {
	if p.k != nil && p.k.at.mode != AttachAuto {
		return p.k.at.mode
	}
	return p.o.Attach
}

// attachMode returns the mode the attachments use, deciding it the first
// time: Options.Attach, or with AttachAuto what probeTCX finds. A probe
// that fails (the namespace cannot be entered) decides nothing: the
// attachments are tried with TCX, and the next call probes again.
func (p *Proxy) attachMode() AttachMode {
	k := p.k
	if k.at.mode != AttachAuto {
		return k.at.mode
	}
	if p.o.Attach != AttachAuto {
		k.at.mode = p.o.Attach
		return k.at.mode
	}
	mode, err := p.probeTCX()
	if err != nil {
		p.log.Warn("bpf proxy: probing TCX failed", "name", p.o.Name, "error", err)
		return AttachTCX
	}
	k.at.mode = mode
	p.log.Info("bpf proxy: attach mode", "name", p.o.Name, "mode", mode)
	return mode
}

// probeTCX says whether the kernel has TCX (AttachTCX) or not (AttachTC):
// it attaches the pod ingress program to an interface index no interface
// has, inside the namespace, which a kernel with TCX refuses with ENODEV
// and one without it with ebpf.ErrNotSupported (cilium/ebpf's own probe).
// Nothing is attached.
func (p *Proxy) probeTCX() (AttachMode, error) {
	var attachErr error
	err := p.o.Kernel.Do(func() error {
		l, err := link.AttachTCX(link.TCXOptions{Interface: math.MaxInt32, Program: p.k.progs[progIngress],
			Attach: ebpf.AttachTCXIngress})
		if err == nil {
			_ = l.Close()
		}
		attachErr = err
		return nil
	})
	switch {
	case err != nil:
		return AttachAuto, err
	case errors.Is(attachErr, ebpf.ErrNotSupported):
		return AttachTC, nil
	case attachErr == nil || errors.Is(attachErr, unix.ENODEV):
		return AttachTCX, nil
	}
	return AttachAuto, attachErr
}

// tcParent is the clsact parent of direction dir.
func tcParent(dir string) uint32 {
	if dir == tcxDirs[0] {
		return netlink.HANDLE_MIN_INGRESS
	}
	return netlink.HANDLE_MIN_EGRESS
}

// tcText names the classic tc attachment of direction dir of interface
// name, with prog (when not empty): "eth0 ingress np_ingress (tc)".
func tcText(name, dir, prog string) string {
	return tcxText(name, dir, prog) + " (tc)"
}

// tcSlot is what holds the Proxy's priority and handle on one direction
// of an interface.
type tcSlot struct {
	found bool   // a filter is there
	ours  bool   // a bpf filter named as ours (TCFilterPrefix)
	name  string // its name (a bpf filter's) or its kind
	prog  ebpf.ProgramID
	da    bool // direct action
}

// tcFilter says what a filter of a dump is to the Proxy: whether it holds
// its priority and handle, and as what.
func tcFilter(f netlink.Filter) (tcSlot, bool) {
	a := f.Attrs()
	if a.Priority != TCPriority || a.Handle != TCHandle {
		return tcSlot{}, false
	}
	s := tcSlot{found: true, name: f.Type()}
	if b, ok := f.(*netlink.BpfFilter); ok {
		s.name, s.prog, s.da = b.Name, ebpf.ProgramID(b.Id), b.DirectAction
		s.ours = strings.HasPrefix(b.Name, TCFilterPrefix)
	}
	return s, true
}

// withTC runs fn inside the namespace with a netlink handle made there.
func (p *Proxy) withTC(fn func(h *netlink.Handle) error) error {
	return p.o.Kernel.Do(func() error {
		h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
		if err != nil {
			return fmt.Errorf("netlink: %w", err)
		}
		defer h.Close()
		return fn(h)
	})
}

// device is the netlink link of interface index, for the calls that take
// one.
func device(index int) netlink.Link {
	return &netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: index}}
}

// readSlots returns what holds the Proxy's priority and handle on both
// directions of interface index (nothing for an interface that does not
// exist or has no clsact qdisc).
func readSlots(h *netlink.Handle, index int) ([2]tcSlot, error) {
	var slots [2]tcSlot
	for i, dir := range tcxDirs {
		fs, err := h.FilterList(device(index), tcParent(dir))
		if err != nil {
			return slots, fmt.Errorf("listing the %s tc filters: %w", dir, err)
		}
		for _, f := range fs {
			if s, ok := tcFilter(f); ok {
				slots[i] = s
			}
		}
	}
	return slots, nil
}

// tcRead is readSlots inside the namespace.
func (p *Proxy) tcRead(index int) (slots [2]tcSlot, err error) {
	err = p.withTC(func(h *netlink.Handle) error {
		slots, err = readSlots(h, index)
		return err
	})
	return slots, err
}

// tcDecide is attachTC's decision for one direction, which Plan and State
// make too: linkKept when our filter runs the program whose ID is progID
// (direct action), linkUpdated when it runs another one (its program is
// replaced in place), linkAttached when there is none (it is made, and the
// clsact qdisc with it when missing), and an error when a foreign filter
// holds the priority and handle.
func tcDecide(s tcSlot, progID ebpf.ProgramID) (linkWrite, error) {
	switch {
	case !s.found:
		return linkAttached, nil
	case !s.ours:
		return 0, fmt.Errorf("a foreign tc filter (%q) holds priority %#x handle %#x", s.name, TCPriority, TCHandle)
	case s.prog == progID && s.da:
		return linkKept, nil
	}
	return linkUpdated, nil
}

// attachTC attaches the programs to interface name (l) as classic tc
// filters: each direction whose filter does not run its program gets it,
// made or replaced in place (FilterReplace at the same priority and handle,
// so traffic never passes untranslated); then the TCX attachments an
// earlier Proxy in TCX mode pinned for the interface are detached.
func (p *Proxy) attachTC(name string, l iface) (*attachment, error) {
	k := p.k
	slots, err := p.tcRead(l.index)
	if err != nil {
		return nil, err
	}
	for i, dir := range tcxDirs {
		prog, _, _ := p.tcx(l, dir)
		w, err := tcDecide(slots[i], k.progIDs[prog])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", dir, err)
		}
		if w == linkKept {
			continue
		}
		filter := &netlink.BpfFilter{
			FilterAttrs: netlink.FilterAttrs{LinkIndex: l.index, Parent: tcParent(dir), Handle: TCHandle,
				Priority: TCPriority, Protocol: unix.ETH_P_ALL},
			Fd: prog.FD(), Name: TCFilterPrefix + tcxProgName(l, dir), DirectAction: true,
		}
		err = p.withTC(func(h *netlink.Handle) error {
			if w == linkAttached {
				if err := ensureClsact(h, l.index); err != nil {
					return err
				}
			}
			if err := h.FilterReplace(filter); err != nil {
				return fmt.Errorf("tc filter: %w", err)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", dir, err)
		}
		k.linkWrites++
	}
	p.unpin(name)
	return &attachment{at: l, tc: true}, nil
}

// clsact is the clsact qdisc of interface index.
func clsact(index int) *netlink.Clsact {
	return &netlink.Clsact{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: index, Handle: netlink.MakeHandle(0xffff, 0),
		Parent: netlink.HANDLE_CLSACT}}
}

// ensureClsact makes the clsact qdisc of interface index, unless it has
// one; an ingress qdisc in its place (which has no egress) is an error.
func ensureClsact(h *netlink.Handle, index int) error {
	err := h.QdiscAdd(clsact(index))
	if !errors.Is(err, unix.EEXIST) {
		if err != nil {
			return fmt.Errorf("clsact qdisc: %w", err)
		}
		return nil
	}
	qs, err := h.QdiscList(device(index))
	if err != nil {
		return fmt.Errorf("listing the qdiscs: %w", err)
	}
	for _, q := range qs {
		if q.Attrs().LinkIndex == index && q.Attrs().Parent == netlink.HANDLE_CLSACT && q.Type() != "clsact" {
			return fmt.Errorf("the interface has an %s qdisc, not clsact", q.Type())
		}
	}
	return nil
}

// tcDetach removes our filters from both directions of interface index.
func (p *Proxy) tcDetach(index int) {
	for _, dir := range tcxDirs {
		p.tcDetachOne(index, dir)
	}
}

// tcDetachOne removes our filter from direction dir of interface index,
// when it is there, and counts the write (deleteTC).
func (p *Proxy) tcDetachOne(index int, dir string) {
	var found bool
	_ = p.withTC(func(h *netlink.Handle) (err error) {
		found, err = deleteTC(h, index, dir)
		return err
	})
	if found {
		p.k.linkWrites++
	}
}

// deleteTC deletes our filter on direction dir of interface index, if it
// is there (found), and then the interface's clsact qdisc if no filter is
// left on it, of either direction: a qdisc with filters of others stays.
func deleteTC(h *netlink.Handle, index int, dir string) (found bool, err error) {
	slots, err := readSlots(h, index)
	i := slices.Index(tcxDirs[:], dir)
	if err != nil || !slots[i].ours {
		return false, err
	}
	err = h.FilterDel(&netlink.BpfFilter{FilterAttrs: netlink.FilterAttrs{LinkIndex: index, Parent: tcParent(dir),
		Handle: TCHandle, Priority: TCPriority, Protocol: unix.ETH_P_ALL}})
	if err != nil && !errors.Is(err, unix.ENOENT) {
		return true, fmt.Errorf("deleting the %s tc filter: %w", dir, err)
	}
	for _, d := range tcxDirs {
		fs, err := h.FilterList(device(index), tcParent(d))
		if err != nil || len(fs) > 0 {
			return true, nil // in use, or unknown: it stays
		}
	}
	if err := h.QdiscDel(clsact(index)); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EINVAL) {
		return true, fmt.Errorf("deleting the empty clsact qdisc: %w", err)
	}
	return true, nil
}

// tcFound is a filter of ours found in the namespace.
type tcFound struct {
	index int
	name  string // the interface's
	dir   string
	prog  ebpf.ProgramID
}

// scanTC returns our filters on every interface of the namespace that has
// a clsact qdisc, by interface name and direction.
func scanTC(h *netlink.Handle) ([]tcFound, error) {
	qs, err := h.QdiscList(nil)
	if err != nil {
		return nil, fmt.Errorf("listing the qdiscs: %w", err)
	}
	var indexes []int
	for _, q := range qs {
		if q.Type() == "clsact" {
			indexes = append(indexes, q.Attrs().LinkIndex)
		}
	}
	if len(indexes) == 0 {
		return nil, nil
	}
	links, err := h.LinkList()
	if err != nil {
		return nil, fmt.Errorf("listing the links: %w", err)
	}
	names := map[int]string{}
	for _, l := range links {
		names[l.Attrs().Index] = l.Attrs().Name
	}
	var out []tcFound
	for _, index := range indexes {
		slots, err := readSlots(h, index)
		if err != nil {
			return nil, err
		}
		for i, s := range slots {
			if s.ours {
				out = append(out, tcFound{index: index, name: names[index], dir: tcxDirs[i], prog: s.prog})
			}
		}
	}
	slices.SortFunc(out, func(a, b tcFound) int {
		return cmp.Or(cmp.Compare(a.name, b.name), cmp.Compare(a.dir, b.dir))
	})
	return out, nil
}

// tcScan is scanTC inside the namespace.
func (p *Proxy) tcScan() (found []tcFound, err error) {
	err = p.withTC(func(h *netlink.Handle) error {
		found, err = scanTC(h)
		return err
	})
	return found, err
}

// tcStrays returns the filters of found (ours) that the sweep removes: on
// an interface the programs are not to be on (no wanted interface has its
// index), and, in TCX mode, on one the programs are attached to with TCX
// (a Proxy in tc mode left it), but not on one whose TCX attachment failed
// (it still translates). With planned, Plan's guess: after the pass every
// wanted interface is attached (in TCX mode, with TCX).
func (p *Proxy) tcStrays(found []tcFound, planned bool) []tcFound {
	k := p.k
	wanted := make(map[int]string, len(p.links))
	for name, l := range p.links {
		wanted[l.index] = name
	}
	var out []tcFound
	for _, f := range found {
		name, ok := wanted[f.index]
		if ok {
			if k.at.mode == AttachTC {
				continue
			}
			if a, attached := k.attached[name]; !planned && (!attached || a.tc || a.at.index != f.index) {
				continue
			}
		}
		out = append(out, f)
	}
	return out
}

// cleanupTC removes our filters from every interface of the namespace
// (and each clsact qdisc left empty), whatever the attach mode, for
// Cleanup. A namespace that cannot be entered for tc (kernelfake) has
// none; a PinDir that does not exist means no Proxy ran here.
func (p *Proxy) cleanupTC() []error {
	if _, err := os.Stat(p.o.PinDir); err != nil {
		return nil
	}
	var errs []error
	err := p.withTC(func(h *netlink.Handle) error {
		found, err := scanTC(h)
		if err != nil {
			return err
		}
		for _, f := range found {
			if _, err := deleteTC(h, f.index, f.dir); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", tcText(f.name, f.dir, ""), err))
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, kernel.ErrNotSupported) {
		errs = append(errs, fmt.Errorf("tc filters: %w", err))
	}
	return errs
}
