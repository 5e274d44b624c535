//go:build linux

package maps

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"maps"
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

	desired map[K]V
	// kernel is what the map holds: as last read, then changed only by
	// what was written successfully.
	kernel map[K]V
	// dirty holds the keys whose desired and kernel entries may differ;
	// failed keys stay in it until they succeed.
	dirty map[K]struct{}
	// dirtyPeak is the most keys dirty has held since it was last
	// allocated: a Go map keeps its capacity, and ranging over it costs
	// that capacity, so shrink rebuilds it once most of it is gone.
	dirtyPeak int
	// stale counts the keys kernel holds that are not desired: the
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
		m:       m,
		name:    opts.Name,
		log:     opts.Logger,
		batch:   opts.BatchSize,
		desired: map[K]V{},
		kernel:  map[K]V{},
		dirty:   map[K]struct{}{},
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

// mark records that k's desired and kernel entries may differ.
func (s *Sync[K, V]) mark(k K) {
	s.dirty[k] = struct{}{}
	s.dirtyPeak = max(s.dirtyPeak, len(s.dirty))
}

// shrink rebuilds dirty when it holds far fewer keys than it once did, so
// that an Apply after a large one costs what it changes, not what the
// large one did.
func (s *Sync[K, V]) shrink() {
	if s.dirtyPeak <= 64 || len(s.dirty) > s.dirtyPeak/4 {
		return
	}
	small := make(map[K]struct{}, len(s.dirty))
	for k := range s.dirty {
		small[k] = struct{}{}
	}
	s.dirty, s.dirtyPeak = small, len(small)
}

// Reserve makes room for n entries ahead of a large declaration, such as
// an agent's first one: the desired set, the map's mirror and the dirty
// keys, each of them that is empty, are made with room for n, so that the
// Sets and the writes that follow do not grow them step by step (a Go map
// that grows rehashes all it holds). A set that holds entries is left as
// it is. It does no I/O.
func (s *Sync[K, V]) Reserve(n int) {
	if n <= 0 {
		return
	}
	if len(s.desired) == 0 {
		s.desired = make(map[K]V, n)
	}
	if len(s.kernel) == 0 {
		s.kernel = make(map[K]V, n)
	}
	if len(s.dirty) == 0 {
		s.dirty, s.dirtyPeak = make(map[K]struct{}, n), 0
	}
}

// Set makes v the desired value of k. It does no I/O.
func (s *Sync[K, V]) Set(k K, v V) {
	old, ok := s.desired[k]
	if ok && old == v {
		return
	}
	if _, has := s.kernel[k]; has && !ok {
		s.stale--
	}
	s.desired[k] = v
	s.mark(k)
}

// Delete removes k from the desired set: the next Apply deletes it from
// the map. It does no I/O.
func (s *Sync[K, V]) Delete(k K) {
	if _, ok := s.desired[k]; !ok {
		return
	}
	if _, has := s.kernel[k]; has {
		s.stale++
	}
	delete(s.desired, k)
	s.mark(k)
}

// Used returns how many entries the map holds, at most, while the next
// Apply runs, as far as the Sync knows (no I/O; see Read): the desired
// entries, and the entries it holds that are not desired, until they are
// deleted (an Apply writes before it deletes). A caller that must not
// exceed the map's capacity (MaxEntries: a hash map refuses a new entry
// beyond it with E2BIG) admits new keys while Used stays within it.
func (s *Sync[K, V]) Used() int { return len(s.desired) + s.stale }

// Holds reports whether k counts in Used: it is desired or the map holds
// it. Making k desired takes no room unless Holds is false. It does no
// I/O.
func (s *Sync[K, V]) Holds(k K) bool {
	if _, ok := s.desired[k]; ok {
		return true
	}
	_, ok := s.kernel[k]
	return ok
}

// Read reads the whole map when it was never read or after QueueResync
// (as Kernel, ApplyUpdates and ApplyDeletions do first), so that InKernel,
// Used and Holds tell what the map holds. It fails as Kernel does. A nil
// context means context.Background().
func (s *Sync[K, V]) Read(ctx context.Context) error { return s.ensureRead(ctx) }

