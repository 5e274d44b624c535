package routetable_test

import (
	"fmt"
	"net/netip"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/clock"
	rt "github.com/nodeplane/nodeplane/routetable"
	"github.com/nodeplane/nodeplane/routetable/routetablefake"
)

// fakeEnv is the scenario environment backed by routetablefake. Faults are
// injected with the fake's own Inject.
func fakeEnv(fam rt.Family, table uint32) *env {
	k := routetablefake.New()
	e := &env{fam: fam, table: table, kernel: &recorder{k: k}, fake: true, clock: clock.NewFake(t0)}
	e.arm = func(f failure) {
		switch f {
		case failFirstWrite:
			k.Inject(routetablefake.Fault{Call: routetablefake.CallReplace})
			k.Inject(routetablefake.Fault{Call: routetablefake.CallDelete})
		case failENODEV:
			k.Inject(routetablefake.Fault{Call: routetablefake.CallReplace, Err: syscall.ENODEV})
		case failENETDOWN:
			k.Inject(routetablefake.Fault{Call: routetablefake.CallReplace, Err: syscall.ENETDOWN})
		case failInterrupted:
			k.Inject(routetablefake.Fault{Call: routetablefake.CallDump, Interrupt: true})
			k.Inject(routetablefake.Fault{Call: routetablefake.CallDumpInterface, Interrupt: true})
		case failDumpError:
			k.Inject(routetablefake.Fault{Call: routetablefake.CallDump})
			k.Inject(routetablefake.Fault{Call: routetablefake.CallDumpInterface})
		case failLinks:
			k.Inject(routetablefake.Fault{Call: routetablefake.CallLinks})
		case failConntrack:
			k.Inject(routetablefake.Fault{Call: routetablefake.CallConntrack})
		case failDeleteFailed:
			k.Inject(routetablefake.Fault{Call: routetablefake.CallDelete, Err: syscall.EBUSY})
		}
	}
	e.disarm = k.ClearFaults
	n := 0
	e.addLink = func(t *testing.T, name string) int {
		t.Helper()
		idx, err := k.AddLink(name)
		require.NoError(t, err)
		require.NoError(t, k.SetLinkUp(name, true))
		n++
		return idx
	}
	e.setUp = func(t *testing.T, name string, up bool) { t.Helper(); require.NoError(t, k.SetLinkUp(name, up)) }
	e.setCarrier = func(t *testing.T, name string, on bool) { t.Helper(); require.NoError(t, k.SetLinkCarrier(name, on)) }
	e.deleteLink = func(t *testing.T, name string) { t.Helper(); require.NoError(t, k.DeleteLink(name)) }
	e.renameLink = func(t *testing.T, name, newName string) {
		t.Helper()
		require.NoError(t, k.SetLinkUp(name, false))
		require.NoError(t, k.RenameLink(name, newName))
		require.NoError(t, k.SetLinkUp(newName, true))
	}
	e.addRoute = func(t *testing.T, r rt.KernelRoute) { t.Helper(); require.NoError(t, k.AddRoute(r)) }
	e.deleteRoute = func(t *testing.T, r rt.KernelRoute) { t.Helper(); require.NoError(t, k.DeleteRoute(r)) }
	e.addFlow = func(_ *testing.T, src, dst netip.Addr) {
		k.AddFlow(routetablefake.Flow{Family: fam, Src: src, Dst: dst})
	}
	e.flows = func(*testing.T) []string {
		var out []string
		for _, f := range k.Flows() {
			out = append(out, fmt.Sprintf("%v %v", f.Src, f.Dst))
		}
		return out
	}
	e.neighbors = func(*testing.T) []rt.Neighbor { return k.NeighborList(fam) }
	return e
}

// TestScenarios runs the scenario suite against the fake kernel, for both
// families, once per failure kind.
func TestScenarios(t *testing.T) {
	for _, fam := range []rt.Family{rt.IPv4, rt.IPv6} {
		for _, f := range allFailures {
			t.Run(fmt.Sprintf("%v/%s", fam, f), func(t *testing.T) {
				for _, sc := range scenarios {
					t.Run(sc.name, func(t *testing.T) { sc.run(t, fakeEnv(fam, 1000), f) })
				}
			})
		}
	}
}

// TestScenariosMainTable runs the suite once in the main table.
func TestScenariosMainTable(t *testing.T) {
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) { sc.run(t, fakeEnv(rt.IPv4, rt.TableMain), failNone) })
	}
}
