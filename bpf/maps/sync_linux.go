//go:build linux

package maps

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/dataplane"
)

// DefaultBatchSize is the number of entries per batch syscall when
// SyncOptions.BatchSize is 0.
const DefaultBatchSize = 4096

// SyncOptions configures a Sync. The zero value is the default.
type SyncOptions struct {
	// Name names the map in logs and errors; by default the map's own
	// name (as the kernel reported it when the map was opened).
	Name string
	// Logger receives debug records of reads and writes; nil discards.
	Logger *slog.Logger
	// BatchSize is the number of entries per batch syscall (lookup,
	// update, delete); 0 means DefaultBatchSize.
	BatchSize int
	// Clock times the failed entries' backoff (their ObjectError's
	// RetryAt and RetryAfter); nil means clock.Real().
	Clock clock.Clock
}

// Counters are a Sync's cumulative counts of reads, writes and syscalls,
// for tests and benchmarks; Stats gives the dataplane.DriverStats.
type Counters struct {
	// Reads counts full reads of the map.
	Reads int
	// Updated counts entries written.
	Updated int
	// Deleted counts entries deleted (including ones already gone).
	Deleted int
	// Syscalls counts map syscalls: batch and single lookups, updates,
	// deletes and next-key calls.
	Syscalls int
}

// Sync keeps one map's entries equal to a desired set, writing only the
// difference. It owns the whole map: entries that are not desired, whoever
// wrote them, are deleted.
//
// K and V are fixed-size types that cilium/ebpf marshals in native byte
// order: integers, arrays and structs of fixed-size fields without
// implicit padding (add explicit padding fields), whose sizes equal the
// map's key and value sizes.
//
// A Sync is not safe for concurrent use: call it from one goroutine (a
// dataplane.Loop calls its drivers from one).
type Sync[K comparable, V comparable] struct {
	m     *ebpf.Map
	name  string
	log   *slog.Logger
	batch int

	// index finds a key's entry in entries. A key has an entry while it
	// is desired, held by the map or dirty; the entry is freed (free)
	// once it is none of these.
	index   map[K]int32
	entries []entry[K, V]
	free    []int32
	// dirty lists the entries whose desired and held values may differ,
	// each once (entry.dirty); failed keys stay in it until they
	// succeed.
	dirty []int32
	// wanted and held count the desired keys and the keys the map holds.
	wanted, held int
	// stale counts the keys the map holds that are not desired: the
	// entries the next Apply deletes (see Used).
	stale int
	// read is false until the first read and after QueueResync.
	read bool

	// updFailed and delFailed hold the keys whose update or delete the
	// map refused, with their backoff: ApplyUpdates reports the first,
	// ApplyDeletions the second. A key is in one of them at most.
	updFailed, delFailed *dataplane.Ledger[K]

	noBatchLookup, noBatchUpdate, noBatchDelete bool
	stats                                       Counters
}

// entry is what a Sync knows of one key: its desired value (want, when
// wanted) and the value the map holds (have, when held: as last read,
// then changed only by what was written successfully). One entry per key
// keeps a key's state in one place: declaring, deciding and recording a
// write touch it, not a map each.
type entry[K comparable, V comparable] struct {
	k            K
	want, have   V
	wanted, held bool
	dirty        bool // listed in Sync.dirty
	live         bool // in use (not on the free list)
}

