package routetable_test

import (
	"fmt"
	"net/netip"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	rt "github.com/nodeplane/nodeplane/routetable"
)

// fakeEnv is the scenario environment on a fake namespace. Faults are
// injected with the namespace's own Fail and Refuse; the env changes it
// through its Admin view, which is neither counted nor failed.
func fakeEnv(t *testing.T, fam rt.Family, table uint32) *env {
	t.Helper()
	ns := kernelfake.New(kernelfake.Options{})
	e := newEnv(t, fam, table, ns, ns.Admin())
	e.fake = true
	e.nsWrites = ns.Writes
	e.arm = func(f failure) {
		switch f {
		case failFirstWrite:
			ns.Fail(kernelfake.OpApplyRoutes, 1, nil)
		case failENODEV:
			ns.Fail(kernelfake.OpApplyRoutes, 1, syscall.ENODEV)
		case failENETDOWN:
			ns.Fail(kernelfake.OpApplyRoutes, 1, syscall.ENETDOWN)
		case failInterrupted:
			ns.Fail(kernelfake.OpDumpRoutes, 1, kernelfake.ErrInterrupted)
			ns.Fail(kernelfake.OpDumpInterfaceRoutes, 1, kernelfake.ErrInterrupted)
		case failDumpError:
			ns.Fail(kernelfake.OpDumpRoutes, 1, nil)
			ns.Fail(kernelfake.OpDumpInterfaceRoutes, 1, nil)
		case failLinks:
			ns.Fail(kernelfake.OpLinks, 1, nil)
		case failConntrack:
			ns.Fail(kernelfake.OpDeleteConntrack, 1, nil)
		case failDeleteFailed:
			refused := false
			ns.Refuse(func(_ kernelfake.Op, obj any) error {
				if op, ok := obj.(kernel.RouteOp); ok && op.Kind == kernel.OpDelete && !refused {
					refused = true
					return syscall.EBUSY
				}
				return nil
			})
		}
	}
	e.disarm = ns.ClearFailures
	e.waitRunning = func(t *testing.T, name string, on bool) {
		t.Helper()
		l, ok := ns.Link(name)
		require.True(t, ok, name)
		require.Equal(t, on, l.Running, "%s: running", name)
	}
	// The fake does not rename links: the old one goes, a new one (with a
	// new index) comes, which is what a Table sees of a rename anyway.
	e.renameLink = func(t *testing.T, name, newName string) {
		t.Helper()
		e.deleteLink(t, name)
		e.addLink(t, newName)
	}
	e.addFlow = func(_ *testing.T, src, dst netip.Addr) {
		ns.AddFlow(kernelfake.Flow{Family: fam, Src: src, Dst: dst})
	}
	e.flows = func(*testing.T) []string {
		var out []string
		for _, f := range ns.Flows() {
			out = append(out, fmt.Sprintf("%v %v", f.Src, f.Dst))
		}
		return out
	}
	return e
}

// TestScenarios runs the scenario suite against a fake namespace, for both
// families, once per failure kind.
func TestScenarios(t *testing.T) {
	for _, fam := range []rt.Family{rt.IPv4, rt.IPv6} {
		for _, f := range allFailures {
			t.Run(fmt.Sprintf("%v/%s", fam, f), func(t *testing.T) {
				for _, sc := range scenarios {
					t.Run(sc.name, func(t *testing.T) { sc.run(t, fakeEnv(t, fam, 1000), f) })
				}
			})
		}
	}
}

// TestScenariosMainTable runs the suite once in the main table.
func TestScenariosMainTable(t *testing.T) {
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) { sc.run(t, fakeEnv(t, rt.IPv4, kernel.TableMain), failNone) })
	}
}
