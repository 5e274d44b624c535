package routetable

import "github.com/nodeplane/nodeplane/kernel"

// Kernel is what a Table needs of one network namespace: its routes
// (batched writes, streamed dumps), its links (names, indexes and states),
// its neighbour entries and its conntrack table. A *kernel.Namespace
// (kernel.Open, kernel.OpenCurrent) implements it, and so does a
// kernelfake.Namespace for tests; a wrapper can count or break calls, or
// replace one part (the conntrack deletion, say) by embedding a Kernel.
//
// A Table calls its Kernel from Apply only, never concurrently, and only
// DumpRoutes, DumpInterfaceRoutes, ApplyRoutes, Links, Neighbors,
// ApplyNeighbors and DeleteConntrack.
type Kernel interface {
	kernel.Routes
	kernel.Links
	kernel.Neighbors
	kernel.Conntrack
}