// NewSync returns a Sync of m, with an empty desired set. It checks that K
// and V fit m and does no I/O. The caller keeps ownership of m (the Sync
// never closes it).
func NewSync[K comparable, V comparable](m *ebpf.Map, opts SyncOptions) (*Sync[K, V], error) {
	if m == nil {
		return nil, fmt.Errorf("%w: nil map", ErrInvalidOptions)
	}
	if opts.BatchSize < 0 {
		return nil, fmt.Errorf("%w: BatchSize %d is negative", ErrInvalidOptions, opts.BatchSize)
	}
	switch m.Type() {
	case ebpf.PerCPUHash, ebpf.PerCPUArray, ebpf.LRUCPUHash, ebpf.PerCPUCGroupStorage:
		return nil, fmt.Errorf("%w: %v maps hold one value per CPU", ErrInvalidOptions, m.Type())
	}
	var k K
	var v V
	if err := checkSize("key", binary.Size(k), int(unsafe.Sizeof(k)), m.KeySize()); err != nil {
		return nil, err
	}
	if err := checkSize("value", binary.Size(v), int(unsafe.Sizeof(v)), m.ValueSize()); err != nil {
		return nil, err
	}
	s := &Sync[K, V]{
		m:     m,
		name:  opts.Name,
		log:   opts.Logger,
		batch: opts.BatchSize,
		index: map[K]int32{},
	}
	s.updFailed = dataplane.NewLedger[K](dataplane.Backoff{}, opts.Clock)
	s.delFailed = dataplane.NewLedger[K](dataplane.Backoff{}, opts.Clock)
	if s.name == "" {
		s.name = mapName(m)
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.batch == 0 {
		s.batch = DefaultBatchSize
	}
	return s, nil
}

// checkSize checks a key or value type: binary.Size (-1 when the type has
// no fixed size) must equal its size in memory (larger with implicit
// padding) and the map's.
func checkSize(what string, encoded, inMemory int, mapSize uint32) error {
	switch {
	case encoded < 0:
		return fmt.Errorf("%w: the %s type has no fixed size", ErrInvalidOptions, what)
	case encoded != inMemory:
		return fmt.Errorf("%w: the %s type has implicit padding (%d bytes in memory, %d encoded)", ErrInvalidOptions, what, inMemory, encoded)
	case encoded != int(mapSize):
		return fmt.Errorf("%w: the %s type is %d bytes, the map's %ss %d", ErrInvalidOptions, what, encoded, what, mapSize)
	}
	return nil
}

// mapName returns the name the map was opened with, from its String form
// "Type(name)#fd", or that whole form when it carries no name.
func mapName(m *ebpf.Map) string {
	s := m.String()
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open >= 0 && end > open+1 {
		return s[open+1 : end]
	}
	return s
}

// slot returns k's entry, making one when k has none.
func (s *Sync[K, V]) slot(k K) int32 {
	if i, ok := s.index[k]; ok {
		return i
	}
	var i int32
	if n := len(s.free); n > 0 {
		i, s.free = s.free[n-1], s.free[:n-1]
	} else {
		i = int32(len(s.entries))
		s.entries = append(s.entries, entry[K, V]{})
	}
	s.entries[i] = entry[K, V]{k: k, live: true}
	s.index[k] = i
	return i
}

// lookup returns k's entry, or nil when k has none.
func (s *Sync[K, V]) lookup(k K) *entry[K, V] {
	if i, ok := s.index[k]; ok {
		return &s.entries[i]
	}
	return nil
}

// mark records that entry i's desired and held values may differ.
func (s *Sync[K, V]) mark(i int32) {
	if e := &s.entries[i]; !e.dirty {
		e.dirty = true
		s.dirty = append(s.dirty, i)
	}
}

// settle drops from the dirty list the entries no longer dirty, and frees
// those that are neither desired nor held. A list that once held far more
// than it does is made anew, so that memory goes with a large Apply.
func (s *Sync[K, V]) settle() {
	kept := s.dirty[:0]
	for _, i := range s.dirty {
		e := &s.entries[i]
		switch {
		case e.dirty:
			kept = append(kept, i)
		case !e.wanted && !e.held:
			s.release(i)
		}
	}
	if cap(kept) > 64 && len(kept) < cap(kept)/4 {
		kept = slices.Clone(kept)
	}
	s.dirty = kept
}

// release frees entry i, which is neither desired, held nor dirty.
func (s *Sync[K, V]) release(i int32) {
	delete(s.index, s.entries[i].k)
	s.entries[i] = entry[K, V]{}
	s.free = append(s.free, i)
}

// Reserve makes room for n keys ahead of a large declaration, such as an
// agent's first one, while the Sync knows no key: so that the Sets and
// the writes that follow do not grow its sets step by step (a Go map that
// grows rehashes all it holds). A Sync that knows keys is left as it is.
// It does no I/O.
func (s *Sync[K, V]) Reserve(n int) {
	if n <= 0 || len(s.index) > 0 {
		return
	}
	s.index = make(map[K]int32, n)
	s.entries = make([]entry[K, V], 0, n)
	s.free = nil
	s.dirty = make([]int32, 0, n)
}

// Set makes v the desired value of k. It does no I/O.
func (s *Sync[K, V]) Set(k K, v V) {
	i := s.slot(k)
	e := &s.entries[i]
	if e.wanted && e.want == v {
		return
	}
	if !e.wanted {
		s.wanted++
		if e.held {
			s.stale--
		}
	}
	e.want, e.wanted = v, true
	s.mark(i)
}

// Delete removes k from the desired set: the next Apply deletes it from
// the map. It does no I/O.
func (s *Sync[K, V]) Delete(k K) {
	i, ok := s.index[k]
	if !ok || !s.entries[i].wanted {
		return
	}
	e := &s.entries[i]
	if e.held {
		s.stale++
	}
	var zero V
	e.want, e.wanted = zero, false
	s.wanted--
	s.mark(i)
}

// Used returns how many entries the map holds, at most, while the next
// Apply runs, as far as the Sync knows (no I/O; see Read): the desired
// entries, and the entries it holds that are not desired, until they are
// deleted (an Apply writes before it deletes). A caller that must not
// exceed the map's capacity (MaxEntries: a hash map refuses a new entry
// beyond it with E2BIG) admits new keys while Used stays within it.
func (s *Sync[K, V]) Used() int { return s.wanted + s.stale }

// Holds reports whether k counts in Used: it is desired or the map holds
// it. Making k desired takes no room unless Holds is false. It does no
// I/O.
func (s *Sync[K, V]) Holds(k K) bool {
	e := s.lookup(k)
	return e != nil && (e.wanted || e.held)
}

// Read reads the whole map when it was never read or after QueueResync
// (as Kernel, ApplyUpdates and ApplyDeletions do first), so that InKernel,
// Used and Holds tell what the map holds. It fails as Kernel does. A nil
// context means context.Background().
func (s *Sync[K, V]) Read(ctx context.Context) error { return s.ensureRead(ctx) }

// Desired returns the desired value of k and whether k is desired.
func (s *Sync[K, V]) Desired(k K) (V, bool) {
	if e := s.lookup(k); e != nil && e.wanted {
		return e.want, true
	}
	var zero V
	return zero, false
}

// InKernel returns the value the map holds for k as far as the Sync knows:
// as last read, changed since only by what it wrote successfully. It does
// no I/O. A caller that writes related maps in order uses it to hold back
// what refers to an entry whose write failed.
func (s *Sync[K, V]) InKernel(k K) (V, bool) {
	if e := s.lookup(k); e != nil && e.held {
		return e.have, true
	}
	var zero V
	return zero, false
}

// DesiredLen returns the number of desired entries.
func (s *Sync[K, V]) DesiredLen() int { return s.wanted }

// ReplaceDesired makes a copy of entries the whole desired set. Only the
// keys whose desired value changed are looked at by the next Apply. It
// does no I/O.
func (s *Sync[K, V]) ReplaceDesired(entries map[K]V) {
	for i := range s.entries {
		if e := &s.entries[i]; e.wanted {
			if _, ok := entries[e.k]; !ok {
				s.Delete(e.k)
			}
		}
	}
	for k, v := range entries {
		s.Set(k, v)
	}
}

// QueueResync makes the next Kernel, ApplyUpdates or ApplyDeletions read
// the whole map again, so changes made behind the Sync's back (an entry
// deleted or overwritten by someone else) are found and repaired.
func (s *Sync[K, V]) QueueResync() { s.read = false }

// Counters returns the cumulative counters.
func (s *Sync[K, V]) Counters() Counters { return s.stats }

// Stats returns the Sync's dataplane.DriverStats: the desired entries,
// the entries the map holds (as last read, then written), the entries
// whose last write or delete failed, and the entries written and deleted
// since NewSync. It does no I/O.
func (s *Sync[K, V]) Stats() dataplane.DriverStats {
	return dataplane.DriverStats{Desired: s.wanted, InKernel: s.held,
		Failing: s.updFailed.Len() + s.delFailed.Len(), Writes: uint64(s.stats.Updated + s.stats.Deleted)}
}

// RetryAfter is how long after the latest Apply, ApplyUpdates or
// ApplyDeletions began the earliest failed entry's backoff ends, or 0
// when no entry waits on one (a full map's entries wait for room, not for
// time): a caller that is a dataplane.Driver asks the loop for its next
// pass then.
func (s *Sync[K, V]) RetryAfter() time.Duration {
	a, b := s.updFailed.RetryAfter(), s.delFailed.RetryAfter()
	if a == 0 || b != 0 && b < a {
		return b
	}
	return a
}

// Kernel returns the map's entries as last read and then written by the
// Sync, reading the map first when it was never read or after
// QueueResync. The result is a copy the caller may keep. A restarted
// agent uses it to adopt the state it left behind. A nil context means
// context.Background().
func (s *Sync[K, V]) Kernel(ctx context.Context) (map[K]V, error) {
	if err := s.ensureRead(ctx); err != nil {
		return nil, err
	}
	out := make(map[K]V, s.held)
	for i := range s.entries {
		if e := &s.entries[i]; e.held {
			out[e.k] = e.have
		}
	}
	return out, nil
}

// Apply writes the difference between the desired set and the map:
// ApplyUpdates, then ApplyDeletions. Entries that fail are reported
// together in one *dataplane.PartialError.
//
// Every call tries each pending entry again, whatever its backoff: the
// Sync is called by its owner's Apply, which the owner paces (RetryAfter).
// Each failed entry is a *dataplane.ObjectError (Driver "maps", Kind
// "entry", Op "update" or "delete", Name the map and the key in hex) whose
// Attempts count the failures in a row.
func (s *Sync[K, V]) Apply(ctx context.Context) error { return s.apply(ctx, true, true) }

// ApplyUpdates writes the desired entries that are missing from the map
// or differ there, BatchSize per batch syscall, reading the map first when
// needed (first call, after QueueResync). Entries the map refuses stay
// pending for the next call, which tries them again; the others are
// written all the same, and the error is a *dataplane.PartialError whose
// errors wrap ErrEntry and name each key; the new keys of a full hash map
// wrap ErrFull as well: after the first it refuses (E2BIG), they are not
// tried, and they have no backoff (room is made by deleting entries). A
// failed read wraps ErrRead and writes nothing. With nothing changed it
// makes no syscall. A nil context means context.Background().
func (s *Sync[K, V]) ApplyUpdates(ctx context.Context) error { return s.apply(ctx, true, false) }

// ApplyDeletions deletes the map's entries that are not desired, BatchSize
// per batch syscall, reading the map first when needed. A key already gone
// counts as deleted. Failures are reported as by ApplyUpdates. With
// nothing changed it makes no syscall. A nil context means
// context.Background().
func (s *Sync[K, V]) ApplyDeletions(ctx context.Context) error { return s.apply(ctx, false, true) }

// Err returns the failures of the latest ApplyUpdates and ApplyDeletions
// (or Apply) as one *dataplane.PartialError, or nil when no entry is
// failing: the same failures those calls returned. It does no I/O.
func (s *Sync[K, V]) Err() error { return JoinPartial(s.updFailed.Err(), s.delFailed.Err()) }

// JoinPartial merges errs, each a *dataplane.PartialError (a
// dataplane.Ledger's Err) or nil, into one *dataplane.PartialError, or
// returns nil when all are nil: its counts and Errs are theirs together,
// and its Driver theirs when they all name the same. A driver whose
// objects are in several ledgers (a Sync per map, a ledger of its own)
// returns it from its Apply.
func JoinPartial(errs ...error) error {
	var out *dataplane.PartialError
	for _, err := range errs {
		pe, ok := err.(*dataplane.PartialError)
		if !ok {
			continue
		}
		if out == nil {
			out = &dataplane.PartialError{Driver: pe.Driver}
		}
		if pe.Driver != out.Driver {
			out.Driver = ""
		}
		out.Failed += pe.Failed
		out.Waiting += pe.Waiting
		out.Errs = append(out.Errs, pe.Errs...)
	}
	if out == nil {
		return nil
	}
	return out
}

// apply reads the map when needed and, in one pass over the dirty keys,
// drops those in sync and collects the entries to write (with updates)
// and the keys to delete (with deletions); it writes before it deletes,
// and reports the failures of both in one PartialError.
func (s *Sync[K, V]) apply(ctx context.Context, updates, deletions bool) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if err := s.ensureRead(ctx); err != nil {
		return err
	}
	defer s.settle()
	var ledgers []*dataplane.Ledger[K]
	if updates {
		s.updFailed.Begin()
		ledgers = append(ledgers, s.updFailed)
	}
	if deletions {
		s.delFailed.Begin()
		ledgers = append(ledgers, s.delFailed)
	}
	w := s.pending(updates, deletions, func(i int32, d decision) {
		e := &s.entries[i]
		switch d {
		case inSync:
			e.dirty = false
			s.updFailed.Forget(e.k)
			s.delFailed.Forget(e.k)
		case toUpdate:
			s.delFailed.Forget(e.k)
		case toDelete:
			s.updFailed.Forget(e.k)
		}
	})
	keys, vals, gone := w.keys, w.vals, w.gone
	full := false
	batches := s.batchUpdates(keys, vals)
	for i := 0; i < len(keys); i += s.batch {
		if err := ctx.Err(); err != nil {
			return err
		}
		j := min(i+s.batch, len(keys))
		var done *batchDone
		if batches != nil {
			done = &batches[i/s.batch]
		}
		s.update(keys[i:j], vals[i:j], w.updated[i:j], done, &full)
	}
	for i := 0; i < len(gone); i += s.batch {
		if err := ctx.Err(); err != nil {
			return err
		}
		j := min(i+s.batch, len(gone))
		s.remove(gone[i:j], w.deleted[i:j])
	}
	errs := make([]error, len(ledgers))
	for i, l := range ledgers {
		errs[i] = l.Err()
	}
	if len(keys)+len(gone) > 0 {
		s.log.Debug("maps: applied", "map", s.name, "updated", len(keys), "deleted", len(gone),
			"failing", s.updFailed.Len()+s.delFailed.Len())
	}
	return JoinPartial(errs...)
}

