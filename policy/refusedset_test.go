package policy_test

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/internal/testkit/managertest"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/ipsets"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/netfilter"
	"github.com/nodeplane/nodeplane/policy"
)

// refusingSets is a set driver that refuses to declare the set named
// refuse, as a driver refuses a set the kernel cannot hold.
type refusingSets struct {
	*ipsets.IPSets
	refuse *string
}

func (s refusingSets) AddOrReplaceSet(meta netfilter.SetMetadata, members []netfilter.Member) error {
	if meta.Name == *s.refuse {
		return fmt.Errorf("%w: refused by the test's driver", netfilter.ErrInvalidMember)
	}
	return s.IPSets.AddOrReplaceSet(meta, members)
}

// A set the set driver refuses takes out the rules that name it as an
// exception (every packet is in it), as it does those that name it as an
// alternative (none is): an allow with a refused exception never allows
// what the exception was to keep out, and Explain says what the kernel
// does. Once the driver takes the set, the rules that name it are
// rendered again with it.
func TestRefusedSetFailsClosed(t *testing.T) {
	ns := kernelfake.New(kernelfake.Options{})
	refuse := "ssh"
	sets := refusingSets{IPSets: managertest.FakeSets(t, ns, ipfamily.IPv4, "np4-"), refuse: &refuse}
	n := newFakeNodeWithOn(t, ns, ipfamily.IPv4, func(o *policy.Options) { o.Sets = sets })
	pod := netip.MustParseAddr("10.244.1.5")
	client := netip.MustParseAddr("10.0.0.66")
	ssh := policy.SetUpdate{ID: "ssh", Kind: policy.SetAddrPorts,
		Members: []netfilter.Member{netfilter.IPPortMember(pod, netfilter.ProtoTCP, 22)}}
	err := n.send(ssh,
		policy.PolicyUpdate{Policy: policy.Policy{ID: "p", Ingress: []policy.Rule{
			{Action: policy.Allow, Protocol: netfilter.ProtoTCP, Dst: policy.Peer{NotNamedPorts: []string{"ssh"}}},
		}}},
		policy.WorkloadUpdate{Endpoint: policy.Workload{ID: "w1", Iface: "npv1",
			Tiers: []policy.TierPolicies{{Name: "k8s", Ingress: []string{"p"}}}}})
	require.ErrorContains(t, err, "set ssh")
	n.apply()
	verdict := func(proto netfilter.Proto, port uint16) string {
		return n.m.Model().Explain(policy.Packet{Src: client, Dst: pod, Protocol: proto, SrcPort: 40000, DstPort: port}, "w1", true).String()
	}
	policyRules := func() string { return strings.Join(n.chain("np-pi-p"), "\n") }
	// The exception's match is every packet: the rule's scratch mark,
	// set for TCP, is cleared again with no condition but TCP's.
	assert.NotContains(t, policyRules(), "--match-set")
	assert.Contains(t, policyRules(), "-p tcp -m mark --mark 0x40000/0x40000 -m comment --comment \"p rule 0\" -j MARK --set-xmark 0x0/0x40000")
	for _, port := range []uint16{22, 80} {
		assert.True(t, strings.HasPrefix(verdict(netfilter.ProtoTCP, port), "denied"), "%d: %s", port, verdict(netfilter.ProtoTCP, port))
	}

	refuse = ""
	require.NoError(t, n.send(ssh))
	_, err = sets.Apply(context.Background())
	require.NoError(t, err)
	n.apply()
	assert.Contains(t, policyRules(), "--match-set", "rendered again once the set is in")
	assert.True(t, strings.HasPrefix(verdict(netfilter.ProtoTCP, 22), "denied"), verdict(netfilter.ProtoTCP, 22))
	assert.True(t, strings.HasPrefix(verdict(netfilter.ProtoTCP, 80), "allowed"), verdict(netfilter.ProtoTCP, 80))
}

