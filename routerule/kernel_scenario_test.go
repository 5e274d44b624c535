//go:build linux

package routerule_test

import (
	"testing"

	"github.com/nodeplane/nodeplane/internal/kerneltest"
	"github.com/nodeplane/nodeplane/routerule"
)

// TestKernelScenarios runs the scenario suite against the real kernel, each
// scenario in a fresh network namespace, for both families.
func TestKernelScenarios(t *testing.T) {
	kerneltest.RequireKernel(t)
	for _, fam := range []routerule.Family{routerule.IPv4, routerule.IPv6} {
		t.Run(fam.String(), func(t *testing.T) {
			for _, sc := range scenarios {
				t.Run(sc.name, func(t *testing.T) {
					ns := kerneltest.NewNS(t)
					sc.run(t, env{kern: ns.Handle(), fam: fam})
				})
			}
		})
	}
}
