// Package idalloc hands out the small numbers a dataplane needs to name its
// kernel objects: route table indices and stable 64-bit IDs for named things
// such as BPF IP sets and services.
//
// IndexAllocator allocates indices from a set of ranges minus exclusions,
// lowest free index first. By default it covers route tables 1–250 and never
// hands out 0 or the kernel's reserved tables 253–255 (default, main and
// local). An agent that restarts adopts the tables it finds already in use
// with Reserve before it grabs new ones, so existing routes keep their
// tables. Free space is tracked lazily (a frontier plus a heap of released
// indices), so memory grows with the indices handed out, not with the size
// of the ranges:
//
//	tables, err := idalloc.NewIndexAllocator(idalloc.IndexOptions{})
//	if err != nil { … }
//	for _, t := range tablesFoundInKernel { _ = tables.Reserve(t) }
//	vxlanTable, err := tables.Grab()
//
// IDAllocator maps names to non-zero uint64 IDs derived from a SHA-256 hash
// of the name, retrying with a counter on collision. Without collisions a
// name's ID depends on nothing but the name, so after a restart the same
// names get the same IDs in any registration order; see IDAllocator for
// what happens on a collision. Well-known IDs are pinned with
// ReserveWellKnown:
//
//	ids := idalloc.NewIDAllocator()
//	setID := ids.GetOrAlloc("kube-svc:default/web")
//
// Both allocators are plain in-memory data structures, safe for concurrent
// use. The package never touches the kernel, does no I/O, starts no
// goroutines and does not log; persisting or rediscovering allocations is
// the caller's job.
package idalloc
