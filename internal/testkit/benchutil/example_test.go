package benchutil_test

import (
	"fmt"

	"github.com/nodeplane/nodeplane/internal/testkit/benchutil"
)

// Heap per object: measure around building the objects, while they are
// still referenced.
func ExampleHeapInUse() {
	before := benchutil.HeapInUse()
	objects := make([][32]byte, 10_000)
	after := benchutil.HeapInUse()
	perObject := float64(after-before) / float64(len(objects))
	fmt.Println(perObject >= 32)
	_ = objects[0]
	// Output: true
}