// decision is what an Apply does with one dirty key.
type decision uint8

const (
	// inSync: the map holds the desired entry, or neither holds one.
	inSync decision = iota
	// toUpdate: the desired entry is missing from the map or differs.
	toUpdate
	// toDelete: the map holds an entry that is not desired.
	toDelete
)

// writes are the writes an Apply makes: the desired entries to write
// (keys, vals; updated their entries) and the keys to delete (gone;
// deleted their entries).
type writes[K comparable, V comparable] struct {
	keys    []K
	vals    []V
	updated []int32
	gone    []K
	deleted []int32
}

// pending decides, for every dirty key, what an Apply does with it: it
// returns the desired entries to write (with updates) and the keys to
// delete (with deletions), and tells seen (when not nil) each entry's
// decision, whether or not it is returned. It writes nothing: Apply and
// Plan both decide with it.
func (s *Sync[K, V]) pending(updates, deletions bool, seen func(int32, decision)) (w writes[K, V]) {
	for _, i := range s.dirty {
		e := &s.entries[i]
		if !e.dirty {
			continue
		}
		d := toDelete
		switch {
		case e.wanted == e.held && (!e.wanted || e.have == e.want):
			d = inSync
		case e.wanted:
			d = toUpdate
			if updates {
				w.keys, w.vals, w.updated = append(w.keys, e.k), append(w.vals, e.want), append(w.updated, i)
			}
		default:
			if deletions {
				w.gone, w.deleted = append(w.gone, e.k), append(w.deleted, i)
			}
		}
		if seen != nil {
			seen(i, d)
		}
	}
	return w
}

