package ipsets_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/ipsets"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/netfilter"
)

// fakeEnv is the scenario environment of a kernelfake namespace, whose
// Runner serves ipset from its ipsetsfake kernel, with hash:net,net
// supported or not.
func fakeEnv(netnet bool) env {
	ns := kernelfake.New(kernelfake.Options{})
	k := ns.IPSets()
	if !netnet {
		k.SetUnsupported(netfilter.HashNetNet)
	}
	return env{
		kernel: ns,
		reference: func(t *testing.T, kname string, _ ipsets.Family, _ netfilter.SetType) func() {
			require.NoError(t, k.SetReferences(kname, 1))
			return func() { _ = k.SetReferences(kname, 0) }
		},
		netnet: netnet,
	}
}

// TestScenarios runs the scenario suite against the fake, as a kernel with
// every type and as one without hash:net,net (like this project's test
// machines).
func TestScenarios(t *testing.T) {
	for _, netnet := range []bool{true, false} {
		name := "AllTypes"
		if !netnet {
			name = "NoNetNet"
		}
		t.Run(name, func(t *testing.T) {
			for _, sc := range scenarios {
				t.Run(sc.name, func(t *testing.T) { sc.run(t, fakeEnv(netnet)) })
			}
		})
	}
}
