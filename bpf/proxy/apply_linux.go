// Size: everything the Proxy does to the kernel (loading its programs, writing its maps, TCX attachments and their pins), in the order Apply runs it.

//go:build linux

package proxy

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/nodeplane/nodeplane/bpf/maps"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/idalloc"
)

// Map names, pinned in Options.PinDir; the attachments are pinned in its
// linksDir.
const (
	feMapName    = "np_fe"
	beMapName    = "np_be"
	ctMapName    = "np_ct"
	affMapName   = "np_aff"
	svcStatsName = "np_svc_stats"
	srcMapName   = "np_src"
	mgMapName    = "np_maglev"
	statsMapName = "np_stats"
	ifsMapName   = "np_ifs"
	linksDir     = "links"
)

// The programs' names in the object.
const (
	progIngress = "np_ingress"
	progEgress  = "np_egress"
)

// kstate is the kernel side of a Proxy: the maps, the loaded programs and
// the attachments.
type kstate struct {
	fe, be, ct *ebpf.Map
	counters   *ebpf.Map // np_stats, the programs' counters
	aff        *ebpf.Map // np_aff, the session affinities
	svcStats   *ebpf.Map // np_svc_stats, the per-service counters
	ifs        *ebpf.Map // np_ifs, the kinds of the interfaces the programs are on (attach_linux.go)
	feSync     *maps.Sync[feKey, feVal]
	beSync     *maps.Sync[beKey, beVal]
	src        *ebpf.Map // np_src, the source ranges
	srcSync    *maps.Sync[srcKey, srcVal]
	mg         *ebpf.Map // np_maglev, the Maglev tables
	mgSync     *maps.Sync[mgKey, beVal]
	progs      map[string]*ebpf.Program
	progIDs    map[*ebpf.Program]ebpf.ProgramID
	linkWrites int // TCX attachments made, replaced or detached
	ids        *idalloc.IndexAllocator
	adopted    map[feKey]uint32 // service IDs found in the frontend map at start
	adoptedBE  map[beKey]beVal  // the backends found in the backend map at start
	adoptedFEs map[uint32]int   // how many frontends each adopted ID had
	adoptedOK  bool
	unclaimed  map[uint32]bool // adopted IDs no service has claimed yet
	// lastID is the service ID handed out last (grabID), lastIDSaved the
	// one np_svc_stats holds under key 0 (saveLastID).
	lastID, lastIDSaved uint32
	statsSweepDue       bool // a resync came: sweepServiceStats at the next Apply
	// capped are the frontends written with fewer backends than they have,
	// because the writes of the others failed, with their full value.
	capped map[feKey]feVal

	attached map[string]*attachment // by interface name
	swept    bool                   // stale attachment pins removed
	ifsSwept bool                   // np_ifs swept once (sweepInterfaces)
	at       attachState            // the attach mode and the classic tc sweep (tc_linux.go)

	cg *cgroupState // the connect-time programs (cgroup_linux.go); nil without Options.Cgroup

	// loading is the programs' load under way (the verifier's work, which
	// the first Apply overlaps with its map writes); nil once installed.
	loading *progLoad
}

// progLoad is a load of the programs on a goroutine of its own: the tc
// programs with their IDs, and the connect-time programs. Its results are
// installed in the kstate by waitPrograms, under the Proxy's lock.
type progLoad struct {
	done    chan struct{}
	progs   map[string]*ebpf.Program
	progIDs map[*ebpf.Program]ebpf.ProgramID
	cg      *cgroupState
	err     error
}

// startPrograms starts loading the programs on k's maps.
func (p *Proxy) startPrograms(k *kstate) {
	l := &progLoad{done: make(chan struct{})}
	k.loading = l
	go func() {
		defer close(l.done)
		l.err = p.loadPrograms(k, l)
	}()
}

// waitPrograms waits for the load under way, if any, and installs its
// programs; a load that failed is forgotten (the next Apply starts
// another) and its error returned.
func (k *kstate) waitPrograms() error {
	l := k.loading
	if l == nil {
		return nil
	}
	<-l.done
	k.loading = nil
	if l.err != nil {
		return l.err
	}
	k.progs, k.progIDs, k.cg = l.progs, l.progIDs, l.cg
	return nil
}

// loadPrograms loads the tc programs on k's maps, and the connect-time
// programs, into l. It touches nothing of k but its maps.
func (p *Proxy) loadPrograms(k *kstate, l *progLoad) error {
	var mgSize uint32 // the programs' maglev_size: 0 while the tables are off
	if p.o.Maglev.Enabled {
		mgSize = p.o.Maglev.TableSize
	}
	spec, err := loadNat()
	if err != nil {
		return err
	}
	coll, err := loadOnMaps(spec, map[string]any{"masq_mark": p.o.MasqueradeMark, "masq_mask": p.o.MasqueradeMask,
		"reject_mark": p.o.RejectMark, "reject_mask": p.o.RejectMask, "maglev_size": mgSize,
		"dsr_enabled": boolWord(p.o.DSR), "local_redirect": boolWord(p.o.LocalRedirect)},
		map[string]*ebpf.Map{feMapName: k.fe, beMapName: k.be, ctMapName: k.ct, statsMapName: k.counters, affMapName: k.aff,
			svcStatsName: k.svcStats, srcMapName: k.src, mgMapName: k.mg, ifsMapName: k.ifs})
	if err != nil {
		return err
	}
	defer coll.Close() // the maps are ours (replacements) and the programs are taken out
	progs, ids := map[string]*ebpf.Program{}, map[*ebpf.Program]ebpf.ProgramID{}
	closeAll := func() {
		for _, prog := range progs {
			_ = prog.Close()
		}
	}
	for _, n := range []string{progIngress, progEgress} {
		prog, id, err := takeProgram(coll, n)
		if err != nil {
			closeAll()
			return err
		}
		progs[n], ids[prog] = prog, id
	}
	cg, err := p.openCgroup(k)
	if err != nil {
		closeAll()
		return err
	}
	l.progs, l.progIDs, l.cg = progs, ids, cg
	return nil
}