// ensureRead reads the map when it was never read or after QueueResync,
// and then marks every key whose desired and kernel entries differ.
func (s *Sync[K, V]) ensureRead(ctx context.Context) error {
	if s.read {
		return nil
	}
	if ctx == nil {
		ctx = context.Background()
	}
	got, err := s.readAll(ctx)
	if err != nil {
		return fmt.Errorf("%w: map %s: %w", ErrRead, s.name, err)
	}
	s.stats.Reads++
	// The map's entries as read replace those last known (a Sync that
	// knows no key yet, as at an agent's restart, makes room for them
	// first).
	s.Reserve(len(got))
	var zero V
	for i := range s.entries {
		if e := &s.entries[i]; e.held {
			e.have, e.held = zero, false
		}
	}
	s.held, s.stale = len(got), 0
	for k, v := range got {
		e := &s.entries[s.slot(k)]
		e.have, e.held = v, true
		if !e.wanted {
			s.stale++
		}
	}
	s.read = true
	// Every key whose desired and held values differ is dirty; a key
	// that is neither (it was held before the read) is forgotten.
	s.dirty = s.dirty[:0]
	for i := range s.entries {
		e := &s.entries[i]
		e.dirty = e.live && (e.wanted != e.held || e.wanted && e.want != e.have)
		switch {
		case e.dirty:
			s.dirty = append(s.dirty, int32(i))
		case e.live && !e.wanted && !e.held:
			s.release(int32(i))
		}
	}
	// A failed key the map now holds as desired is no longer failing.
	dirty := func(k K) bool { e := s.lookup(k); return e != nil && e.dirty }
	s.updFailed.Retain(dirty)
	s.delFailed.Retain(dirty)
	s.log.Debug("maps: read map", "map", s.name, "entries", len(got), "differing", len(s.dirty))
	return nil
}
