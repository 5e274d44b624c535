//go:build linux

package routerulefake_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/nodeplane/nodeplane/internal/kerneltest"
	"github.com/nodeplane/nodeplane/routerule/routerulefake"
)

// TestKernelFakeMatchesKernel runs the same netlink calls against the fake
// and against a fresh network namespace and requires the same answer to
// every call and the same dump after every call.
func TestKernelFakeMatchesKernel(t *testing.T) {
	ns := kerneltest.NewNS(t)
	kErrs, kDumps := runSteps(t, ns.Handle())
	fErrs, fDumps := runSteps(t, routerulefake.New())
	for i, s := range steps {
		assert.Equal(t, kErrs[i], fErrs[i], "step %q: errno", s.name)
		assert.Equal(t, kDumps[i], fDumps[i], "step %q: dump", s.name)
		assert.Equal(t, s.want, kErrs[i], "step %q: the kernel's errno differs from the documented one", s.name)
	}
}
