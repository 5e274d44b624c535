//go:build linux

package policy_test

import (
	"net/netip"
	"testing"

	"github.com/nodeplane/nodeplane/internal/testkit/managertest"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/policy"
)

// Options.WorkloadsReachHost: a pod whose egress policy denies everything
// reaches a server of its host (at the host's underlay address) only with
// the option, as Kubernetes' NetworkPolicy has it; its egress to another
// pod stays denied either way, and EndpointToHost ToHostDeny still keeps
// it from the host. Each backend, dispatch and family.
func TestKernelPolicyWorkloadsReachHost(t *testing.T) {
	forEachDispatch(t, func(t *testing.T, b managertest.Backend, d policy.Dispatch) {
		managertest.ForEachFamily(t, func(t *testing.T, f ipfamily.Family) {
			for _, c := range []struct {
				name      string
				reachHost bool
				toHost    policy.ToHost
				want      bool
			}{
				{"egress policy decides", false, policy.ToHostReturn, false},
				{"exempt", true, policy.ToHostReturn, true},
				{"exempt, accepted", true, policy.ToHostAccept, true},
				{"exempt, but denied", true, policy.ToHostDeny, false},
			} {
				t.Run(c.name, func(t *testing.T) {
					n := newNode(t, b, f, policy.Options{Deny: policy.DenyReject, Dispatch: d, WorkloadsReachHost: c.reachHost, EndpointToHost: c.toHost})
					host := n.topo.Hosts[0]
					hostAddr := managertest.Pick(f, host.UnderlayAddrs()...)
					server, _ := host.NS.ListenTCP(t, netip.AddrPortFrom(netip.Addr{}, 0))
					p1, p2 := n.pod(0), n.pod(1)
					isolated := []policy.TierPolicies{{Name: "k8s", Egress: []string{"deny-all"}}}
					n.send(allowAll, policy.PolicyUpdate{Policy: policy.Policy{ID: "deny-all", Egress: []policy.Rule{{Action: policy.Deny}}}},
						workload(p1, isolated, "ns.default"), workload(p2, nil, "ns.default"))
					to := netip.AddrPortFrom(hostAddr, server.Port())
					if got := tcpReaches(t, p1.NS, to); got != c.want {
						t.Errorf("isolated pod → host %v: reached = %v, want %v\n%s", to, got, c.want, b.Dump(t, host.NS, "filter", f))
					}
					if !tcpReaches(t, p2.NS, to) && c.toHost != policy.ToHostDeny {
						t.Errorf("open pod → host %v: not reached", to)
					}
					if n.reaches(p1, p2) {
						t.Errorf("isolated pod → another pod: reached")
					}
				})
			}
		})
	})
}
