//go:build linux

package routerule_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/routerule"
)

// TestKernelPlanProperties is TestPlanProperties against the real kernel,
// in a fresh namespace per family and seed.
func TestKernelPlanProperties(t *testing.T) {
	kerneltest.RequireKernel(t)
	for _, fam := range []routerule.Family{routerule.IPv4, routerule.IPv6} {
		for _, seed := range []uint64{1, 2} {
			t.Run(fmt.Sprintf("%v/%d", fam, seed), func(t *testing.T) {
				planned := rulePlanProperty(t, env{kern: openKernel(t), fam: fam}, nil, seed, 150)
				assert.Greater(t, planned, 30)
			})
		}
	}
}
