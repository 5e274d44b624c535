//go:build linux

package proxy

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/ifname"
	"github.com/nodeplane/nodeplane/kernel"
)

// attachment is the programs' attachment to one interface, and the
// interface as it was when it was made: its two TCX links, or (tc) its two
// classic tc filters, which hold no file descriptor.
type attachment struct {
	at      iface
	ingress link.Link
	egress  link.Link
	tc      bool
}

func (a *attachment) close() {
	for _, l := range []link.Link{a.ingress, a.egress} {
		if l != nil {
			_ = l.Close()
		}
	}
}

// linkPin is where the attachment of one direction of interface name is
// pinned.
func (p *Proxy) linkPin(name, dir string) string {
	return filepath.Join(p.o.PinDir, linksDir, dir+"_"+name)
}

// recheckAttachments forgets the attachments so the next attachAll checks
// each against its pin (or its tc filters) and the interface's index
// again, and sweeps the namespace's tc filters again.
func (p *Proxy) recheckAttachments() {
	for name, a := range p.k.attached {
		a.close()
		delete(p.k.attached, name)
	}
	p.k.at.tcSwept = false
	p.k.cg.forget()
}

// attachAll attaches the programs to every wanted interface that exists
// and detaches them from the ones that went away. One interface's failure
// does not hold back the others: it is an object of the Proxy's ledger,
// tried again at every Apply. The attach mode is decided first
// (attachMode); after the attachments, the stray TCX pins and (once, and
// again after a resync) the stray tc filters are removed.
func (p *Proxy) attachAll() {
	k := p.k
	p.attachMode()
	stale := p.staleAttachments()
	for _, name := range stale {
		a := k.attached[name]
		a.close()
		delete(k.attached, name)
		l, wanted := p.links[name]
		if !wanted {
			p.unpin(name)
		}
		if a.tc && (!wanted || l.index != a.at.index) {
			p.tcDetach(a.at.index)
		}
	}
	for _, name := range p.unattached(stale) {
		l := p.links[name]
		a, err := p.attach(name, l)
		if err != nil {
			p.failed.Fail(ifaceKey(name), &dataplane.ObjectError{Driver: "proxy", Op: "attach", Kind: "interface", Name: name,
				Reason: ErrAttach, Err: err})
			continue
		}
		p.failed.Forget(ifaceKey(name))
		k.attached[name] = a
	}
	if !k.swept {
		if files, err := p.strayPins(nil); err == nil {
			for _, file := range files {
				p.detachPin(filepath.Join(p.o.PinDir, linksDir, file))
			}
			k.swept = true
		}
	}
	if !k.at.tcSwept {
		if found, err := p.tcScan(); err == nil {
			for _, f := range p.tcStrays(found, false) {
				p.tcDetachOne(f.index, f.dir)
			}
			k.at.tcSwept = true
		}
	}
	p.failed.Retain(func(key string) bool {
		name, ok := strings.CutPrefix(key, ifacePrefix)
		_, wanted := p.links[name]
		return !ok || wanted
	})
	p.sweepInterfaces()
}

// maxInterfaces is how many interfaces np_ifs holds.
const maxInterfaces = 4096

// The kinds of interface np_ifs holds (NP_IF_* of c/nat.c).
const (
	ifHost uint32 = 1 // what arrives here comes from outside the node
	ifPod  uint32 = 2 // a pod's (Options.LocalRedirect may send packets straight to it)
)

// ifKind is interface l's kind in np_ifs.
func ifKind(l iface) uint32 {
	if l.host {
		return ifHost
	}
	return ifPod
}

// markInterface writes interface l's kind into np_ifs before the programs
// are attached to it: np_ingress treats what arrives on a host interface
// as traffic from outside the node, and anything else as a pod's.
func (p *Proxy) markInterface(l iface) error {
	key, kind := uint32(l.index), ifKind(l)
	var v uint32
	if p.k.ifs.Lookup(key, &v) == nil && v == kind {
		return nil
	}
	if err := p.k.ifs.Put(key, kind); err != nil {
		return fmt.Errorf("%s: %w", ifsMapName, err)
	}
	return nil
}

