//go:build linux

package proxy

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/nodeplane/nodeplane/dataplane"
)

// kindAttach is the kind of an attachment in the Proxy's Plan and State:
// a program on one direction of an interface (TCX, or a classic tc filter:
// tcText) or on a hook of Options.Cgroup.
const kindAttach dataplane.ObjectKind = "attach"

// kindMaglevSlot is the kind of a Maglev table entry in the Proxy's Plan
// and State ("key → value" in hex, as maps.Sync says entries): its key has
// the size of a backend entry's, the kind tells them apart.
const kindMaglevSlot dataplane.ObjectKind = "maglev-slot"

// relabel gives the writes ws kind.
func relabel(ws []dataplane.Write, kind dataplane.ObjectKind) []dataplane.Write {
	for i := range ws {
		ws[i].Kind = kind
	}
	return ws
}

// tcxText names the attachment of direction dir of interface name, and
// with prog (when not empty) the program it runs: "eth0 ingress
// np_ingress".
func tcxText(name, dir, prog string) string {
	t := name + " " + dir
	if prog != "" {
		t += " " + prog
	}
	return t
}

// cgroupText names the attachment of hook h to the cgroup at path, with
// its program: "cgroup /sys/fs/cgroup/x connect4 np_connect4".
func cgroupText(path string, h cgroupHook) string {
	return "cgroup " + path + " " + h.name + " " + h.prog
}

// tcxProgName is the program's name in the object of direction dir of an
// interface (a host's or a pod's: the same programs, np_host_if tells them
// apart).
func tcxProgName(_ iface, dir string) string {
	if dir == tcxDirs[1] {
		return progEgress
	}
	return progIngress
}

// Plan returns the writes the next Apply would make, and writes nothing.
// It decides with Apply's own code (the services declared, the map
// entries diffed by maps.Sync's Plan, the attachments checked against
// their pins or tc filters) and counts every write a success: the map
// entries ("entry", "key → value" in hex, as maps.Sync.Plan says them) in
// Apply's order — stale frontends deleted, backends written, frontends
// written, unused backends deleted — then the attachments ("attach"): the
// TCX attachments of interfaces gone deleted ("- attach eth1 ingress"),
// those made ("+") or whose pinned attachment gets the program in place
// ("~": it runs another program, found so after a resync), the stray pins
// the sweep detaches; in classic tc mode the same for the filters ("+
// attach eth1 ingress np_ingress (tc)", which makes the clsact qdisc
// when missing), each interface's followed by the TCX pins it replaces;
// the tc filters the sweep removes (of interfaces not attached to, or
// attached with TCX); and the cgroup hooks (Options.Cgroup) likewise.
//
// Two things an Apply does are not in it: a service that waits for room
// that the Plan's deletions make is admitted and written by the Apply
// after them (its second round), and a backend write the kernel refuses
// caps its frontend (both only when writes fail or the maps are full).
// Plan declares the services sent since the last Apply, as Apply would
// (so those refused count as failed in the Plan's pass, and as waiting in
// the Apply's); it reads the maps and the pins when Apply would, and that
// read serves the Apply.
//
// It needs the maps, which the first Apply opens (or creates) and the
// programs it loads: before it, Plan fails with ErrNotApplied. It
// implements dataplane.Planner. A nil ctx is context.Background().
func (p *Proxy) Plan(ctx context.Context) (dataplane.Plan, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	pl := dataplane.Plan{Driver: p.o.Name}
	if err := p.prepareView(ctx); err != nil {
		return pl, err
	}
	k := p.k
	fe, err := k.feSync.Plan(ctx)
	if err != nil {
		return pl, fmt.Errorf("%s: %w", p.o.Name, err)
	}
	be, err := k.beSync.Plan(ctx)
	if err != nil {
		return pl, fmt.Errorf("%s: %w", p.o.Name, err)
	}
	src, err := k.srcSync.Plan(ctx)
	if err != nil {
		return pl, fmt.Errorf("%s: %w", p.o.Name, err)
	}
	mg, err := k.mgSync.Plan(ctx)
	if err != nil {
		return pl, fmt.Errorf("%s: %w", p.o.Name, err)
	}
	feUpd, feDel := splitDeletes(fe.Writes)
	beUpd, beDel := splitDeletes(be.Writes)
	srcUpd, srcDel := splitDeletes(src.Writes)
	mgUpd, mgDel := splitDeletes(relabel(mg.Writes, kindMaglevSlot))
	for _, ws := range [][]dataplane.Write{feDel, beUpd, srcUpd, mgUpd, feUpd, beDel, srcDel, mgDel, p.planAttachments()} {
		pl.Writes = append(pl.Writes, ws...)
	}
	return pl, nil
}

