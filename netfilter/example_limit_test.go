package netfilter_test

import (
	"fmt"

	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/netfilter"
)

// A rule that logs new TCP connections, at most ten a second in bursts of
// up to twenty: the limit comes last, so only the packets the rule picks
// spend tokens. Both backends render it; a negated limit, which iptables
// cannot say, is refused.
func ExampleLimit() {
	logNew := netfilter.Rule{Matches: []netfilter.Match{
		netfilter.Protocol(netfilter.ProtoTCP),
		netfilter.ConntrackState(netfilter.CTStateNew),
		netfilter.Limit(10, netfilter.PerSecond, 20),
	}, Action: netfilter.Log("new-tcp: ")}
	fmt.Println(logNew.Validate(ipfamily.IPv4))
	over := netfilter.Rule{Matches: []netfilter.Match{netfilter.Not(netfilter.Limit(10, netfilter.PerSecond, 0))}, Action: netfilter.Drop()}
	fmt.Println(over.Validate(ipfamily.IPv4))
	// Output:
	// <nil>
	// netfilter: invalid rule: a negated limit match (iptables' limit module cannot match the packets over a limit) (criterion 0)
}