// An address-port member with the unspecified address is refused with its
// update, which changes nothing: no kernel set can hold it.
func TestSetUpdateRefusesUnspecifiedAddrPort(t *testing.T) {
	for _, a := range []netip.Addr{netip.IPv4Unspecified(), netip.IPv6Unspecified()} {
		u := policy.SetUpdate{ID: "ssh", Kind: policy.SetAddrPorts,
			Members: []netfilter.Member{netfilter.IPPortMember(a, netfilter.ProtoTCP, 22)}}
		require.ErrorIs(t, u.Validate(), policy.ErrInvalidSet, a.String())
		m := policy.NewModel()
		_, err := m.Update(policy.SetUpdate{ID: "ssh", Kind: policy.SetAddrPorts})
		require.NoError(t, err)
		_, err = m.Update(policy.SetDelta{ID: "ssh", Add: []netfilter.Member{netfilter.IPPortMember(a, netfilter.ProtoTCP, 22)}})
		require.ErrorIs(t, err, policy.ErrInvalidSet, a.String())
		assert.False(t, m.HasMember("ssh", netfilter.IPPortMember(a, netfilter.ProtoTCP, 22)))
	}
}

// A rule that names a set of the wrong kind — addresses as named ports,
// named ports as addresses — matches no packet, as an alternative or as an
// exception, on every backend alike (the iptables writer would otherwise
// match the address alone, or nothing, and the nftables one refuse the
// policy); Explain agrees. Giving the set again with the right kind
// renders the rules with it.
func TestSetOfTheWrongKindMatchesNothing(t *testing.T) {
	ns := kernelfake.New(kernelfake.Options{})
	sets := managertest.FakeSets(t, ns, ipfamily.IPv4, "np4-")
	n := newFakeNodeWithOn(t, ns, ipfamily.IPv4, func(o *policy.Options) { o.Sets = sets })
	pod := netip.MustParseAddr("10.244.1.5")
	client := netip.MustParseAddr("10.0.0.66")
	nets := policy.SetUpdate{ID: "pods", Kind: policy.SetNets, Members: []netfilter.Member{netfilter.NetMember(netip.PrefixFrom(pod, 32))}}
	ports := policy.SetUpdate{ID: "web", Kind: policy.SetAddrPorts, Members: []netfilter.Member{netfilter.IPPortMember(pod, netfilter.ProtoTCP, 80)}}
	require.NoError(t, n.send(nets, ports,
		policy.PolicyUpdate{Policy: policy.Policy{ID: "p", Ingress: []policy.Rule{
			{Action: policy.Allow, Protocol: netfilter.ProtoTCP, Dst: policy.Peer{NamedPorts: []string{"pods"}}},
			{Action: policy.Allow, Protocol: netfilter.ProtoTCP, Dst: policy.Peer{Sets: []string{"web"}}},
			{Action: policy.Allow, Protocol: netfilter.ProtoUDP, Dst: policy.Peer{NotSets: []string{"web"}}},
		}}},
		policy.WorkloadUpdate{Endpoint: policy.Workload{ID: "w1", Iface: "npv1",
			Tiers: []policy.TierPolicies{{Name: "k8s", Ingress: []string{"p"}}}}}))
	n.apply()
	verdict := func(proto netfilter.Proto, port uint16) string {
		return n.m.Model().Explain(policy.Packet{Src: client, Dst: pod, Protocol: proto, SrcPort: 40000, DstPort: port}, "w1", true).String()
	}
	policyRules := strings.Join(n.chain("np-pi-p"), "\n")
	assert.NotContains(t, policyRules, "--match-set", "no rule matches a set of the wrong kind")
	for _, c := range []struct {
		proto netfilter.Proto
		port  uint16
	}{{netfilter.ProtoTCP, 80}, {netfilter.ProtoTCP, 22}, {netfilter.ProtoUDP, 53}} {
		assert.True(t, strings.HasPrefix(verdict(c.proto, c.port), "denied"), "%v %d: %s", c.proto, c.port, verdict(c.proto, c.port))
	}

	// The sets again, each of the kind its rules want.
	nets.ID, ports.ID = "web", "pods"
	require.NoError(t, n.send(nets, ports))
	_, err := sets.Apply(context.Background())
	require.NoError(t, err)
	n.apply()
	policyRules = strings.Join(n.chain("np-pi-p"), "\n")
	assert.Equal(t, 3, strings.Count(policyRules, "--match-set"), policyRules)
	assert.True(t, strings.HasPrefix(verdict(netfilter.ProtoTCP, 80), "allowed"), verdict(netfilter.ProtoTCP, 80))
	assert.True(t, strings.HasPrefix(verdict(netfilter.ProtoUDP, 53), "denied"), verdict(netfilter.ProtoUDP, 53))
}
