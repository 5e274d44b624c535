package maps

import "errors"

// Sentinel errors. Every error the package returns wraps one of them, so
// callers can test with errors.Is; the text names the package once.
var (
	// ErrInvalidSpec reports a Spec out of range; the error names the
	// field.
	ErrInvalidSpec = errors.New("maps: invalid spec")
	// ErrInvalidOptions reports a NewSync argument that does not fit: a nil
	// map, a negative batch size, a per-CPU map, or a key or value type
	// whose size differs from the map's or that has implicit padding.
	ErrInvalidOptions = errors.New("maps: invalid options")
	// ErrNotBPFFS reports a pin directory that is not on a BPF file
	// system (bpffs, usually mounted at /sys/fs/bpf).
	ErrNotBPFFS = errors.New("maps: not on a bpf file system")
	// ErrPin reports a failure to create, load, pin or unpin a map.
	ErrPin = errors.New("maps: pin failed")
	// ErrEntry classifies the failure to write or delete one entry. The
	// entry stays pending and is tried again at the next Apply; Apply
	// reports it as the Reason of a *dataplane.ObjectError inside a
	// *dataplane.PartialError.
	ErrEntry = errors.New("maps: entry failed")
	// ErrFull reports the new entries a hash map did not take because it
	// holds MaxEntries entries (E2BIG). Apply reports each in its
	// *dataplane.ObjectError, which wraps ErrEntry too, and tries none of
	// them but the first: they stay pending for the next Apply.
	ErrFull = errors.New("maps: map full")
	// ErrRead reports a failed read of a map's entries. Nothing is
	// written, and the next Apply reads the map again.
	ErrRead = errors.New("maps: map read failed")
)
