//go:build linux

package maps

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"github.com/nodeplane/nodeplane/dataplane"
)

// kindEntry is the kind of a Sync's objects in its Plan, State and errors.
const kindEntry dataplane.ObjectKind = "entry"

// hexText returns x's bytes as the map holds them (native byte order) in
// hex: how a Sync names its keys and values in text.
func hexText(x any) string {
	b, _ := binary.Append(nil, binary.NativeEndian, x)
	return fmt.Sprintf("%x", b)
}

// entryText returns an entry as "key → value", both in hex.
func entryText[K comparable, V comparable](k K, v V) string {
	return hexText(k) + " → " + hexText(v)
}

// Plan returns the entry writes the next Apply would make: the desired
// entries missing from the map (an add) or held with another value (a
// replace, Detail the value it replaces), then the entries the map holds
// that are not desired (a delete), each "key → value" in hex (the bytes
// as the map holds them). The Apply writes every update before any
// delete, as the Plan lists them; within each, the Apply's order is that
// of its batches, which follow no order, so the Plan sorts them by text.
// It decides with the code Apply decides with and counts every write a
// success: it includes the entries that wait for their backoff or for
// room in a full map, since Apply tries each pending entry again. It
// reads the map when Apply would (first call, after QueueResync), and
// that read serves the next Apply; it writes nothing. A Plan is named
// after the map (SyncOptions.Name). Like every method of a Sync, it is
// not safe for concurrent use. A nil ctx is context.Background().
func (s *Sync[K, V]) Plan(ctx context.Context) (dataplane.Plan, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	p := dataplane.Plan{Driver: s.name}
	if err := s.ensureRead(ctx); err != nil {
		return p, err
	}
	pw := s.pending(true, true, nil)
	var upd, del []dataplane.Write
	for i, k := range pw.keys {
		w := dataplane.Write{Op: dataplane.WriteAdd, Kind: kindEntry, Object: entryText(k, pw.vals[i])}
		if e := &s.entries[pw.updated[i]]; e.held {
			w.Op, w.Detail = dataplane.WriteReplace, "was "+hexText(e.have)
		}
		upd = append(upd, w)
	}
	for i, k := range pw.gone {
		del = append(del, dataplane.Write{Op: dataplane.WriteDelete, Kind: kindEntry, Object: entryText(k, s.entries[pw.deleted[i]].have)})
	}
	byText := func(a, b dataplane.Write) int { return strings.Compare(a.Object, b.Object) }
	slices.SortFunc(upd, byText)
	slices.SortFunc(del, byText)
	p.Writes = append(upd, del...)
	return p, nil
}

// State returns the entries the map holds ("key → value", as last read
// and then written), the entries that differ from the desired ones (Name
// the key, Want and Have the values in hex), and the failing entries
// (updates, then deletes, each in the order they first failed). It reads
// the map when Apply would (first call, after QueueResync) and writes
// nothing. A nil ctx is context.Background().
func (s *Sync[K, V]) State(ctx context.Context) (dataplane.State, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	st := dataplane.State{Driver: s.name}
	if err := s.ensureRead(ctx); err != nil {
		return st, err
	}
	for i := range s.entries {
		if e := &s.entries[i]; e.held {
			st.Owned = append(st.Owned, dataplane.Object{Kind: kindEntry, Text: entryText(e.k, e.have)})
		}
	}
	pw := s.pending(true, true, nil)
	for i, k := range pw.keys {
		d := dataplane.Drift{Kind: kindEntry, Name: hexText(k), Want: hexText(pw.vals[i])}
		if e := &s.entries[pw.updated[i]]; e.held {
			d.Have = hexText(e.have)
		}
		st.Drift = append(st.Drift, d)
	}
	for i, k := range pw.gone {
		st.Drift = append(st.Drift, dataplane.Drift{Kind: kindEntry, Name: hexText(k), Have: hexText(s.entries[pw.deleted[i]].have)})
	}
	st.Failing = append(s.updFailed.Errors(), s.delFailed.Errors()...)
	dataplane.SortState(&st)
	return st, nil
}

var (
	_ dataplane.Planner = (*Sync[uint32, uint32])(nil)
	_ dataplane.Stater  = (*Sync[uint32, uint32])(nil)
)
