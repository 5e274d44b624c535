//go:build linux

package routerule_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/routerule"
)

// TestKernelScenarios runs the scenario suite against the real kernel, each
// scenario in a fresh network namespace opened with kernel.Open, for both
// families.
func TestKernelScenarios(t *testing.T) {
	kerneltest.RequireKernel(t)
	for _, fam := range []routerule.Family{routerule.IPv4, routerule.IPv6} {
		t.Run(fam.String(), func(t *testing.T) {
			for _, sc := range scenarios {
				t.Run(sc.name, func(t *testing.T) {
					sc.run(t, env{kern: openKernel(t), fam: fam})
				})
			}
		})
	}
}

// openKernel opens a fresh network namespace with kernel.Open, closed with
// the test.
func openKernel(t testing.TB) *kernel.Namespace {
	t.Helper()
	ns, err := kernel.Open(kerneltest.NewNS(t).Path())
	require.NoError(t, err)
	t.Cleanup(func() { _ = ns.Close() })
	return ns
}
