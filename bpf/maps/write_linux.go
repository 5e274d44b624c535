//go:build linux

package maps

// The writes of a Sync's Apply, chunk by chunk: batch syscalls (side by
// side for a large update), the fallback to one syscall per entry, and the
// bookkeeping of what was written, deleted, refused or held for want of
// room.

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/errs"
)

// entryError is the failure of op on key k: Reason is ErrEntry (ErrFull
// too for a full map's refusal), Err the kernel's error.
func (s *Sync[K, V]) entryError(op string, k K, reason, cause error) *dataplane.ObjectError {
	return &dataplane.ObjectError{Driver: "maps", Op: op, Kind: kindEntry, Name: s.name + " key " + hexText(k),
		Object: k, Reason: reason, Err: cause}
}

// errFullEntry is the Reason of a new entry a full hash map did not take.
var errFullEntry = errs.Also(ErrFull, ErrEntry)

// heldFull records that the new key k was not written because the map is
// full; cause is the kernel's refusal (E2BIG), nil for a key not tried
// after it. Such a key has no backoff: room is made by an Apply.
func (s *Sync[K, V]) heldFull(k K, cause error) {
	e := s.entryError("update", k, errFullEntry, cause)
	e.Detail = fmt.Sprintf("the map holds its %d entries", s.m.MaxEntries())
	s.updFailed.Hold(k, e)
}

// batchDone is what a chunk's batch update did: the entries written, and
// the syscall's error.
type batchDone struct {
	n   int
	err error
}

// parallelChunks is how many chunks an update needs before batchUpdates
// writes them side by side.
const parallelChunks = 4

// batchUpdates makes the batch syscalls of an update of parallelChunks
// chunks or more side by side, one goroutine per CPU (the kernel locks a
// hash map by bucket, so the writes of a large first Apply spread over
// the CPUs), and returns what each did, for update to take account of in
// order. nil: the chunks are written one by one by update (a small update,
// one CPU, or no batch syscalls).
func (s *Sync[K, V]) batchUpdates(keys []K, vals []V) []batchDone {
	chunks := (len(keys) + s.batch - 1) / s.batch
	workers := min(runtime.GOMAXPROCS(0), chunks)
	if s.noBatchUpdate || chunks < parallelChunks || workers < 2 {
		return nil
	}
	out := make([]batchDone, chunks)
	var (
		next atomic.Int64
		wg   sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			for c := int(next.Add(1) - 1); c < chunks; c = int(next.Add(1) - 1) {
				i, j := c*s.batch, min((c+1)*s.batch, len(keys))
				out[c].n, out[c].err = s.m.BatchUpdate(keys[i:j], vals[i:j], nil)
			}
		})
	}
	wg.Wait()
	return out
}

// update writes one chunk: one batch syscall when the kernel takes it
// whole; when it fails, the entries the kernel reports as written are
// kept and the rest are written one by one, so one bad entry never holds
// back the others. Once a hash map has refused a new key for want of room,
// the other new keys of the Apply are not tried (each would cost a
// syscall to be refused the same way) and the keys it holds are
// overwritten one by one.
//
// ids are the keys' entries; batch is the chunk's batch update when
// batchUpdates made it already.
func (s *Sync[K, V]) update(keys []K, vals []V, ids []int32, batch *batchDone, full *bool) {
	done := 0
	if !s.noBatchUpdate && (!*full || batch != nil) {
		s.stats.Syscalls++
		var (
			n   int
			err error
		)
		if batch != nil {
			n, err = batch.n, batch.err
		} else {
			n, err = s.m.BatchUpdate(keys, vals, nil)
		}
		switch {
		case err == nil:
			n = len(keys)
		case errors.Is(err, ebpf.ErrNotSupported):
			s.noBatchUpdate = true
			n = 0
		default:
			n = max(0, min(n, len(keys)))
			s.log.Debug("maps: batch update failed, writing the rest one by one", "map", s.name, "written", n, "of", len(keys), "error", err)
		}
		for i := range n {
			s.wrote(ids[i], vals[i])
		}
		done = n
	}
	for i := done; i < len(keys); i++ {
		if *full && !s.entries[ids[i]].held {
			s.heldFull(keys[i], nil) // it would be refused as well
			continue
		}
		s.stats.Syscalls++
		if err := s.m.Update(keys[i], vals[i], ebpf.UpdateAny); err != nil {
			if s.isFull(err) {
				*full = true
				s.heldFull(keys[i], err)
				continue
			}
			s.updFailed.Fail(keys[i], s.entryError("update", keys[i], ErrEntry, err))
			continue
		}
		s.wrote(ids[i], vals[i])
	}
}

// isFull reports whether err is a hash map's refusal of a new key for
// want of room: E2BIG, as it holds MaxEntries entries (an array's E2BIG is
// an index out of range, which says nothing of the other keys).
func (s *Sync[K, V]) isFull(err error) bool {
	t := s.m.Type()
	return errors.Is(err, unix.E2BIG) && (t == ebpf.Hash || t == ebpf.HashOfMaps)
}

// wrote records that entry i's key now holds v in the map.
func (s *Sync[K, V]) wrote(i int32, v V) {
	e := &s.entries[i]
	if !e.held {
		s.held++
	}
	e.have, e.held, e.dirty = v, true, false
	s.updFailed.Forget(e.k)
	s.stats.Updated++
}

// remove deletes one chunk (ids the keys' entries), as update writes one.
func (s *Sync[K, V]) remove(keys []K, ids []int32) {
	done := 0
	if !s.noBatchDelete {
		s.stats.Syscalls++
		n, err := s.m.BatchDelete(keys, nil)
		switch {
		case err == nil:
			n = len(keys)
		case errors.Is(err, ebpf.ErrNotSupported):
			s.noBatchDelete = true
			n = 0
		default:
			// Usually a key already gone (ENOENT) stopped the batch.
			n = max(0, min(n, len(keys)))
		}
		for i := range n {
			s.deleted(ids[i])
		}
		done = n
	}
	for i := done; i < len(keys); i++ {
		s.stats.Syscalls++
		if err := s.m.Delete(keys[i]); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			s.delFailed.Fail(keys[i], s.entryError("delete", keys[i], ErrEntry, err))
			continue
		}
		s.deleted(ids[i])
	}
}

// deleted records that entry i's key is gone from the map.
func (s *Sync[K, V]) deleted(i int32) {
	e := &s.entries[i]
	if e.held {
		s.stale-- // only keys that are not desired are deleted
		s.held--
	}
	var zero V
	e.have, e.held, e.dirty = zero, false, false
	s.delFailed.Forget(e.k)
	s.stats.Deleted++
}
