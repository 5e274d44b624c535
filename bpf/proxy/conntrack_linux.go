//go:build linux

package proxy

import (
	"context"
	"errors"
	"path/filepath"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/nodeplane/nodeplane/bpf/maps"
)

// ctSpec is the connection map's spec: a hash map without preallocation,
// which evicts nothing (an LRU map would evict idle live connections under
// a churn of short ones).
func ctSpec(size uint32) maps.Spec {
	return maps.Spec{Name: ctMapName, Type: ebpf.Hash, KeySize: ctKeySize, ValueSize: ctValSize,
		MaxEntries: size, Flags: unix.BPF_F_NO_PREALLOC}
}

// protocol numbers of np_ct_key.proto.
const (
	protoTCP = 6
	protoUDP = 17
)

// Run is the connection scanner: every Conntrack.ScanInterval it looks at
// the next Conntrack.ScanBatch entries of the connection map and removes
// the connections idle past their timeout, the UDP flows whose backend
// left its service (their clients pick another at once), and reverse
// entries left without their forward one; after each full pass it
// updates Status().Conntrack (entries, fill level, the pass's cost). It
// opens the pinned maps itself (they appear with the first Apply; until
// then it waits), so it shares nothing with Apply but the kernel's maps,
// and runs on a goroutine of its own. It blocks until ctx ends, then
// returns nil.
func (p *Proxy) Run(ctx context.Context) error {
	sc := &scanner{p: p, o: p.o.Conntrack}
	defer sc.close()
	t := p.o.Clock.NewTicker(p.o.Conntrack.ScanInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
		if err := sc.step(); err != nil {
			p.log.Debug("bpf proxy: connection scan", "name", p.o.Name, "err", err)
			sc.close() // open the maps again next time: they may have been replaced
		}
	}
}

// scanner walks the connection map batch by batch.
type scanner struct {
	p               *Proxy
	o               ConntrackOptions
	ct, be, stats   *ebpf.Map
	cursor          ebpf.MapBatchCursor
	seen            int           // entries seen in this pass so far
	spent           time.Duration // scanning time of this pass so far
	keys            []ctKey
	vals            []ctVal
	expired, stale  uint64
	orphans, passes uint64
}

func (s *scanner) close() {
	for _, m := range []*ebpf.Map{s.ct, s.be, s.stats} {
		if m != nil {
			_ = m.Close()
		}
	}
	s.ct, s.be, s.stats = nil, nil, nil
	s.cursor, s.seen, s.spent = ebpf.MapBatchCursor{}, 0, 0
}

// open loads the pinned maps; a missing pin (no Apply yet) is no error.
func (s *scanner) open() (bool, error) {
	if s.ct != nil {
		return true, nil
	}
	load := func(name string) (*ebpf.Map, error) {
		return ebpf.LoadPinnedMap(filepath.Join(s.p.o.PinDir, name), nil)
	}
	var err error
	if s.ct, err = load(ctMapName); err != nil {
		s.close()
		if errors.Is(err, unix.ENOENT) {
			return false, nil
		}
		return false, err
	}
	if s.be, err = load(beMapName); err == nil {
		s.stats, err = load(statsMapName)
	}
	if err != nil {
		s.close()
		return false, err
	}
	return true, nil
}

// step scans one batch, and at the end of a pass reports it.
func (s *scanner) step() error {
	ok, err := s.open()
	if !ok || err != nil {
		return err
	}
	start := time.Now()
	n := s.o.ScanBatch
	if cap(s.keys) < n {
		s.keys, s.vals = make([]ctKey, n), make([]ctVal, n)
	}
	keys, vals := s.keys[:n], s.vals[:n]
	got, err := s.ct.BatchLookup(&s.cursor, keys, vals, nil)
	done := errors.Is(err, ebpf.ErrKeyNotExist)
	if err != nil && !done {
		return err
	}
	now := monotonicNow()
	for i := range got {
		s.judge(keys[i], vals[i], now)
	}
	s.seen += got
	s.spent += time.Since(start)
	if !done {
		return nil
	}
	s.passes++
	full, closed := s.counters()
	st := ConntrackStatus{Entries: s.seen, Capacity: int(s.ct.MaxEntries()), Full: full, Closed: closed,
		Expired: s.expired, Stale: s.stale, Orphans: s.orphans, Passes: s.passes, LastPass: s.spent, LastPassAt: s.p.o.Clock.Now()}
	s.p.ct.update(func(c *ConntrackStatus) { *c = st })
	s.cursor, s.seen, s.spent = ebpf.MapBatchCursor{}, 0, 0
	return nil
}