// Desired returns the desired value of k and whether k is desired.
func (s *Sync[K, V]) Desired(k K) (V, bool) {
	v, ok := s.desired[k]
	return v, ok
}

// InKernel returns the value the map holds for k as far as the Sync knows:
// as last read, changed since only by what it wrote successfully. It does
// no I/O. A caller that writes related maps in order uses it to hold back
// what refers to an entry whose write failed.
func (s *Sync[K, V]) InKernel(k K) (V, bool) {
	v, ok := s.kernel[k]
	return v, ok
}

// DesiredLen returns the number of desired entries.
func (s *Sync[K, V]) DesiredLen() int { return len(s.desired) }

// ReplaceDesired makes a copy of entries the whole desired set. Only the
// keys whose desired value changed are looked at by the next Apply. It
// does no I/O.
func (s *Sync[K, V]) ReplaceDesired(entries map[K]V) {
	for k, old := range s.desired {
		if v, ok := entries[k]; !ok || v != old {
			s.mark(k)
		}
	}
	for k := range entries {
		if _, ok := s.desired[k]; !ok {
			s.mark(k)
		}
	}
	s.desired = maps.Clone(entries)
	if s.desired == nil {
		s.desired = map[K]V{}
	}
	s.countStale()
}

// countStale counts the keys kernel holds that are not desired.
func (s *Sync[K, V]) countStale() {
	s.stale = 0
	for k := range s.kernel {
		if _, ok := s.desired[k]; !ok {
			s.stale++
		}
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
	return dataplane.DriverStats{Desired: len(s.desired), InKernel: len(s.kernel),
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
	return maps.Clone(s.kernel), nil
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
	defer s.shrink()
	var ledgers []*dataplane.Ledger[K]
	if updates {
		s.updFailed.Begin()
		ledgers = append(ledgers, s.updFailed)
	}
	if deletions {
		s.delFailed.Begin()
		ledgers = append(ledgers, s.delFailed)
	}
	keys, vals, gone := s.pending(updates, deletions, func(k K, d decision) {
		switch d {
		case inSync:
			delete(s.dirty, k)
			s.updFailed.Forget(k)
			s.delFailed.Forget(k)
		case toUpdate:
			s.delFailed.Forget(k)
		case toDelete:
			s.updFailed.Forget(k)
		}
	})
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
		s.update(keys[i:j], vals[i:j], done, &full)
	}
	for i := 0; i < len(gone); i += s.batch {
		if err := ctx.Err(); err != nil {
			return err
		}
		s.remove(gone[i:min(i+s.batch, len(gone))])
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

// pending decides, for every dirty key, what an Apply does with it: it
// returns the desired entries to write (with updates) and the keys to
// delete (with deletions), and tells seen (when not nil) each key's
// decision, whether or not it is returned. It writes nothing: Apply and
// Plan both decide with it.
func (s *Sync[K, V]) pending(updates, deletions bool, seen func(K, decision)) (keys []K, vals []V, gone []K) {
	for k := range s.dirty {
		v, want := s.desired[k]
		kv, has := s.kernel[k]
		d := toDelete
		switch {
		case want == has && (!want || kv == v):
			d = inSync
		case want:
			d = toUpdate
			if updates {
				keys = append(keys, k)
				vals = append(vals, v)
			}
		default:
			if deletions {
				gone = append(gone, k)
			}
		}
		if seen != nil {
			seen(k, d)
		}
	}
	return keys, vals, gone
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
	s.kernel = got
	s.countStale()
	s.read = true
	clear(s.dirty)
	for k, v := range s.desired {
		if kv, ok := got[k]; !ok || kv != v {
			s.mark(k)
		}
	}
	for k := range got {
		if _, ok := s.desired[k]; !ok {
			s.mark(k)
		}
	}
	// A failed key the map now holds as desired is no longer failing.
	dirty := func(k K) bool { _, ok := s.dirty[k]; return ok }
	s.updFailed.Retain(dirty)
	s.delFailed.Retain(dirty)
	s.log.Debug("maps: read map", "map", s.name, "entries", len(got), "differing", len(s.dirty))
	return nil
}
