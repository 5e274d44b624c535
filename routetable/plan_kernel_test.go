//go:build linux

package routetable_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	rt "github.com/nodeplane/nodeplane/routetable"
)

// TestKernelPlanProperties is TestPlanProperties against the real kernel,
// in a fresh namespace per family and seed: Plan writes nothing, Apply
// makes exactly the writes Plan listed, in its order, and after it Plan is
// empty and Apply writes nothing, with foreign, leftover and drifted
// routes the kernel itself holds.
func TestKernelPlanProperties(t *testing.T) {
	kerneltest.RequireKernel(t)
	for _, fam := range []rt.Family{rt.IPv4, rt.IPv6} {
		for _, seed := range []uint64{1, 2, 3} {
			t.Run(fmt.Sprintf("%v/%d", fam, seed), func(t *testing.T) {
				planned := planProperty(t, kernelEnv(t, fam, 1000), seed, 120)
				assert.Greater(t, planned, 40, "the draw makes writes to plan")
			})
		}
	}
}

// TestKernelState is TestState against the real kernel.
func TestKernelState(t *testing.T) {
	kerneltest.RequireKernel(t)
	for _, fam := range []rt.Family{rt.IPv4, rt.IPv6} {
		t.Run(fam.String(), func(t *testing.T) { stateReportsDrift(t, kernelEnv(t, fam, 1000)) })
	}
}