// prepareView is what Plan and State do first: fail with ErrNotApplied
// before the first Apply, begin a pass of the ledgers, prepare as Apply
// does, and declare the full value of the capped frontends again (uncap),
// as Apply's map writes begin with.
func (p *Proxy) prepareView(ctx context.Context) error {
	if p.k == nil {
		return fmt.Errorf("%s: %w", p.o.Name, ErrNotApplied)
	}
	p.failed.Begin()
	p.refused.Begin()
	if err := p.prepare(ctx); err != nil {
		return err
	}
	p.uncap()
	return nil
}

// splitDeletes splits a maps.Sync Plan's writes into its updates and its
// deletes, each in the Plan's order.
func splitDeletes(ws []dataplane.Write) (upd, del []dataplane.Write) {
	for _, w := range ws {
		if w.Op == dataplane.WriteDelete {
			del = append(del, w)
		} else {
			upd = append(upd, w)
		}
	}
	return upd, del
}

// planAttachments returns the attachment writes of the next attachAll and
// attachCgroup, decided as they decide (attachMode, staleAttachments,
// unattached, pinned, tcDecide, strayPins, tcStrays), without writing.
func (p *Proxy) planAttachments() []dataplane.Write {
	k := p.k
	var ws []dataplane.Write
	mode := p.attachMode()
	stale := p.staleAttachments()
	var gone []string
	var tcGone []int // the interfaces whose tc filters the stale attachments take
	for _, name := range stale {
		a := k.attached[name]
		l, wanted := p.links[name]
		if !wanted {
			gone = append(gone, name)
			for _, dir := range tcxDirs {
				if pinnedLink(p.linkPin(name, dir)) {
					ws = append(ws, dataplane.Write{Op: dataplane.WriteDelete, Kind: kindAttach, Object: tcxText(name, dir, "")})
				}
			}
		}
		if a.tc && (!wanted || l.index != a.at.index) {
			tcGone = append(tcGone, a.at.index)
			if slots, err := p.tcRead(a.at.index); err == nil {
				for i, dir := range tcxDirs {
					if slots[i].ours {
						ws = append(ws, dataplane.Write{Op: dataplane.WriteDelete, Kind: kindAttach, Object: tcText(name, dir, "")})
					}
				}
			}
		}
	}
	for _, name := range p.unattached(stale) {
		l := p.links[name]
		if mode == AttachTC {
			ws = append(ws, p.planTC(name, l)...)
			continue
		}
		for _, dir := range tcxDirs {
			prog, _, here := p.tcx(l, dir)
			ws = appendLinkWrite(ws, p.linkPin(name, dir), here, k.progIDs[prog], tcxText(name, dir, tcxProgName(l, dir)))
		}
	}
	if !k.swept {
		files, _ := p.strayPins(gone)
		for _, file := range files {
			if pinnedLink(filepath.Join(p.o.PinDir, linksDir, file)) {
				dir, name, _ := strings.Cut(file, "_")
				ws = append(ws, dataplane.Write{Op: dataplane.WriteDelete, Kind: kindAttach, Object: tcxText(name, dir, "")})
			}
		}
	}
	if !k.at.tcSwept {
		// After this pass every wanted interface is attached (a Plan counts
		// every write a success): in TCX mode, with TCX.
		found, _ := p.tcScan()
		for _, f := range p.tcStrays(found, true) {
			if !slices.Contains(tcGone, f.index) {
				ws = append(ws, dataplane.Write{Op: dataplane.WriteDelete, Kind: kindAttach, Object: tcText(f.name, f.dir, "")})
			}
		}
	}
	if cg := k.cg; cg != nil && !cg.attached() {
		if id, err := cgroupID(cg.path); err == nil {
			for _, h := range cgroupHooks {
				if _, ok := cg.links[h.name]; !ok {
					ws = appendLinkWrite(ws, p.cgroupPin(h.name), h.here(id), cg.progIDs[h.name], cgroupText(cg.path, h))
				}
			}
		}
	}
	return ws
}

// planTC returns the writes attachTC would make for interface name (l):
// each direction's filter made ("+", with the clsact qdisc when missing)
// or its program replaced in place ("~"), up to a direction a foreign
// filter holds (no write, the attachment fails), then the TCX
// attachments pinned for the interface detached.
func (p *Proxy) planTC(name string, l iface) []dataplane.Write {
	slots, err := p.tcRead(l.index)
	if err != nil {
		return nil
	}
	var ws []dataplane.Write
	for i, dir := range tcxDirs {
		prog, _, _ := p.tcx(l, dir)
		w, err := tcDecide(slots[i], p.k.progIDs[prog])
		text := tcText(name, dir, tcxProgName(l, dir))
		switch {
		case err != nil:
			return ws
		case w == linkUpdated:
			ws = append(ws, dataplane.Write{Op: dataplane.WriteReplace, Kind: kindAttach, Object: text, Detail: "program replaced in place"})
		case w == linkAttached:
			ws = append(ws, dataplane.Write{Op: dataplane.WriteAdd, Kind: kindAttach, Object: text})
		}
	}
	for _, dir := range tcxDirs {
		if pinnedLink(p.linkPin(name, dir)) {
			ws = append(ws, dataplane.Write{Op: dataplane.WriteDelete, Kind: kindAttach, Object: tcxText(name, dir, "")})
		}
	}
	return ws
}