// sweepInterfaces removes from np_ifs the indexes of no wanted interface
// (gone, or back with another index), when the wanted interfaces changed
// since it last did (or a resync asks). A failure leaves them for the next
// Apply; an index that another wanted interface got is rewritten by its
// attachment (markInterface).
func (p *Proxy) sweepInterfaces() {
	if !p.linksChanged && p.k.ifsSwept {
		return
	}
	wanted := map[uint32]bool{}
	for _, l := range p.links {
		wanted[uint32(l.index)] = true
	}
	var (
		key, v uint32
		stale  []uint32
	)
	it := p.k.ifs.Iterate()
	for it.Next(&key, &v) {
		if !wanted[key] {
			stale = append(stale, key)
		}
	}
	failed := it.Err() != nil // swept again at the next Apply
	for _, key := range stale {
		if err := p.k.ifs.Delete(key); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			failed = true
		}
	}
	p.linksChanged, p.k.ifsSwept = failed, !failed
}

// staleAttachments returns the interfaces the programs are attached to
// whose attachment goes: the interface is gone or no longer wanted, or it
// came back with another index (or as another kind). Sorted.
func (p *Proxy) staleAttachments() []string {
	var out []string
	for name, a := range p.k.attached {
		if l, ok := p.links[name]; !ok || l != a.at {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// unattached returns the wanted interfaces the programs are to be attached
// to: those not attached, and those of stale (staleAttachments) that are
// still wanted. Sorted.
func (p *Proxy) unattached(stale []string) []string {
	var out []string
	for name := range p.links {
		if _, ok := p.k.attached[name]; !ok || slices.Contains(stale, name) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// strayPins returns the files in linksDir that are TCX attachment pins
// (tcxPinInterface) of interfaces that are not wanted (renamed, gone while
// no agent ran, or no longer matching the options), except those of the
// interfaces in skip: the sweep detaches them. Cgroup attachments' pins
// and files not ours are left out. Sorted.
func (p *Proxy) strayPins(skip []string) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(p.o.PinDir, linksDir))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		name, ok := tcxPinInterface(e.Name())
		if !ok {
			continue // a cgroup attachment's (attachCgroup) or not ours
		}
		if _, ok := p.links[name]; !ok && !slices.Contains(skip, name) {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// ifacePrefix starts the ledger key of an interface's attachment.
const ifacePrefix = "interface "

// ifaceKey is the ledger key of interface name's attachment.
func ifaceKey(name string) string { return ifacePrefix + name }

// tcxPinInterface returns the interface whose TCX attachment file, in
// linksDir, is pinned there (ingress_<name> or egress_<name>, name a valid
// interface name). ok is false for any other file: those are not ours.
func tcxPinInterface(file string) (name string, ok bool) {
	dir, name, _ := strings.Cut(file, "_")
	if (dir != "ingress" && dir != "egress") || ifname.Valid(name) != nil {
		return "", false
	}
	return name, true
}

// tcxDirs are the directions of an interface's attachments, as their pins
// and Plan name them.
var tcxDirs = [...]string{"ingress", "egress"}

// unpin detaches the programs from interface name and removes their pins.
func (p *Proxy) unpin(name string) {
	for _, dir := range tcxDirs {
		p.detachPin(p.linkPin(name, dir))
	}
}

// detachPin detaches the TCX attachment pinned at pin (detachPinned) and
// counts the write when there was one.
func (p *Proxy) detachPin(pin string) {
	if found, _ := detachPinned(pin); found {
		p.k.linkWrites++
	}
}

// detachPinned detaches the attachment pinned at pin and removes the pin.
// Removing the pin alone is not enough: the kernel detaches the program
// only when it frees the pin's inode, some time after the removal. A pin
// that is not an attachment is removed all the same; a missing pin is no
// error. found says whether an attachment was pinned there.
func detachPinned(pin string) (found bool, err error) {
	l, err := link.LoadPinnedLink(pin, nil)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		if err := os.Remove(pin); err != nil && !errors.Is(err, os.ErrNotExist) {
			return false, err
		}
		return false, nil
	}
	defer l.Close()
	return true, detach(l)
}

// detach detaches l from where it is attached, now, and removes its pin.
// A kernel that cannot detach a link leaves it to the release of its last
// reference (the caller's Close, once the pin is gone).
func detach(l link.Link) error {
	err := l.Detach()
	if errors.Is(err, ebpf.ErrNotSupported) {
		err = nil
	}
	if err != nil {
		err = fmt.Errorf("detaching: %w", err)
	}
	return errors.Join(err, l.Unpin())
}

// attach attaches the ingress and egress programs to interface name, in
// the attach mode (classic tc: attachTC), reusing pinned attachments on
// the same interface (their program is replaced in place, so traffic
// never passes untranslated).
func (p *Proxy) attach(name string, l iface) (*attachment, error) {
	// The programs read every packet from an Ethernet header at its start:
	// on a device without one they would translate nothing.
	if l.encap != "" && l.encap != kernel.EncapEthernet {
		return nil, fmt.Errorf("not an Ethernet device (link type %q): the programs need Ethernet headers", l.encap)
	}
	if err := p.markInterface(l); err != nil {
		return nil, err
	}
	if p.attachMode() == AttachTC {
		return p.attachTC(name, l)
	}
	a := &attachment{at: l}
	var err error
	if a.ingress, err = p.attachOne(name, l, tcxDirs[0]); err != nil {
		return nil, err
	}
	if a.egress, err = p.attachOne(name, l, tcxDirs[1]); err != nil {
		a.close()
		return nil, err
	}
	return a, nil
}

// tcx returns what direction dir ("ingress" or "egress") of interface l
// runs: the program, where it is attached, and how to tell an attachment
// that is there.
func (p *Proxy) tcx(l iface, dir string) (*ebpf.Program, ebpf.AttachType, func(*link.Info) bool) {
	k := p.k
	prog, typ := k.progs[progEgress], ebpf.AttachTCXEgress
	if dir == tcxDirs[0] {
		prog, typ = k.progs[progIngress], ebpf.AttachTCXIngress
	}
	here := func(info *link.Info) bool {
		tcx := info.TCX()
		return tcx != nil && int(tcx.Ifindex) == l.index && ebpf.AttachType(tcx.AttachType) == typ
	}
	return prog, typ, here
}

// attachOne attaches the program of direction dir to interface name (l)
// through pinOrAttach.
func (p *Proxy) attachOne(name string, l iface, dir string) (link.Link, error) {
	prog, typ, here := p.tcx(l, dir)
	ln, w, err := pinOrAttach(p.linkPin(name, dir), here, prog, p.k.progIDs[prog], func() (ln link.Link, err error) {
		err = p.o.Kernel.Do(func() error {
			ln, err = link.AttachTCX(link.TCXOptions{Interface: l.index, Program: prog, Attach: typ})
			return err
		})
		if errors.Is(err, ebpf.ErrNotSupported) {
			err = unsupported(fmt.Errorf("TCX: %w", err))
		}
		return ln, err
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	if w != linkKept {
		p.k.linkWrites++
	}
	return ln, nil
}

// linkWrite says what pinOrAttach wrote.
type linkWrite int

const (
	linkKept     linkWrite = iota // the pinned attachment already ran the program
	linkUpdated                   // the pinned attachment's program was replaced
	linkAttached                  // a new attachment was made and pinned
)

// pinOrAttach takes over the attachment pinned at pin when here says it is
// attached where it should be: it is kept when it runs prog already (whose
// ID is progID) and otherwise gets prog in place, so traffic never passes
// untranslated in between. Anything else pinned there is detached, and
// attach makes a new attachment, which is pinned at pin. The TCX
// attachments (attachOne) and the cgroup ones (attachCgroupOne) both use
// it.
func pinOrAttach(pin string, here func(*link.Info) bool, prog *ebpf.Program, progID ebpf.ProgramID,
	attach func() (link.Link, error)) (link.Link, linkWrite, error) {
	old, w := pinned(pin, here, progID)
	switch {
	case w == linkKept:
		return old, linkKept, nil // ours, already running this program
	case w == linkUpdated && old.Update(prog) == nil:
		return old, linkUpdated, nil
	case old != nil:
		// Elsewhere (the interface or Options.Cgroup changed) or not
		// updatable: detach it.
		_ = detach(old)
		_ = old.Close()
	default:
		_ = os.Remove(pin) // not an attachment, or nothing
	}
	l, err := attach()
	if err != nil {
		return nil, 0, err
	}
	if err := l.Pin(pin); err != nil {
		_ = l.Close()
		return nil, 0, fmt.Errorf("pinning the attachment: %w", err)
	}
	return l, linkAttached, nil
}

// pinned is pinOrAttach's decision, which Plan makes too: it returns the
// attachment pinned at pin, if any (the caller closes it), and what
// pinOrAttach writes for it: linkKept when here says it is where it should
// be and it runs the program whose ID is progID, linkUpdated when it is
// where it should be with another program (replaced in place), and
// linkAttached when nothing is pinned there or what is, is elsewhere (it is
// detached first).
func pinned(pin string, here func(*link.Info) bool, progID ebpf.ProgramID) (link.Link, linkWrite) {
	old, err := link.LoadPinnedLink(pin, nil)
	if err != nil {
		return nil, linkAttached
	}
	if info, err := old.Info(); err == nil && here(info) {
		if info.Program == progID {
			return old, linkKept
		}
		return old, linkUpdated
	}
	return old, linkAttached
}
