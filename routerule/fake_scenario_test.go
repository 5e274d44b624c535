//go:build linux

package routerule_test

import (
	"testing"

	"github.com/nodeplane/nodeplane/routerule"
	"github.com/nodeplane/nodeplane/routerule/routerulefake"
)

// TestScenarios runs the scenario suite against the fake kernel, for both
// families.
func TestScenarios(t *testing.T) {
	for _, fam := range []routerule.Family{routerule.IPv4, routerule.IPv6} {
		t.Run(fam.String(), func(t *testing.T) {
			for _, sc := range scenarios {
				t.Run(sc.name, func(t *testing.T) {
					sc.run(t, env{kern: routerulefake.New(), fam: fam})
				})
			}
		})
	}
}