// appendLinkWrite appends the write pinOrAttach would make for the
// attachment pinned at pin (see pinned), named text: none when it is kept,
// a replace when its program is replaced in place, an add when it is made.
func appendLinkWrite(ws []dataplane.Write, pin string, here func(*link.Info) bool, progID ebpf.ProgramID, text string) []dataplane.Write {
	switch w, elsewhere := pinDecision(pin, here, progID); w {
	case linkUpdated:
		return append(ws, dataplane.Write{Op: dataplane.WriteReplace, Kind: kindAttach, Object: text, Detail: "program replaced in place"})
	case linkAttached:
		w := dataplane.Write{Op: dataplane.WriteAdd, Kind: kindAttach, Object: text}
		if elsewhere {
			w.Detail = "the attachment pinned there is elsewhere: detached"
		}
		return append(ws, w)
	}
	return ws
}

// pinDecision is pinned's decision for the attachment pinned at pin, with
// whether an attachment pinned there is elsewhere; it keeps nothing open.
func pinDecision(pin string, here func(*link.Info) bool, progID ebpf.ProgramID) (w linkWrite, elsewhere bool) {
	old, w := pinned(pin, here, progID)
	if old != nil {
		_ = old.Close()
	}
	return w, old != nil && w == linkAttached
}

// addPinState adds to st the attachment pinned at pin (named text, and
// name in a Drift) that the Proxy does not hold open (it checks its pins
// again after a resync): owned when it is there, drift unless it runs the
// program (progID) where it should (here).
func addPinState(st *dataplane.State, pin string, here func(*link.Info) bool, progID ebpf.ProgramID, name, text string) {
	switch w, elsewhere := pinDecision(pin, here, progID); {
	case w == linkKept:
		st.Owned = append(st.Owned, dataplane.Object{Kind: kindAttach, Text: text})
	case w == linkUpdated:
		st.Owned = append(st.Owned, dataplane.Object{Kind: kindAttach, Text: name + " (another program)"})
		st.Drift = append(st.Drift, dataplane.Drift{Kind: kindAttach, Name: name, Want: text, Have: name + " (another program)"})
	case elsewhere:
		st.Drift = append(st.Drift, dataplane.Drift{Kind: kindAttach, Name: name, Want: text, Have: name + " (pinned elsewhere)"})
	default:
		st.Drift = append(st.Drift, dataplane.Drift{Kind: kindAttach, Name: name, Want: text})
	}
}

// addTCState adds to st the classic tc filter of one direction of an
// interface the Proxy has not attached (yet, or since a resync), as slot
// says it (read with the error err), named text, and name in a Drift:
// owned when it is ours and runs the program (progID), drift unless.
func addTCState(st *dataplane.State, slot tcSlot, err error, progID ebpf.ProgramID, name, text string) {
	if err != nil {
		st.Drift = append(st.Drift, dataplane.Drift{Kind: kindAttach, Name: name, Want: text, Have: "unknown: " + err.Error()})
		return
	}
	switch w, err := tcDecide(slot, progID); {
	case err != nil:
		st.Drift = append(st.Drift, dataplane.Drift{Kind: kindAttach, Name: name, Want: text, Have: fmt.Sprintf("%s (foreign filter %q)", name, slot.name)})
	case w == linkKept:
		st.Owned = append(st.Owned, dataplane.Object{Kind: kindAttach, Text: text})
	case w == linkUpdated:
		st.Owned = append(st.Owned, dataplane.Object{Kind: kindAttach, Text: name + " (another program)"})
		st.Drift = append(st.Drift, dataplane.Drift{Kind: kindAttach, Name: name, Want: text, Have: name + " (another program)"})
	default:
		st.Drift = append(st.Drift, dataplane.Drift{Kind: kindAttach, Name: name, Want: text})
	}
}

// text names a's attachment of direction dir of interface name, with prog
// (when not empty): tcxText's, or tcText's for classic tc.
func (a *attachment) text(name, dir, prog string) string {
	if a.tc {
		return tcText(name, dir, prog)
	}
	return tcxText(name, dir, prog)
}

