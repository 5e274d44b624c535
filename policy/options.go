package policy

import (
	"fmt"
	"log/slog"
	"slices"

	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/markbits"
	"github.com/nodeplane/nodeplane/netfilter"
)

// DenyAction is what a denied packet meets.
type DenyAction uint8

const (
	// DenyDrop drops it silently. The zero value.
	DenyDrop DenyAction = iota
	// DenyReject drops it and answers with ICMP administratively
	// prohibited, so that the sender fails at once.
	DenyReject
)

// ToHost is what happens to a packet from a workload to the host itself
// once the workload's egress policy allowed it.
type ToHost uint8

const (
	// ToHostReturn lets it go on through the rest of the INPUT hook (the
	// host's own firewall decides). The zero value.
	ToHostReturn ToHost = iota
	// ToHostAccept accepts it.
	ToHostAccept
	// ToHostDeny denies it (DenyAction): workloads cannot reach the host.
	ToHostDeny
)

// Dispatch is how packets find their workload's chains.
type Dispatch uint8

const (
	// DispatchTree is a tree of chains by interface-name prefix, on every
	// backend. The zero value.
	DispatchTree Dispatch = iota
	// DispatchVerdictMap is one lookup in a verdict map keyed by
	// interface name per direction: Filter must be an *nftables.Table.
	DispatchVerdictMap
)

// Options configure a Manager. Family, Filter, Marks, ChainPrefix and
// WorkloadPrefixes are required.
type Options struct {
	// Family is IPv4 or IPv6: one Manager per family.
	Family ipfamily.Family
	// Filter is the family's filter table (an *iptables.Table of the
	// "filter" table, or an *nftables.Table of the filter role). The
	// Manager declares its chains there and jumps to them from FORWARD and
	// INPUT, as the rules of owner Name: managers sharing the Table keep
	// each other's.
	Filter netfilter.Table
	// Raw is the family's raw table (optional): with it, host endpoints'
	// UntrackedTiers are rendered there, before connection tracking, and
	// a packet they allow is left untracked and accepted; without it, a
	// host endpoint with untracked tiers is refused. It must have the
	// Filter table's chain prefix. Rules there cannot match sets that
	// live in the Filter's nftables table: untracked rules should name
	// networks.
	Raw netfilter.Table
	// Mangle is the family's mangle table (optional): with it, host
	// endpoints' PreDNATTiers are rendered in its PREROUTING hook, before
	// destination NAT, so that they see the destination a client asked
	// for (a node port, say) rather than the backend it is sent to; a
	// packet they allow is accepted past the host endpoint's forwarded
	// ingress policy, one they deny is dropped, one they do not decide goes
	// on. Without it, a host endpoint with pre-DNAT tiers is refused. As
	// with Raw: the same chain prefix, and rules should name networks, not
	// nftables sets.
	Mangle netfilter.Table
	// Sets holds the address and named-port sets the rules match: an
	// *ipsets.IPSets beside an iptables Filter, an *nftables.IPSets of
	// the Filter table beside an nftables one. Without it, a rule that
	// names a set treats the set as empty.
	Sets netfilter.Sets
	// Marks are the mark bits the chains speak with: Accept, Pass and
	// Scratch0 must be distinct single bits (markbits.NewLayout gives
	// them).
	Marks markbits.Layout
	// ChainPrefix starts every chain name; it must be the Filter table's
	// chain prefix, at most 8 bytes.
	ChainPrefix string
	// WorkloadPrefixes are the name prefixes of workload interfaces
	// ("npv", "cali"). A packet from or to an interface with one of them
	// that no workload has is denied (fail closed).
	WorkloadPrefixes []string
	// Dispatch is how packets find their workload's chains; the zero
	// value is a tree of chains, which works on every backend.
	Dispatch Dispatch
	// Deny is what a denied packet meets; the zero value drops it.
	Deny DenyAction
	// EndpointToHost is what happens to workload-to-host traffic that the
	// workload's egress allowed; the zero value lets INPUT go on.
	EndpointToHost ToHost
	// WorkloadsReachHost exempts the traffic from a workload to the host
	// itself from the workload's egress policy, as Kubernetes'
	// NetworkPolicy has it (the traffic between a pod and its node is
	// always allowed; the host reaches its workloads whatever their
	// ingress policy in any case). EndpointToHost still applies:
	// ToHostAccept then accepts every such packet, ToHostDeny still denies
	// it. Without it (as Calico has it) a workload's egress policy decides
	// its traffic to the host too.
	WorkloadsReachHost bool
	// Failsafes are the ports no host endpoint's policy can close; nil
	// means DefaultFailsafes, an empty Failsafes none.
	Failsafes *Failsafes
	// LogLimit bounds how many packets a Log rule logs: each Log rule
	// logs at most this many and lets the others go on unlogged. nil means
	// DefaultLogLimit; a MatchLimit with Rate 0 means no limit.
	LogLimit *netfilter.MatchLimit
	// AllowInvalid keeps packets conntrack calls invalid; by default an
	// endpoint's chains deny them.
	AllowInvalid bool
	// Logger receives debug logs; nil discards them.
	Logger *slog.Logger
	// Name names the Manager in the loop's logs and owns its hook rules;
	// empty means "policy-v4" or "policy-v6".
	Name string
}

// ProtoPort is a protocol and port, such as tcp:22.
type ProtoPort struct {
	// Protocol is TCP, UDP or SCTP.
	Protocol netfilter.Proto
	// Port is the port.
	Port uint16
}

// String returns "tcp:22".
func (p ProtoPort) String() string { return fmt.Sprintf("%s:%d", p.Protocol, p.Port) }

// Failsafes are the ports a host endpoint's policy cannot close, so that a
// policy mistake never locks the node out: In by destination port to the
// host, Out by destination port from it.
type Failsafes struct {
	// In are accepted to the host through every host endpoint.
	In []ProtoPort
	// Out are accepted from the host through every host endpoint.
	Out []ProtoPort
}

// DefaultFailsafes returns Felix's defaults: in, SSH (tcp 22), DHCP (udp
// 68), BGP (tcp 179), etcd (tcp 2379, 2380), Typha (tcp 5473), the API
// server (tcp 6443, 6666, 6667); out, DNS (udp 53), DHCP (udp 67) and the
// same TCP ports but SSH.
func DefaultFailsafes() Failsafes {
	tcp := func(ports ...uint16) []ProtoPort {
		var out []ProtoPort
		for _, p := range ports {
			out = append(out, ProtoPort{Protocol: netfilter.ProtoTCP, Port: p})
		}
		return out
	}
	return Failsafes{
		In: slices.Concat(tcp(22), []ProtoPort{{Protocol: netfilter.ProtoUDP, Port: 68}}, tcp(179, 2379, 2380, 5473, 6443, 6666, 6667)),
		Out: slices.Concat([]ProtoPort{{Protocol: netfilter.ProtoUDP, Port: 53}, {Protocol: netfilter.ProtoUDP, Port: 67}},
			tcp(179, 2379, 2380, 5473, 6443, 6666, 6667)),
	}
}

// DefaultLogLimit returns the log limit Options.LogLimit nil means: 10
// packets per second per Log rule, in bursts of up to 20.
func DefaultLogLimit() netfilter.MatchLimit {
	return netfilter.MatchLimit{Rate: 10, Per: netfilter.PerSecond, Burst: 20}
}

// maxChainPrefix bounds ChainPrefix so that every chain name fits.
const maxChainPrefix = 8
