package routerule_test

import (
	"testing"

	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/routerule"
)

// TestScenarios runs the scenario suite against the fake namespace, for
// both families.
func TestScenarios(t *testing.T) {
	for _, fam := range []routerule.Family{routerule.IPv4, routerule.IPv6} {
		t.Run(fam.String(), func(t *testing.T) {
			for _, sc := range scenarios {
				t.Run(sc.name, func(t *testing.T) {
					sc.run(t, env{kern: kernelfake.New(kernelfake.Options{}), fam: fam})
				})
			}
		})
	}
}
