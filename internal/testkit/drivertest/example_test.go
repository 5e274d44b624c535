package drivertest_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"testing"

	"github.com/nodeplane/nodeplane/internal/testkit/drivertest"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
)

// A Recorder in front of a namespace counts the writes a driver makes and
// fails the next ones on request.
func ExampleRecorder() {
	rec := drivertest.Record(kernelfake.New(kernelfake.Options{}))
	route := func(p string) kernel.RouteOp {
		return kernel.RouteOp{Kind: kernel.OpReplace, Route: kernel.Route{Family: kernel.IPv4, Table: 100,
			Dst: netip.MustParsePrefix(p), Type: kernel.RTNBlackhole}}
	}
	rec.FailWrites(1)
	errs := rec.ApplyRoutes(context.Background(), []kernel.RouteOp{route("10.0.0.0/24"), route("10.0.1.0/24")})
	fmt.Println(errors.Is(errs[0], drivertest.ErrInjected), errs[1])
	total, objects := rec.Failed()
	fmt.Println(rec.Writes(), "writes,", total, "failed,", objects, "of them object writes")
	fmt.Println(rec.Log())
	// Output:
	// true <nil>
	// 2 writes, 1 failed, 1 of them object writes
	// [replace route 10.0.0.0/24 table 100 replace route 10.0.1.0/24 table 100]
}

// A driver package runs the suite with a Subject, on the fake and on the
// kernel (TestKernel…, which needs root).
func ExampleRun() {
	subject := toySubject("")
	_ = func(t *testing.T) { drivertest.Run(t, drivertest.Fake, subject) }   // TestConformance
	_ = func(t *testing.T) { drivertest.Run(t, drivertest.Kernel, subject) } // TestKernelConformance
}
