// Package delta tracks the difference between the state a driver wants in
// the kernel (desired) and the state it last saw or wrote there (dataplane),
// so that a driver writes only what differs.
//
// A Tracker holds one map per view and keeps two derived views up to date on
// every change:
//
//   - PendingUpdates: keys that are desired but missing from the dataplane,
//     or present there with a different value.
//   - PendingDeletions: keys present in the dataplane but not desired.
//
// A driver records intent with Desired().Set/Delete (no I/O), loads the
// kernel's state with Dataplane().ReplaceAllIter from a dump (a resync),
// then walks PendingDeletions and PendingUpdates, programming each key and
// returning IterActionUpdateDataplane to record that the dataplane now holds
// it.
//
// Memory: a key that is in sync is stored once, in a single map entry; a key
// with a pending update whose dataplane value is stale is stored twice. No
// other per-key allocation is made, except the temporary set of seen keys
// that a ReplaceAllIter builds. Pending maps that drain after holding many
// keys (a first full sync) are dropped, so their memory is returned.
//
// Values are stored as given and may be shared between views: when desired
// and dataplane agree, Dataplane().Get returns the desired value. Never
// mutate a value after handing it to a Tracker; copy it, change the copy and
// Set the copy.
//
// A Tracker is not safe for concurrent use; a driver owns it from one
// goroutine. The package does no I/O, starts no goroutines and touches no
// kernel state.
package delta