// judge removes one entry, with its other direction, when it is due.
// Forward entries decide for the pair; a reverse entry goes alone only
// when its forward entry is gone.
func (s *scanner) judge(k ctKey, v ctVal, now uint64) {
	if v.Flags&ctReverse != 0 {
		// The programs write the forward entry first and remove both
		// together; a reverse entry whose forward one is gone, or now
		// leads to another backend (the flow picked again), is left over.
		fk := forwardOf(k, v)
		var fv ctVal
		err := s.ct.Lookup(&fk, &fv)
		if (errors.Is(err, ebpf.ErrKeyNotExist) || err == nil && (fv.Addr != k.Src || fv.Port != k.Sport)) && s.ct.Delete(&k) == nil {
			s.orphans++
		}
		return
	}
	rk := reverseOf(k, v)
	var rv ctVal
	hasRev := s.ct.Lookup(&rk, &rv) == nil
	last := v.LastSeen
	if hasRev && rv.LastSeen > last {
		last = rv.LastSeen
	}
	idle := time.Duration(now - min(now, last))
	var timeout time.Duration
	switch {
	case k.Proto == protoUDP:
		timeout = s.o.UDP
	case v.Flags&ctDSR != 0 && !hasRev: // the node in front: the client's acknowledgement is the answer
		timeout = s.o.TCPEstablished
		if v.Flags&ctReplied == 0 {
			timeout = s.o.TCPOpening
		}
		if v.Flags&ctFin != 0 {
			timeout = s.o.TCPClosing
		}
	case !hasRev || rv.Flags&ctReplied == 0:
		timeout = s.o.TCPOpening
	case (v.Flags|rv.Flags)&ctFin != 0:
		timeout = s.o.TCPClosing
	default:
		timeout = s.o.TCPEstablished
	}
	switch {
	case idle > timeout:
		s.expired += s.remove(k, rk, hasRev)
	case k.Proto == protoUDP && v.SvcID != 0 && !s.backendServes(v): // DSR's on the backend's node have no service here
		s.stale += s.remove(k, rk, hasRev)
	}
}

// remove deletes a forward entry and its reverse one; it returns the
// number of entries deleted.
func (s *scanner) remove(fk, rk ctKey, hasRev bool) uint64 {
	var n uint64
	if s.ct.Delete(&fk) == nil {
		n++
	}
	if hasRev && s.ct.Delete(&rk) == nil {
		n++
	}
	return n
}

// backendServes reports whether the forward entry's backend is still one
// of its service's: at its ordinal, or (as the programs look) at one of
// the service's first backendSearch ordinals.
func (s *scanner) backendServes(v ctVal) bool {
	var bv beVal
	if s.be.Lookup(&beKey{SvcID: v.SvcID, Ordinal: v.Ordinal}, &bv) == nil && bv.Addr == v.Addr && bv.Port == v.Port {
		return true
	}
	for i := range uint32(backendSearch) {
		if s.be.Lookup(&beKey{SvcID: v.SvcID, Ordinal: i}, &bv) != nil {
			return false
		}
		if bv.Addr == v.Addr && bv.Port == v.Port {
			return true
		}
	}
	return false
}

// backendSearch is NP_BACKEND_SEARCH of c/nat.c.
const backendSearch = 64

// counters sums the programs' per-CPU counters.
func (s *scanner) counters() (full, closed uint64) {
	sum := func(idx uint32) uint64 {
		var per []uint64
		if s.stats.Lookup(&idx, &per) != nil {
			return 0
		}
		var t uint64
		for _, v := range per {
			t += v
		}
		return t
	}
	return sum(statCTFull), sum(statClosed)
}

// reverseOf is the key of the reverse entry of forward entry k (c/nat.c's
// np_rev_key).
func reverseOf(k ctKey, v ctVal) ctKey {
	r := ctKey{Src: v.Addr, Dst: k.Src, Sport: v.Port, Dport: k.Sport, Proto: k.Proto}
	if v.Flags&ctHairpin != 0 {
		r.Dst = k.Dst
	}
	return r
}

// forwardOf is the key of the forward entry of reverse entry k: the
// client (or, hairpinned, the backend pod itself) to the frontend.
func forwardOf(k ctKey, v ctVal) ctKey {
	f := ctKey{Src: k.Dst, Dst: v.Addr, Sport: k.Dport, Dport: v.Port, Proto: k.Proto}
	if v.Flags&ctHairpin != 0 {
		f.Src = k.Src
	}
	return f
}

// monotonicNow is CLOCK_MONOTONIC_COARSE in nanoseconds, the clock of the
// programs' bpf_ktime_get_coarse_ns (CLOCK_MONOTONIC as of the last tick:
// it costs the programs no clock read per packet).
func monotonicNow() uint64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC_COARSE, &ts)
	return uint64(ts.Nano())
}

// serviceCounters sums the per-CPU counters of each written service (its
// IDs of both families).
func (k *kstate) serviceCounters(services map[string]*svc) map[string]ServiceCounters {
	out := make(map[string]ServiceCounters, len(services))
	var per []svcStats
	for name, s := range services {
		var c ServiceCounters
		written := false
		for _, id := range s.ids {
			if id == 0 {
				continue
			}
			written = true
			if k.svcStats.Lookup(&id, &per) != nil {
				continue
			}
			for _, v := range per {
				c.Connections += v.Conns
				c.Packets += v.Packets
				c.Bytes += v.Bytes
				c.Rejects += v.Rejects
			}
		}
		if written {
			out[name] = c
		}
	}
	return out
}
