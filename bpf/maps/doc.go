// Package maps owns BPF maps for nodeplane: it creates and pins them on a
// BPF file system, reopens them across restarts, and keeps each one's
// entries equal to a desired set, writing only the difference.
//
// # What it owns
//
// Open owns one pin, filepath.Join(dir, Spec.Name), and the map behind it.
// It reuses a pinned map whose type, key size, value size, max entries and
// flags equal the Spec's, entries included, so a restarted agent finds
// what it wrote. A pin of another shape (the Spec changed between
// releases) is replaced by a new, empty map: its entries are dropped, and
// the caller rebuilds the map from its desired state (a Sync on the new
// map writes it all at its first Apply). Remove deletes one pin.
//
// A Sync owns the whole of the map it is given: every entry that is not
// desired is deleted at the next Apply, whoever wrote it. Give a Sync only
// a map that nothing else writes (a BPF program's own writes to an LRU
// map, say, are deleted at the next resync unless they are desired). A
// Sync is meant for maps whose entries can be deleted (Hash, LRUHash and
// the like): every index of an array always exists, so an array's Sync
// must desire all of them. Per-CPU maps are refused (NewSync). The kernel
// evicts entries from a full LRU map on its own; a Sync learns of that at
// its next read (after QueueResync) and writes them again, so keep an LRU
// map's desired set well below its MaxEntries.
//
// # How it is used
//
//	m, err := maps.Open("/sys/fs/bpf/nodeplane", maps.Spec{
//		Name: "np_backends", Type: ebpf.Hash, KeySize: 8, ValueSize: 8, MaxEntries: 65536,
//	})
//	if err != nil { … }
//	defer m.Close()
//	sync, err := maps.NewSync[backendKey, backend](m, maps.SyncOptions{})
//	sync.Set(backendKey{…}, backend{…})    // or ReplaceDesired(all)
//	err = sync.Apply(ctx)
//
// Set, Delete and ReplaceDesired record the desired entries and do no
// I/O. The first Apply (and the first after QueueResync) reads the whole
// map: batch lookups of SyncOptions.BatchSize entries (key by key when the
// kernel or the map type has none; a hash map's bucket larger than the
// batch makes the read start over with a larger one). It then writes the
// entries that are missing or differ with batch updates and deletes the
// ones not desired with batch deletes. Later Applies look only at the keys
// changed since, so an Apply with nothing changed makes no syscall, and
// one changed entry costs one syscall whatever the map's size. The Sync's
// record of the map changes only with what was written successfully.
//
// Failures are per entry. When a batch fails, the entries the kernel
// reports as written are kept and the rest of the batch is written one by
// one, so one entry the map refuses never holds back the others. A failed
// entry stays pending and is tried again at the next Apply; Apply returns
// a *dataplane.PartialError (errors.Is matches dataplane.ErrPartial) with
// one *dataplane.ObjectError per failed entry, kept in a dataplane.Ledger:
// it wraps ErrEntry, names the map and the key in hex, and counts the
// attempts; RetryAfter tells the owner when the earliest backoff ends.
// A full hash map is the exception to one by one: once it refuses a new
// key (E2BIG), the other new keys of that Apply are not tried, the keys it
// holds are still overwritten, and each new key left pending is an
// ObjectError that wraps ErrFull too, with no backoff (room is made by an
// Apply that deletes). Deleting a key that is already gone is a success. A failed read
// wraps ErrRead and writes nothing.
//
// ApplyUpdates and ApplyDeletions are the two halves of Apply, for
// make-before-break ordering across maps: update every map (a service's
// new backends) before deleting from any (the old ones). Kernel returns
// what the map holds, so a restarted agent can adopt the state it left
// (an allocation of backend slots, say) before it computes its desired
// set; a Sync given the same desired set then writes nothing. Stats gives
// the dataplane.DriverStats (desired, in the map, failing, writes), and
// Counters the reads, entries written and deleted, and syscalls.
//
// Plan says what the next Apply would write ("+ entry key → value", "~"
// with the value it replaces, "-" for an entry not desired, key and value
// in hex as the map holds them), decided by the code Apply decides with,
// without writing (a dataplane.Planner); State lists the entries the map
// holds, those that differ from the desired ones and the failing ones (a
// dataplane.Stater). Both read the map only when Apply would.
//
// A hash map holds at most MaxEntries entries. Used counts what the map
// holds while the next Apply runs (the desired entries, and the ones not
// desired until they are deleted) and Holds tells whether a key counts in
// it, both without I/O (Read reads the map first when needed), so a
// caller admits new keys only while they fit instead of having the kernel
// refuse them (E2BIG) one by one.
//
// # What it never touches
//
// Only the maps it is given and its own pins: Open never touches another
// pin or directory in dir (it creates dir when missing), never mounts a
// file system (dir must already be on one: ErrNotBPFFS) and never closes a
// map it returned; a Sync never closes, unpins or resizes its map. Nothing
// here loads or attaches programs. NewSync and the desired-set methods do
// no I/O, and nothing starts a goroutine. A Sync is for one goroutine at a
// time. The package is Linux-only beyond its errors.
package maps