func (k *kstate) attachedNames() []string {
	names := make([]string, 0, len(k.attached))
	for n := range k.attached {
		names = append(names, n)
	}
	slices.Sort(names)
	if k.cg.attached() {
		names = append(names, "cgroup:"+k.cg.path)
	}
	return names
}

// stats is the kernel side's DriverStats: the map entries (maps.Sync's),
// the attachments of the wanted interfaces (of which there are wanted)
// and the cgroup hooks, with the entries' failures and the writes.
func (k *kstate) stats(wanted int) dataplane.DriverStats {
	st := dataplane.DriverStats{Desired: wanted, InKernel: len(k.attached), Writes: uint64(k.linkWrites)}
	for _, ms := range []dataplane.DriverStats{k.feSync.Stats(), k.beSync.Stats(), k.srcSync.Stats(), k.mgSync.Stats()} {
		st.Desired += ms.Desired
		st.InKernel += ms.InKernel
		st.Failing += ms.Failing
		st.Writes += ms.Writes
	}
	if cg := k.cg; cg != nil {
		st.Desired += len(cgroupHooks)
		st.InKernel += len(cg.links)
		st.Writes += uint64(cg.created + cg.updated)
	}
	return st
}

// open opens (or creates) the pinned maps and loads the program on them.
func (p *Proxy) open() (*kstate, error) {
	k := &kstate{attached: map[string]*attachment{}, adopted: map[feKey]uint32{}, unclaimed: map[uint32]bool{},
		capped: map[feKey]feVal{}}
	fail := func(err error) (*kstate, error) {
		k.close()
		return nil, fmt.Errorf("%w: %w", ErrLoad, err)
	}
	if err := p.makeLinksDir(); err != nil {
		return fail(err)
	}
	// The maps are made (or found pinned) side by side: a large one's
	// making is the kernel zeroing its memory, which two CPUs halve.
	mgEntries := uint32(1) // the tables off: the programs never look
	if p.o.Maglev.Enabled {
		mgEntries = p.o.Maglev.Entries
	}
	opens := []struct {
		m    **ebpf.Map
		spec maps.Spec
	}{
		{&k.fe, maps.Spec{Name: feMapName, Type: ebpf.Hash, KeySize: feKeySize, ValueSize: feValSize, MaxEntries: p.o.Frontends}},
		{&k.be, maps.Spec{Name: beMapName, Type: ebpf.Hash, KeySize: beKeySize, ValueSize: beValSize, MaxEntries: p.o.Backends}},
		{&k.ct, ctSpec(p.o.Connections)},
		{&k.src, maps.Spec{Name: srcMapName, Type: ebpf.LPMTrie, KeySize: srcKeySize, ValueSize: 1,
			MaxEntries: p.o.SourceRanges, Flags: unix.BPF_F_NO_PREALLOC}},
		{&k.mg, maps.Spec{Name: mgMapName, Type: ebpf.Hash, KeySize: mgKeySize, ValueSize: beValSize,
			MaxEntries: mgEntries, Flags: unix.BPF_F_NO_PREALLOC}},
		{&k.aff, maps.Spec{Name: affMapName, Type: ebpf.LRUHash, KeySize: affKeySize, ValueSize: affValSize, MaxEntries: p.o.Affinities}},
		{&k.svcStats, maps.Spec{Name: svcStatsName, Type: ebpf.PerCPUHash, KeySize: 4, ValueSize: svcStatsSize,
			MaxEntries: p.o.Frontends, Flags: unix.BPF_F_NO_PREALLOC}},
		{&k.counters, maps.Spec{Name: statsMapName, Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: statCount}},
		{&k.ifs, maps.Spec{Name: ifsMapName, Type: ebpf.Hash, KeySize: 4, ValueSize: 4, MaxEntries: maxInterfaces,
			Flags: unix.BPF_F_NO_PREALLOC}},
	}
	errs := make([]error, len(opens))
	var wg sync.WaitGroup
	for i, o := range opens {
		wg.Go(func() { *o.m, errs[i] = maps.Open(p.o.PinDir, o.spec) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fail(err)
	}
	var err error
	if k.feSync, err = maps.NewSync[feKey, feVal](k.fe, maps.SyncOptions{Name: p.o.Name + " frontends", Logger: p.log, Clock: p.o.Clock}); err != nil {
		return fail(err)
	}
	if k.beSync, err = maps.NewSync[beKey, beVal](k.be, maps.SyncOptions{Name: p.o.Name + " backends", Logger: p.log, Clock: p.o.Clock}); err != nil {
		return fail(err)
	}
	if k.srcSync, err = maps.NewSync[srcKey, srcVal](k.src, maps.SyncOptions{Name: p.o.Name + " source ranges", Logger: p.log, Clock: p.o.Clock}); err != nil {
		return fail(err)
	}
	if k.mgSync, err = maps.NewSync[mgKey, beVal](k.mg, maps.SyncOptions{Name: p.o.Name + " Maglev tables", Logger: p.log, Clock: p.o.Clock}); err != nil {
		return fail(err)
	}
	// The programs load meanwhile; Apply waits for them before it attaches.
	p.startPrograms(k)
	ids, err := idalloc.NewIndexAllocator(idalloc.IndexOptions{Ranges: []idalloc.Range{{Min: 1, Max: math.MaxUint32 - 1}}, NoDefaultExclusions: true})
	if err != nil {
		return fail(err)
	}
	k.ids = ids
	return k, nil
}

// loadOnMaps loads spec with its load-time variables set to vars and its
// maps replaced by the given ones (the pinned maps, whose sizes come from
// Options, not from the object).
func loadOnMaps(spec *ebpf.CollectionSpec, vars map[string]any, repl map[string]*ebpf.Map) (*ebpf.Collection, error) {
	for name, v := range vars {
		vs, ok := spec.Variables[name]
		if !ok {
			return nil, fmt.Errorf("the object has no variable %s", name)
		}
		if err := vs.Set(v); err != nil {
			return nil, fmt.Errorf("setting %s: %w", name, err)
		}
	}
	for name, m := range repl {
		ms, ok := spec.Maps[name]
		if !ok {
			return nil, fmt.Errorf("the object has no map %s", name)
		}
		ms.MaxEntries = m.MaxEntries()
	}
	coll, err := ebpf.NewCollectionWithOptions(spec, ebpf.CollectionOptions{MapReplacements: repl})
	if errors.Is(err, ebpf.ErrNotSupported) {
		return nil, unsupported(err)
	}
	return coll, err
}

// takeProgram takes program name out of coll, so that closing coll leaves
// it loaded, and returns it with its ID (which tells a pinned attachment
// that already runs it).
func takeProgram(coll *ebpf.Collection, name string) (*ebpf.Program, ebpf.ProgramID, error) {
	prog := coll.Programs[name]
	if prog == nil {
		return nil, 0, fmt.Errorf("the object has no program %s", name)
	}
	delete(coll.Programs, name)
	info, err := prog.Info()
	if err != nil {
		_ = prog.Close()
		return nil, 0, err
	}
	id, ok := info.ID()
	if !ok {
		_ = prog.Close()
		return nil, 0, unsupported(errors.New("the kernel does not report program IDs"))
	}
	return prog, id, nil
}

// close releases the file descriptors; pins keep the maps and attachments.
func (k *kstate) close() {
	if l := k.loading; l != nil {
		<-l.done
		if l.err == nil {
			k.progs, k.cg = l.progs, l.cg
		}
		k.loading = nil
	}
	for _, a := range k.attached {
		a.close()
	}
	k.cg.close()
	for _, prog := range k.progs {
		_ = prog.Close()
	}
	for _, m := range []*ebpf.Map{k.fe, k.be, k.ct, k.counters, k.aff, k.svcStats, k.src, k.mg, k.ifs} {
		if m != nil {
			_ = m.Close()
		}
	}
}

// Apply implements dataplane.Driver: it turns the changed services into
// map entries, admitting each service whole or not at all, and writes the
// difference (stale frontends first, then backends, then new frontends,
// then unused backends, so a frontend never points at a missing backend),
// and keeps the programs attached to the interfaces that exist. When the
// writes free room that a waiting service needs, it is declared and
// written in the same Apply.
func (p *Proxy) Apply(ctx context.Context) (dataplane.ApplyResult, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failed.Begin()
	p.refused.Begin()
	if p.k == nil {
		k, err := p.open()
		if err != nil {
			return dataplane.ApplyResult{}, fmt.Errorf("%s: %w", p.o.Name, err)
		}
		p.k = k
	}
	k := p.k
	if k.progs == nil && k.loading == nil {
		p.startPrograms(k) // the last load failed
	}
	if err := p.prepare(ctx); err != nil {
		return dataplane.ApplyResult{}, err
	}
	if p.linksDirDue {
		if err := p.makeLinksDir(); err != nil {
			return dataplane.ApplyResult{}, fmt.Errorf("%s: %w: %w", p.o.Name, ErrLoad, err)
		}
		p.linksDirDue = false
	}
	feUsed, beUsed, srcUsed, mgUsed := k.feSync.Used(), k.beSync.Used(), k.srcSync.Used(), k.mgSync.Used()
	errs := p.writeMaps(ctx)
	defer p.saveLastID()
	if k.statsSweepDue {
		p.sweepServiceStats()
		k.statsSweepDue = false
	}
	if p.refused.Len() > 0 && (k.feSync.Used() < feUsed || k.beSync.Used() < beUsed || k.srcSync.Used() < srcUsed || k.mgSync.Used() < mgUsed) {
		// The stale entries deleted made room: the waiting services are
		// declared again, and the maps written again with those that fit.
		p.retryWaiting()
		p.declare()
		errs = p.writeMaps(ctx)
	}
	if err := k.waitPrograms(); err != nil {
		// The maps are written; the programs are loaded again by the
		// next Apply, and attached then.
		return dataplane.ApplyResult{}, fmt.Errorf("%s: %w: %w", p.o.Name, ErrLoad, err)
	}
	p.attachAll()
	p.attachCgroup()
	p.warnUnseen()
	return p.result(errs)
}

// prepare is what Apply, Plan and State do before they write or report:
// a resync queued (the maps read again, the attachments checked again,
// the waiting services tried again), the service IDs adopted from the
// frontend map at start, the maps read, and the dirty services declared
// into the desired entries. It writes nothing to the kernel (a Plan that
// runs it leaves the next Apply the writes); the links directory that a
// resync remakes is made by Apply (linksDirDue).
func (p *Proxy) prepare(ctx context.Context) error {
	k := p.k
	if p.resync && k.adoptedOK {
		k.statsSweepDue = true // by Apply (a Plan writes nothing)
	}
	if p.resync {
		p.resync = false
		k.feSync.QueueResync()
		k.beSync.QueueResync()
		k.srcSync.QueueResync()
		k.mgSync.QueueResync()
		k.swept = false
		p.recheckAttachments()
		p.linksDirDue = true
		p.linksChanged = true // np_ifs swept again
		// The maps are read again: a waiting service may fit now.
		p.retryWaiting()
	}
	if !k.adoptedOK {
		cur, err := k.feSync.Kernel(ctx)
		if err != nil {
			return fmt.Errorf("%s: reading the frontends: %w", p.o.Name, err)
		}
		if k.adoptedBE, err = k.beSync.Kernel(ctx); err != nil {
			return fmt.Errorf("%s: reading the backends: %w", p.o.Name, err)
		}
		k.adoptedFEs = make(map[uint32]int)
		k.lastID = k.savedLastID()
		k.lastIDSaved = k.lastID
		// Every ID found is held back until the services that had it claim
		// it (declare releases the rest), so a new service never takes an
		// ID an existing one is about to claim back.
		for key, v := range cur {
			k.adopted[key] = v.SvcID
			k.adoptedFEs[v.SvcID]++
			k.lastID = max(k.lastID, v.SvcID)
			if !k.unclaimed[v.SvcID] && k.ids.Contains(v.SvcID) && k.ids.Reserve(v.SvcID) == nil {
				k.unclaimed[v.SvcID] = true
			}
		}
		k.adoptedOK = true
	}
	// Admission counts what the maps hold: read them first (only the first
	// time and after a resync).
	for _, read := range []func(context.Context) error{k.feSync.Read, k.beSync.Read, k.srcSync.Read, k.mgSync.Read} {
		if err := read(ctx); err != nil {
			return fmt.Errorf("%s: %w", p.o.Name, err)
		}
	}
	p.declare()
	return nil
}

// writeMaps writes the difference between the desired entries and the
// maps, in an order that never lets a frontend point at a missing backend,
// and returns the errors of the steps.
func (p *Proxy) writeMaps(ctx context.Context) []error {
	k := p.k
	var errs []error
	p.uncap()
	bePending := false
	steps := []func(context.Context) error{
		k.feSync.ApplyDeletions,
		func(ctx context.Context) error { err := k.beSync.ApplyUpdates(ctx); bePending = err != nil; return err },
		func(context.Context) error { p.capFrontends(bePending); return nil },
		k.srcSync.ApplyUpdates, // a frontend's ranges before the frontend that checks them
		k.mgSync.ApplyUpdates,  // and its Maglev table
		k.feSync.ApplyUpdates,
		k.beSync.ApplyDeletions,
		k.srcSync.ApplyDeletions,
		k.mgSync.ApplyDeletions,
	}
	for _, step := range steps {
		if err := step(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// result returns the Apply's outcome: a map step's error that is not a
// *dataplane.PartialError (a read failed) fails the driver; otherwise the
// error joins the ledgers' PartialErrors (maps.JoinPartial): the entries
// (the maps' Syncs) and the attachments (the Proxy's failed) with their
// backoff, whose earliest end is the RetryAfter, and the services that
// wait (refused) with none.
func (p *Proxy) result(errs []error) (dataplane.ApplyResult, error) {
	for _, err := range errs {
		var part *dataplane.PartialError
		if !errors.As(err, &part) {
			return dataplane.ApplyResult{}, fmt.Errorf("%s: %w", p.o.Name, errors.Join(errs...))
		}
	}
	var res dataplane.ApplyResult
	for _, after := range []time.Duration{p.failed.RetryAfter(), p.k.feSync.RetryAfter(), p.k.beSync.RetryAfter(), p.k.srcSync.RetryAfter(), p.k.mgSync.RetryAfter()} {
		if after > 0 && (res.RetryAfter == 0 || after < res.RetryAfter) {
			res.RetryAfter = after
		}
	}
	return res, maps.JoinPartial(p.k.feSync.Err(), p.k.beSync.Err(), p.k.srcSync.Err(), p.k.mgSync.Err(), p.failed.Err(), p.refused.Err())
}

// declare turns the dirty services into desired map entries.
func (p *Proxy) declare() {
	if len(p.dirty) == 0 {
		return
	}
	p.reserve()
	if p.declareNames(p.admissionOrder(p.takeDirty())) {
		// A service refused for a conflict or for want of an ID may fit now
		// that another let go of frontends: try those once more.
		p.retryWaiting()
		p.declareNames(p.admissionOrder(p.takeDirty()))
	}
	k := p.k
	for id := range k.unclaimed {
		// IDs found in the map that no service claimed on the first pass.
		k.releaseID(id)
	}
	clear(k.unclaimed)
	k.adoptedBE, k.adoptedFEs = nil, nil // (only the first declare adopts)
}

// reserve makes room in the frontend and backend Syncs, while they are
// empty (an agent's first Apply, a resync), for the entries the dirty
// services declare, counted from the services as given (an upper bound:
// build merges repeated addresses), so that declaring 10,000 services does
// not grow the Syncs' Go maps step by step.
func (p *Proxy) reserve() {
	k := p.k
	if k.feSync.DesiredLen() > 0 && k.beSync.DesiredLen() > 0 {
		return
	}
	fes, bes := 0, 0
	for n := range p.dirty {
		s := p.services[n]
		if s == nil || s.removed {
			continue
		}
		fes += len(s.s.ClusterIPs) + len(s.s.ExternalIPs) + len(s.s.LoadBalancerIPs)
		if s.s.NodePort != 0 {
			fes += len(p.nodeAddrs)
		}
		bes += len(s.s.Backends)
	}
	k.feSync.Reserve(fes)
	k.beSync.Reserve(bes)
}

// retryWaiting makes the waiting services dirty, so the next declare tries
// them again.
func (p *Proxy) retryWaiting() {
	for _, e := range p.refused.Errors() {
		p.dirty[e.Name] = true
	}
}

// takeDirty returns the dirty service names, sorted, and clears them.
func (p *Proxy) takeDirty() []string {
	names := make([]string, 0, len(p.dirty))
	for n := range p.dirty {
		names = append(names, n)
	}
	slices.Sort(names)
	// A new map, not clear: a Go map keeps its size, and ranging over one
	// that once held every service costs as much as all of them.
	p.dirty = make(map[string]bool)
	return names
}

// admissionOrder orders names, sorted, for declaring: the services whose
// entries the maps hold (written by this Proxy, or found there at start:
// served before a restart) first, then the others, each group in name
// order. A service that is served thus keeps its room when a new one is
// declared with it, and a restarted Proxy admits the services its
// predecessor served; the order depends on nothing else. Among the
// services found at start, the ones the maps hold whole (adoptedMatch)
// come before those that merely share a frontend with what the maps
// hold: two services that want one frontend cannot both have been
// served, and the one whose frontends and backends the maps hold is the
// one that was (not the other, whatever their names).
func (p *Proxy) admissionOrder(names []string) []string {
	k := p.k
	rank := make(map[string]int, len(names))
	for _, n := range names {
		s := p.services[n]
		if s == nil || s.removed {
			continue
		}
		switch {
		case len(s.fes) > 0:
			rank[n] = adoptWritten
		case len(k.unclaimed) > 0:
			rank[n] = k.adoptedMatch(build(s.s, p.nodeAddrs))
		}
	}
	slices.SortStableFunc(names, func(a, b string) int { return rank[b] - rank[a] })
	return names
}

// How much of a service the maps hold (admissionOrder): written by this
// Proxy; found at start with its frontends, each family's under one
// service ID that has no other frontend, and that ID's backends exactly;
// the same without the backends; some frontend only; nothing.
const (
	adoptNone = iota
	adoptSomeFrontend
	adoptFrontends
	adoptWhole
	adoptWritten
)

// adoptedMatch says how much of a service whose entries are e the maps
// held at start, among the IDs no service claimed yet.
func (k *kstate) adoptedMatch(e entries) int {
	some := false
	ids := [2]uint32{}
	count := [2]int{}
	exact := true
	for _, f := range e.frontends {
		id, ok := k.adopted[f.key]
		if !ok || !k.unclaimed[id] {
			exact = false
			continue
		}
		some = true
		switch {
		case ids[f.fam] == 0:
			ids[f.fam] = id
		case ids[f.fam] != id:
			exact = false
		}
		count[f.fam]++
	}
	if !some {
		return adoptNone
	}
	if !exact {
		return adoptSomeFrontend
	}
	for fam, id := range ids {
		if id != 0 && k.adoptedFEs[id] != count[fam] {
			return adoptSomeFrontend
		}
	}
	for fam, id := range ids {
		if id == 0 {
			continue
		}
		bes := e.backends[fam]
		if _, extra := k.adoptedBE[beKey{SvcID: id, Ordinal: uint32(len(bes))}]; extra {
			return adoptFrontends
		}
		for i, b := range bes {
			have, ok := k.adoptedBE[beKey{SvcID: id, Ordinal: uint32(i)}]
			if !ok || have.Addr != b.Addr || have.Port != b.Port {
				return adoptFrontends
			}
		}
	}
	return adoptWhole
}

// declareNames re-declares the named services, in that order, and says
// whether any of them let go of a frontend.
func (p *Proxy) declareNames(names []string) (freed bool) {
	for _, n := range names {
		s := p.services[n]
		if s == nil {
			continue
		}
		before := slices.Clone(s.fes)
		p.tally.add(s, -1)
		p.withdraw(n, s)
		if s.removed {
			p.releaseIDs(s)
			delete(p.services, n)
			freed = freed || len(before) > 0
			continue
		}
		p.write(n, s)
		p.tally.add(s, 1)
		for _, f := range before {
			if !slices.Contains(s.fes, f) {
				freed = true
			}
		}
	}
	return freed
}

// uncap declares the full value again of the frontends capFrontends held
// back, so the backends that failed are tried again and, once written,
// counted.
func (p *Proxy) uncap() {
	for f, v := range p.k.capped {
		p.k.feSync.Set(f, v)
	}
	clear(p.k.capped)
}

// capFrontends runs after the backends are written and before the
// frontends: a frontend whose backends were not all written (a write the
// kernel refused although the map had room) is written counting only the
// backends the map holds, from ordinal 0 on, so the program never picks a
// missing one; the others' services are not held back. It only looks
// when some backend write failed (pending).
func (p *Proxy) capFrontends(pending bool) {
	k := p.k
	if !pending {
		return
	}
	for _, s := range p.services {
		for _, f := range s.fes {
			v, ok := k.feSync.Desired(f)
			if !ok {
				continue
			}
			n := uint32(0)
			for ; n < v.Count; n++ {
				bk := beKey{SvcID: v.SvcID, Ordinal: n}
				want, _ := k.beSync.Desired(bk)
				if got, ok := k.beSync.InKernel(bk); !ok || got != want {
					break
				}
			}
			if n < v.Count {
				k.capped[f] = v
				v.Count, v.LocalCount = n, min(v.LocalCount, n)
				k.feSync.Set(f, v)
			}
		}
	}
}

// withdraw removes service s's entries from the desired state.
func (p *Proxy) withdraw(name string, s *svc) {
	for _, f := range s.fes {
		p.k.feSync.Delete(f)
		delete(p.k.capped, f)
		delete(p.owners, f)
	}
	p.refused.Forget(name)
	for _, b := range s.bes {
		p.k.beSync.Delete(b)
	}
	for _, r := range s.srcs {
		p.k.srcSync.Delete(r)
	}
	for _, m := range s.mgs {
		p.k.mgSync.Delete(m)
	}
	s.fes, s.bes, s.srcs, s.mgs = nil, nil, nil, nil
}

// refuse records why service name is not written (reason, one of the
// package's sentinels, detail and the cause err): it is held in the
// refused ledger, counted as failed by this Apply and as waiting by the
// next, with no timed retry, until retryWaiting makes it dirty again.
func (p *Proxy) refuse(name string, reason error, detail string, err error) {
	p.refused.Hold(name, &dataplane.ObjectError{Driver: "proxy", Op: "write", Kind: kindService, Name: name,
		Reason: reason, Detail: detail, Err: err})
}

// write declares service s's entries when all of them can be written:
// none of its frontends is held by another service, it has a service ID
// for each family it has frontends of, and the maps have room for all of
// its entries. Otherwise nothing of it is declared, and it is refused.
func (p *Proxy) write(name string, s *svc) {
	e := build(s.s, p.nodeAddrs)
	for _, f := range e.frontends {
		if o, held := p.owners[f.key]; held && o != name {
			p.refuse(name, ErrFrontendConflict, fmt.Sprintf("%v is service %q's", f.key, o), nil)
			return
		}
	}
	k := p.k
	var ids [2]uint32 // by family; 0 for a family without frontends
	for fam := range 2 {
		var fes []frontend
		for _, f := range e.frontends {
			if f.fam == fam {
				fes = append(fes, f)
			}
		}
		if len(fes) == 0 {
			if id := s.ids[fam]; id != 0 {
				k.releaseID(id)
				s.ids[fam] = 0
			}
			continue
		}
		id, err := p.idFor(s, fam, fes)
		if err != nil {
			p.refuse(name, ErrInvalidService, "no free service ID", err)
			return
		}
		ids[fam] = id
	}
	for fam := range 2 {
		if n := e.localOnly[fam]; n > maxLocalOnly {
			p.refuse(name, ErrInvalidService, fmt.Sprintf("%d local-only backends of one family, more than %d", n, maxLocalOnly), nil)
			return
		}
	}
	tables := p.maglevTables(s.s, e)
	if full := p.room(e, ids, tables); full != "" {
		p.refuse(name, ErrMapFull, full, nil)
		return
	}
	for _, f := range e.frontends {
		flags := f.flags
		if tables[f.fam] != nil { // the programs use it for traffic from outside only
			flags |= feMaglev
		}
		if p.o.DSR && outsideFrontend(s.s, f) {
			flags |= feDSR
		}
		if flags&feSourceRanges != 0 && rangesHoldNode(s.s.SourceRanges, p.nodeAddrs) {
			flags |= feSourceNode
		}
		flags |= e.localOnly[f.fam] << feLocalOnlyShift
		k.feSync.Set(f.key, feVal{SvcID: ids[f.fam], Count: uint32(len(e.backends[f.fam])), LocalCount: e.local[f.fam], Flags: flags, Affinity: e.affinity})
		delete(k.capped, f.key)
		s.fes = append(s.fes, f.key)
		p.owners[f.key] = name
	}
	for fam, id := range ids {
		if id == 0 {
			continue
		}
		for i, b := range e.backends[fam] {
			key := beKey{SvcID: id, Ordinal: uint32(i)}
			k.beSync.Set(key, b)
			s.bes = append(s.bes, key)
		}
		for _, r := range e.sources[fam] {
			r.SvcID = svcID32(id)
			k.srcSync.Set(r, srcVal{1})
			s.srcs = append(s.srcs, r)
		}
		for slot, b := range tables[fam] {
			key := mgKey{SvcID: id, Slot: uint32(slot)}
			k.mgSync.Set(key, b)
			s.mgs = append(s.mgs, key)
		}
	}
}

// room returns "" when the maps have room for all of entries e, of a
// service whose IDs by family are ids, and otherwise says which map lacks
// room. Only the keys the
// maps hold nowhere yet take room (maps.Sync.Holds), and the entries to be
// deleted keep theirs until the end of the Apply (maps.Sync.Used): the
// backends are written before the stale ones are deleted.
func (p *Proxy) room(e entries, ids [2]uint32, tables [2][]beVal) string {
	k := p.k
	// Most of the time every entry fits even if none is held yet: no need
	// to count the ones that are (a lookup each, the most of a large first
	// declaration's time).
	most := [4]int{len(e.frontends)} // frontends, backends, source ranges, Maglev slots
	for fam, id := range ids {
		if id != 0 {
			most[1] += len(e.backends[fam])
			most[2] += len(e.sources[fam])
			most[3] += len(tables[fam])
		}
	}
	if k.feSync.Used()+most[0] <= int(k.fe.MaxEntries()) && k.beSync.Used()+most[1] <= int(k.be.MaxEntries()) &&
		k.srcSync.Used()+most[2] <= int(k.src.MaxEntries()) && k.mgSync.Used()+most[3] <= int(k.mg.MaxEntries()) {
		return ""
	}
	fes, bes := 0, 0
	for _, f := range e.frontends {
		if !k.feSync.Holds(f.key) {
			fes++
		}
	}
	for fam, id := range ids {
		for i := range e.backends[fam] {
			if id != 0 && !k.beSync.Holds(beKey{SvcID: id, Ordinal: uint32(i)}) {
				bes++
			}
		}
	}
	check := func(what, mapName string, capacity uint32, used, need int) string {
		free := max(0, int(capacity)-used)
		if need <= free {
			return ""
		}
		return fmt.Sprintf("the %s map %s (%d entries) has room for %d more, the service needs %d",
			what, mapName, capacity, free, need)
	}
	srcs := 0
	for fam, id := range ids {
		for _, r := range e.sources[fam] {
			r.SvcID = svcID32(id)
			if id != 0 && !k.srcSync.Holds(r) {
				srcs++
			}
		}
	}
	mgs := 0
	for fam, id := range ids {
		for slot := range tables[fam] {
			if id != 0 && !k.mgSync.Holds(mgKey{SvcID: id, Slot: uint32(slot)}) {
				mgs++
			}
		}
	}
	if full := check("Maglev", mgMapName, k.mg.MaxEntries(), k.mgSync.Used(), mgs); full != "" {
		return full
	}
	if full := check("frontend", feMapName, k.fe.MaxEntries(), k.feSync.Used(), fes); full != "" {
		return full
	}
	if full := check("source range", srcMapName, k.src.MaxEntries(), k.srcSync.Used(), srcs); full != "" {
		return full
	}
	return check("backend", beMapName, k.be.MaxEntries(), k.beSync.Used(), bes)
}

// idFor returns the service ID of s for one family: the one it has, the
// one its frontends had in the map before a restart (when no other service
// claimed it first), or a new one.
func (p *Proxy) idFor(s *svc, fam int, fes []frontend) (uint32, error) {
	k := p.k
	if id := s.ids[fam]; id != 0 {
		return id, nil
	}
	for _, f := range fes {
		if id, ok := k.adopted[f.key]; ok && k.unclaimed[id] {
			delete(k.unclaimed, id)
			s.ids[fam] = id
			return id, nil
		}
	}
	id, err := k.grabID()
	if err != nil {
		return 0, err
	}
	s.ids[fam] = id
	return id, nil
}

// maxServiceID is the largest service ID (0 is none, and the key under
// which np_svc_stats keeps the last ID handed out).
const maxServiceID = math.MaxUint32 - 1

// grabID hands out the free service ID that follows the last one handed
// out in the allocator's ranges, wrapping from the last range to the
// first: an ID is not given again until every other has been. A removed service's connections outlive it (their
// entries carry its ID, and the programs count their packets under it),
// so a new service must not take its ID and its traffic.
func (k *kstate) grabID() (uint32, error) {
	if k.ids.Free() == 0 {
		return k.ids.Grab() // the allocator's own error
	}
	ranges := k.ids.Ranges() // sorted, merged
	after := func(id uint32) uint32 {
		for _, r := range ranges {
			if id < r.Min {
				return r.Min
			}
			if id < r.Max {
				return id + 1
			}
		}
		return ranges[0].Min
	}
	// At most one step per ID in use and one per range: a free one exists.
	for id := after(k.lastID); ; id = after(id) {
		if k.ids.Reserve(id) == nil {
			k.lastID = id
			return id, nil
		}
	}
}

// releaseID gives a service ID back and deletes its counters.
func (k *kstate) releaseID(id uint32) {
	_ = k.ids.Release(id)
	_ = k.svcStats.Delete(&id)
}

func (p *Proxy) releaseIDs(s *svc) {
	for fam, id := range s.ids {
		if id != 0 {
			p.k.releaseID(id) // its counters go with it
		}
		s.ids[fam] = 0
	}
}

// savedLastID reads the last ID handed out, as saveLastID left it under key
// 0 of np_svc_stats (Conns on any CPU); 0 when none is there.
func (k *kstate) savedLastID() uint32 {
	var per []svcStats
	zero := uint32(0)
	if k.svcStats.Lookup(&zero, &per) != nil {
		return 0
	}
	last := uint64(0)
	for _, v := range per {
		last = max(last, v.Conns)
	}
	return uint32(min(last, maxServiceID))
}

// saveLastID keeps the last ID handed out in np_svc_stats, where the next
// agent finds it (the programs count no service 0), so that it does not
// hand out again the ID of a service removed before it started. A failed
// write is logged: it risks only that.
func (p *Proxy) saveLastID() {
	k := p.k
	if k.lastID == k.lastIDSaved {
		return
	}
	n, err := ebpf.PossibleCPU()
	if err == nil {
		per := make([]svcStats, n)
		per[0].Conns = uint64(k.lastID)
		zero := uint32(0)
		err = k.svcStats.Put(&zero, per)
	}
	if err != nil {
		p.log.Warn("proxy: saving the last service ID failed", "name", p.o.Name, "err", err)
		return
	}
	k.lastIDSaved = k.lastID
}

// sweepServiceStats deletes the counters of IDs no service holds: the
// programs make an ID's entry again when a connection of a removed
// service outlives it (they count its packets), and nothing else would
// remove it. Run at a resync, not at every Apply.
func (p *Proxy) sweepServiceStats() {
	k := p.k
	live := map[uint32]bool{0: true}
	for id := range k.unclaimed {
		live[id] = true
	}
	for _, s := range p.services {
		for _, id := range s.ids {
			live[id] = true
		}
	}
	// Keys only (NextKey), no values: then the deletes, not to disturb the
	// walk.
	var stale []uint32
	var key, next uint32
	var at any // nil: the first key
	for k.svcStats.NextKey(at, &next) == nil {
		if !live[next] {
			stale = append(stale, next)
		}
		key = next
		at = &key
	}
	for _, id := range stale {
		_ = k.svcStats.Delete(&id)
	}
}

// makeLinksDir makes the directory of the attachments' pins (and PinDir
// with it), once when the kernel side is opened and again on a resync
// (someone may have removed it), not on every Apply. It makes nothing
// unless PinDir is on a bpffs (maps.ErrNotBPFFS).
func (p *Proxy) makeLinksDir() error {
	if err := maps.CheckBPFFS(p.o.PinDir); err != nil {
		return err
	}
	return os.MkdirAll(filepath.Join(p.o.PinDir, linksDir), 0o700)
}

// Close releases the Proxy's file descriptors and leaves the dataplane
// working: the maps and attachments stay pinned, so services keep being
// translated until a new Proxy on the same PinDir takes over (and adopts
// them) or Cleanup removes them.
func (p *Proxy) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.k != nil {
		p.k.close()
		p.k = nil
	}
	return nil
}

// Cleanup detaches the programs from every interface and from the cgroup
// and removes the maps: everything in Options.PinDir that the Proxy made.
// When it returns, no program of the Proxy is attached any more.
// It works on a Proxy that never applied (after a restart, say) and leaves
// anything else in PinDir alone; PinDir itself goes when nothing else is
// in it (unless it is where the bpffs is mounted). A PinDir that does not
// exist has nothing to clean up; one that is not on a bpffs holds nothing
// of the Proxy's, and Cleanup refuses it (maps.ErrNotBPFFS) without
// touching it.
func (p *Proxy) Cleanup(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := os.Stat(p.o.PinDir); err == nil {
		if err := maps.CheckBPFFS(p.o.PinDir); err != nil {
			return fmt.Errorf("%s: cleanup: %w", p.o.Name, err)
		}
	}
	if p.k != nil {
		p.k.close()
		p.k = nil
	}
	var errs []error
	dir := filepath.Join(p.o.PinDir, linksDir)
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	for _, e := range entries {
		if _, ok := tcxPinInterface(e.Name()); ok || isCgroupPin(e.Name()) {
			if _, err := detachPinned(filepath.Join(dir, e.Name())); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", e.Name(), err))
			}
		}
	}
	errs = append(errs, p.cleanupTC()...)
	_ = os.Remove(dir) // only when empty
	for _, n := range []string{feMapName, beMapName, ctMapName, statsMapName, affMapName, svcStatsName, srcMapName, mgMapName, ifsMapName, skRevMapName} {
		if err := maps.Remove(p.o.PinDir, n); err != nil {
			errs = append(errs, err)
		}
	}
	_ = os.Remove(p.o.PinDir) // only when empty, and not a mount point
	for n, s := range p.services {
		s.fes, s.bes, s.srcs, s.mgs, s.ids = nil, nil, nil, nil, [2]uint32{}
		p.dirty[n] = true
	}
	clear(p.owners)
	p.refused.Retain(func(string) bool { return false })
	p.tally.services, p.tally.frontends, p.tally.backends = 0, 0, 0
	if len(errs) > 0 {
		return fmt.Errorf("%s: cleanup: %w", p.o.Name, errors.Join(errs...))
	}
	return nil
}
