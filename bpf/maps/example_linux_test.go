//go:build linux

package maps_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/cilium/ebpf"

	"github.com/nodeplane/nodeplane/bpf/maps"
	"github.com/nodeplane/nodeplane/dataplane"
)

// A Spec is checked before anything is created; the error names the
// field.
func ExampleSpec_Validate() {
	spec := maps.Spec{Name: "np_backends", Type: ebpf.Hash, KeySize: 8, ValueSize: 8, MaxEntries: 65536}
	fmt.Println(spec.Validate())
	spec.Name = "np-backends"
	fmt.Println(spec.Validate())
	// Output:
	// <nil>
	// maps: invalid spec: Name "np-backends": byte '-' is not one of [A-Za-z0-9_.]
}

// Open reuses the map pinned under /sys/fs/bpf when it has the Spec's
// shape (a restarted agent finds its entries), and creates and pins a new
// one otherwise. This example only compiles: it needs root and bpffs.
func ExampleOpen() {
	m, err := maps.Open("/sys/fs/bpf/nodeplane", maps.Spec{
		Name: "np_backends", Type: ebpf.Hash, KeySize: 8, ValueSize: 8, MaxEntries: 65536,
	})
	if err != nil {
		fmt.Println(err) // errors.Is(err, maps.ErrNotBPFFS) without bpffs
		return
	}
	defer m.Close()
	fmt.Println(m.Type(), m.MaxEntries())
}

// CheckBPFFS tells whether pins can be made in a directory; /proc is no
// bpffs.
func ExampleCheckBPFFS() {
	err := maps.CheckBPFFS("/proc")
	fmt.Println(errors.Is(err, maps.ErrNotBPFFS))
	// Output: true
}

// Remove unpins a map nodeplane no longer uses; programs and processes
// that hold it keep it until they let it go. A missing pin is not an
// error. This example only compiles: it needs root and bpffs.
func ExampleRemove() {
	if err := maps.Remove("/sys/fs/bpf/nodeplane", "np_backends"); err != nil {
		fmt.Println(err)
	}
}

// A Sync keeps the map equal to the desired set: the first Apply reads the
// map and writes the difference, later ones write only what changed. This
// example only compiles: it needs root and bpffs.
func ExampleNewSync() {
	type svcKey struct {
		Addr  uint32
		Port  uint16
		Proto uint8
		Pad   uint8 // no implicit padding
	}
	type backend struct{ ID, Weight uint32 }

	m, err := maps.Open("/sys/fs/bpf/nodeplane", maps.Spec{
		Name: "np_backends", Type: ebpf.Hash, KeySize: 8, ValueSize: 8, MaxEntries: 65536,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()
	s, err := maps.NewSync[svcKey, backend](m, maps.SyncOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	// On restart, what the map already holds (to keep backend IDs stable).
	adopted, err := s.Kernel(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(adopted), "entries adopted")

	s.Set(svcKey{Addr: 0x0a600001, Port: 443, Proto: 6}, backend{ID: 1, Weight: 1})
	err = s.Apply(ctx)
	var pe *dataplane.PartialError
	if errors.As(err, &pe) {
		// Some entries failed (map full?): they are retried at the next
		// Apply; the others are written.
		fmt.Println(pe.Failed, "entries pending:", err)
	}
	fmt.Printf("%+v\n", s.Stats())
	fmt.Printf("%+v\n", s.Counters())
}

// An agent that starts with many entries to declare makes room for them
// first, so the Sync's sets do not grow step by step. This example only
// compiles: it needs root and bpffs.
func ExampleSync_Reserve() {
	m, err := maps.Open("/sys/fs/bpf/nodeplane", maps.Spec{
		Name: "np_routes", Type: ebpf.Hash, KeySize: 4, ValueSize: 4, MaxEntries: 65536,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()
	s, err := maps.NewSync[uint32, uint32](m, maps.SyncOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	const n = 50000
	s.Reserve(n)
	for i := range uint32(n) {
		s.Set(i, i+1)
	}
	if err := s.Apply(context.Background()); err != nil {
		fmt.Println(err)
	}
}