// pinnedLink reports whether an attachment is pinned at pin: one that
// detachPinned detaches.
func pinnedLink(pin string) bool {
	l, err := link.LoadPinnedLink(pin, nil)
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

// State returns what the Proxy holds in the kernel: the map entries
// ("entry", as maps.Sync.State says them; "maglev-slot" for the Maglev
// tables') and the attachments
// ("attach": "eth0 ingress np_ingress", "eth0 ingress
// np_ingress (tc)" for a classic tc filter, "cgroup <path> connect4
// np_connect4"); the drift: the entries that differ from the desired ones
// and the wanted interfaces and cgroup hooks the programs are not attached
// to; and what fails: the entries (the maps' ledgers), the attachments and
// the services that wait (the Proxy's ledgers). Like Plan, it declares the
// services sent since the last Apply and reads the maps when Apply would,
// and the pins (or tc filters) of the attachments it does not hold (after
// a resync it checks them again): one that runs its program where it
// should is owned. It writes nothing, and fails with ErrNotApplied before the first
// Apply.
// It implements dataplane.Stater. A nil ctx is context.Background().
func (p *Proxy) State(ctx context.Context) (dataplane.State, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	st := dataplane.State{Driver: p.o.Name}
	if err := p.prepareView(ctx); err != nil {
		return st, err
	}
	k := p.k
	for _, s := range []interface {
		State(context.Context) (dataplane.State, error)
	}{k.feSync, k.beSync, k.srcSync, k.mgSync} {
		ms, err := s.State(ctx)
		if err != nil {
			return st, fmt.Errorf("%s: %w", p.o.Name, err)
		}
		if s == k.mgSync {
			for i := range ms.Owned {
				ms.Owned[i].Kind = kindMaglevSlot
			}
			for i := range ms.Drift {
				ms.Drift[i].Kind = kindMaglevSlot
			}
			for _, f := range ms.Failing {
				f.Kind = kindMaglevSlot
			}
		}
		st.Owned = append(st.Owned, ms.Owned...)
		st.Drift = append(st.Drift, ms.Drift...)
		st.Failing = append(st.Failing, ms.Failing...)
	}
	mode := p.attachMode()
	stale := p.staleAttachments()
	for name, a := range k.attached {
		for _, dir := range tcxDirs {
			st.Owned = append(st.Owned, dataplane.Object{Kind: kindAttach, Text: a.text(name, dir, tcxProgName(a.at, dir))})
		}
	}
	for _, name := range stale {
		if _, ok := p.links[name]; !ok {
			a := k.attached[name]
			for _, dir := range tcxDirs {
				st.Drift = append(st.Drift, dataplane.Drift{Kind: kindAttach, Name: a.text(name, dir, ""), Have: a.text(name, dir, tcxProgName(a.at, dir))})
			}
		}
	}
	for _, name := range p.unattached(stale) {
		l := p.links[name]
		var slots [2]tcSlot
		var slotsErr error
		if mode == AttachTC {
			slots, slotsErr = p.tcRead(l.index)
		}
		for i, dir := range tcxDirs {
			want := tcxText(name, dir, tcxProgName(l, dir))
			if mode == AttachTC {
				want = tcText(name, dir, tcxProgName(l, dir))
			}
			if a, ok := k.attached[name]; ok { // to another index
				st.Drift = append(st.Drift, dataplane.Drift{Kind: kindAttach, Name: a.text(name, dir, ""),
					Want: want + fmt.Sprintf(" (index %d)", l.index), Have: a.text(name, dir, tcxProgName(a.at, dir)) + fmt.Sprintf(" (index %d)", a.at.index)})
				continue
			}
			prog, _, here := p.tcx(l, dir)
			if mode == AttachTC {
				addTCState(&st, slots[i], slotsErr, k.progIDs[prog], tcText(name, dir, ""), want)
				continue
			}
			addPinState(&st, p.linkPin(name, dir), here, k.progIDs[prog], tcxText(name, dir, ""), want)
		}
	}
	if cg := k.cg; cg != nil {
		id, idErr := cgroupID(cg.path)
		for _, h := range cgroupHooks {
			t, name := cgroupText(cg.path, h), "cgroup "+cg.path+" "+h.name
			_, ok := cg.links[h.name]
			switch {
			case ok:
				st.Owned = append(st.Owned, dataplane.Object{Kind: kindAttach, Text: t})
			case idErr != nil:
				st.Drift = append(st.Drift, dataplane.Drift{Kind: kindAttach, Name: name, Want: t})
			default:
				addPinState(&st, p.cgroupPin(h.name), h.here(id), cg.progIDs[h.name], name, t)
			}
		}
	}
	st.Failing = append(st.Failing, p.failed.Errors()...)
	st.Failing = append(st.Failing, p.refused.Errors()...)
	dataplane.SortState(&st)
	return st, nil
}

var (
	_ dataplane.Planner = (*Proxy)(nil)
	_ dataplane.Stater  = (*Proxy)(nil)
)
