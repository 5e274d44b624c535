//go:build linux

package maps

import (
	"context"
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// iterateAttempts is how many times a key-by-key read starts over when
// concurrent deletions keep sending it back to the start of the map.
const iterateAttempts = 3

// readAll reads every entry of the map: with batch lookups, or key by key
// when the kernel or the map type has no batch lookup.
func (s *Sync[K, V]) readAll(ctx context.Context) (map[K]V, error) {
	if !s.noBatchLookup {
		got, err := s.batchRead(ctx)
		if err == nil || !errors.Is(err, ebpf.ErrNotSupported) {
			return got, err
		}
		s.noBatchLookup = true
		s.log.Debug("maps: no batch lookup, reading key by key", "map", s.name, "error", err)
	}
	return s.iterateRead(ctx)
}

// batchRead reads the map in chunks of BatchSize entries. A hash map
// refuses a chunk smaller than one of its buckets (ENOSPC): the read then
// starts over with twice the chunk, and goes key by key once the chunk
// holds the whole map.
func (s *Sync[K, V]) batchRead(ctx context.Context) (map[K]V, error) {
	chunk := s.batch
	for {
		got, err := s.batchReadChunk(ctx, chunk)
		if !errors.Is(err, unix.ENOSPC) {
			return got, err
		}
		if chunk > int(s.m.MaxEntries()) {
			return s.iterateRead(ctx)
		}
		chunk *= 2
	}
}

// batchReadChunk reads the whole map with batch lookups of chunk entries.
// The kernel walks a hash map bucket by bucket, each under its lock, so
// entries added or deleted meanwhile are seen at most once.
func (s *Sync[K, V]) batchReadChunk(ctx context.Context, chunk int) (map[K]V, error) {
	out := make(map[K]V, s.sizeHint())
	keys := make([]K, chunk)
	vals := make([]V, chunk)
	var cursor ebpf.MapBatchCursor
	// A lookup returns at least one entry unless it ends the walk, so more
	// calls than entries the map can hold means something is wrong.
	for calls := 0; calls <= int(s.m.MaxEntries())+1; calls++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		s.stats.Syscalls++
		n, err := s.m.BatchLookup(&cursor, keys, vals, nil)
		if err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return nil, err
		}
		for i := range min(n, chunk) {
			out[keys[i]] = vals[i]
		}
		if err != nil { // ErrKeyNotExist: the walk is done
			return out, nil
		}
	}
	return nil, errors.New("batch lookup did not end")
}

// iterateRead reads the map key by key (next key, then lookup). An entry
// deleted between the two is skipped; when the kernel sends the walk back
// to the start (the current key was deleted), entries are read again,
// which only costs time, and a walk longer than the map can be starts
// over.
func (s *Sync[K, V]) iterateRead(ctx context.Context) (map[K]V, error) {
	for range iterateAttempts {
		if out, err := s.walk(ctx); out != nil || err != nil {
			return out, err
		}
	}
	return nil, fmt.Errorf("key-by-key read restarted %d times: %w", iterateAttempts, ebpf.ErrIterationAborted)
}

// walk is one key-by-key read of the map. It returns nil and no error
// when the walk took more steps than the map can hold entries.
func (s *Sync[K, V]) walk(ctx context.Context) (map[K]V, error) {
	out := make(map[K]V, s.sizeHint())
	var key, next K
	var val V
	for steps := 0; steps <= int(s.m.MaxEntries())+1; steps++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		s.stats.Syscalls++
		var err error
		if steps == 0 {
			err = s.m.NextKey(nil, &next)
		} else {
			err = s.m.NextKey(key, &next)
		}
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		key = next
		s.stats.Syscalls++
		// A key deleted since NextKey (ErrKeyNotExist) is skipped.
		switch err := s.m.Lookup(key, &val); {
		case err == nil:
			out[key] = val
		case !errors.Is(err, ebpf.ErrKeyNotExist):
			return nil, err
		}
	}
	return nil, nil
}

// sizeHint is the expected number of entries after a read: as many as
// the map held, or as the desired set when larger, since that many are
// about to be written.
func (s *Sync[K, V]) sizeHint() int { return max(s.held, s.wanted) }
