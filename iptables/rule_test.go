package iptables

import (
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/ipfamily"
)

// The -update flag regenerates testdata/rules/*.golden. It is registered
// only if no other test file of the package registered it first.
func init() {
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite golden files under testdata/")
	}
}

// rmUpdate reports whether the test run was given -update.
func rmUpdate() bool {
	f := flag.Lookup("update")
	if f == nil {
		return false
	}
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return false
	}
	b, _ := g.Get().(bool)
	return b
}

// rmTarget is the user chain the golden rules jump to.
const rmTarget = "NP-TARGET"

// rmCase is one golden rule: the rule, the IP version and built-in chain it
// is tried in, and the arguments it must render to.
type rmCase struct {
	name  string
	v     IPVersion
	table string
	chain string
	rule  Rule
	want  []string
	// saveDiffers says why iptables-save prints the rule back differently
	// (the kernel test then checks only that it is there); "" when it
	// prints exactly want.
	saveDiffers string
}

// rmTables is the order of tables in the golden files.
var rmTables = []string{"filter", "mangle", "nat", "raw"}

// rmSetNames are the IP sets the golden rules use, per version, with their
// ipset types.
var rmSetNames = map[IPVersion][][2]string{
	IPv4: {{"np-net4", "hash:net"}, {"np-ipport4", "hash:ip,port"}, {"np-ipportnet4", "hash:ip,port,net"}},
	IPv6: {{"np-net6", "hash:net"}, {"np-ipport6", "hash:ip,port"}, {"np-ipportnet6", "hash:ip,port,net"}},
}

func rmPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }
func rmAddr(s string) netip.Addr     { return netip.MustParseAddr(s) }

// rmArgs splits a space-separated argument list; "_" stands for a space
// inside one argument.
func rmArgs(s string) []string {
	f := strings.Fields(s)
	for i := range f {
		f[i] = strings.ReplaceAll(f[i], "_", " ")
	}
	return f
}

// rmGoldenCases returns every golden rule, IPv4 then IPv6.
func rmGoldenCases() []rmCase {
	m := func(c ...Criterion) Match { return c }
	v4 := []rmCase{
		{name: "accept all", table: "filter", chain: "INPUT", rule: Rule{Action: Accept()}, want: rmArgs("-j ACCEPT")},
		{name: "source net", table: "filter", chain: "INPUT",
			rule: Rule{Match: m(SourceNet(rmPrefix("10.0.0.0/8"))), Action: Drop()},
			want: rmArgs("-s 10.0.0.0/8 -j DROP")},
		{name: "not source net", table: "filter", chain: "INPUT",
			rule: Rule{Match: m(NotSourceNet(rmPrefix("192.168.0.0/16"))), Action: Accept()},
			want: rmArgs("! -s 192.168.0.0/16 -j ACCEPT")},
		{name: "dest host", table: "filter", chain: "INPUT",
			rule: Rule{Match: m(DestNet(rmPrefix("10.0.0.1/32"))), Action: Return()},
			want: rmArgs("-d 10.0.0.1/32 -j RETURN")},
		{name: "not dest net", table: "filter", chain: "OUTPUT",
			rule: Rule{Match: m(NotDestNet(rmPrefix("172.16.0.0/12"))), Action: Accept()},
			want: rmArgs("! -d 172.16.0.0/12 -j ACCEPT")},
		{name: "whole address space", table: "filter", chain: "INPUT",
			rule:        Rule{Match: m(SourceNet(rmPrefix("0.0.0.0/0"))), Action: Accept()},
			want:        rmArgs("-s 0.0.0.0/0 -j ACCEPT"),
			saveDiffers: "iptables-save leaves out a /0 source"},
		{name: "header criteria first", table: "filter", chain: "INPUT",
			rule: Rule{Match: m(Protocol(ProtoTCP), DestPorts(Port(80)), InInterface("eth0"),
				DestNet(rmPrefix("10.0.0.0/24")), SourceNet(rmPrefix("10.1.0.0/16"))), Action: Accept()},
			want: rmArgs("-s 10.1.0.0/16 -d 10.0.0.0/24 -i eth0 -p tcp -m tcp --dport 80 -j ACCEPT")},
		{name: "udp source port range", table: "filter", chain: "INPUT",
			rule: Rule{Match: m(Protocol(ProtoUDP), SourcePorts(Ports(1000, 2000))), Action: Accept()},
			want: rmArgs("-p udp -m udp --sport 1000:2000 -j ACCEPT")},
		{name: "multiport", table: "filter", chain: "INPUT",
			rule: Rule{Match: m(Protocol(ProtoTCP), DestPorts(Port(22), Port(80), Ports(8000, 8080))), Action: Accept()},
			want: rmArgs("-p tcp -m multiport --dports 22,80,8000:8080 -j ACCEPT")},
		{name: "multiport one-port range", table: "filter", chain: "INPUT",
			rule: Rule{Match: m(Protocol(ProtoTCP), SourcePorts(Ports(7, 7), Port(9))), Action: Accept()},
			want: rmArgs("-p tcp -m multiport --sports 7,9 -j ACCEPT")},
		{name: "not dest port", table: "filter", chain: "INPUT",
			rule: Rule{Match: m(Protocol(ProtoTCP), NotDestPorts(Port(22))), Action: Drop()},
			want: rmArgs("-p tcp -m tcp ! --dport 22 -j DROP")},
		{name: "sctp not source multiport", table: "filter", chain: "INPUT",
			rule: Rule{Match: m(Protocol(ProtoSCTP), NotSourcePorts(Port(1), Port(2))), Action: Drop()},
			want: rmArgs("-p sctp -m multiport ! --sports 1,2 -j DROP")},
		{name: "sctp single port", table: "filter", chain: "INPUT",
			rule: Rule{Match: m(Protocol(ProtoSCTP), DestPorts(Port(3868))), Action: Accept()},
			want: rmArgs("-p sctp -m sctp --dport 3868 -j ACCEPT")},
		{name: "fifteen ports", table: "filter", chain: "INPUT",
			rule: Rule{Match: m(Protocol(ProtoUDP), DestPorts(Port(1), Port(2), Port(3), Port(4), Port(5), Port(6),
				Port(7), Port(8), Port(9), Port(10), Port(11), Port(12), Port(13), Ports(14, 15))), Action: Accept()},
			want: rmArgs("-p udp -m multiport --dports 1,2,3,4,5,6,7,8,9,10,11,12,13,14:15 -j ACCEPT")},
		{name: "source and dest ports", table: "filter", chain: "INPUT",
			rule: Rule{Match: m(Protocol(ProtoTCP), SourcePorts(Port(1024)), DestPorts(Port(443))), Action: Accept()},
			want: rmArgs("-p tcp -m tcp --sport 1024 --dport 443 -j ACCEPT")},
		{name: "source and dest ports share one match", table: "filter", chain: "INPUT",
			rule: Rule{Match: m(Protocol(ProtoUDP), NotSourcePorts(Port(53)), MarkMatches(1, 1), DestPorts(Ports(1, 2))), Action: Accept()},
			want: rmArgs("-p udp -m udp ! --sport 53 --dport 1:2 -m mark --mark 0x1/0x1 -j ACCEPT")},
		{name: "dest before source port", table: "filter", chain: "INPUT",
			rule: Rule{Match: m(Protocol(ProtoSCTP), ConntrackState(CTStateNew), DestPorts(Port(9)), SourcePorts(Port(8))), Action: Accept()},
			want: rmArgs("-p sctp -m conntrack --ctstate NEW -m sctp --sport 8 --dport 9 -j ACCEPT")},
		{name: "single port and multiport", table: "filter", chain: "INPUT",
			rule: Rule{Match: m(Protocol(ProtoTCP), SourcePorts(Port(1), Port(2)), DestPorts(Port(3))), Action: Accept()},
			want: rmArgs("-p tcp -m multiport --sports 1,2 -m tcp --dport 3 -j ACCEPT")},
		{name: "negated low range", table: "filter", chain: "INPUT",
			rule: Rule{Match: m(Protocol(ProtoTCP), NotDestPorts(Ports(0, 1))), Action: Accept()},
			want: rmArgs("-p tcp -m tcp --dport 2:65535 -j ACCEPT")},
		{name: "negated port zero", table: "filter", chain: "INPUT",
			rule: Rule{Match: m(Protocol(ProtoTCP), NotDestPorts(Port(0))), Action: Accept()},
			want: rmArgs("-p tcp -m tcp ! --dport 0 -j ACCEPT")},
		{name: "not protocol", table: "filter", chain: "INPUT",
			rule: Rule{Match: m(NotProtocol(ProtoUDP)), Action: Accept()},
			want: rmArgs("! -p udp -j ACCEPT")},
		{name: "esp", table: "filter", chain: "INPUT", rule: Rule{Match: m(Protocol(ProtoESP)), Action: Accept()},
			want: rmArgs("-p esp -j ACCEPT")},
		{name: "ah", table: "filter", chain: "INPUT", rule: Rule{Match: m(Protocol(ProtoAH)), Action: Accept()},
			want: rmArgs("-p ah -j ACCEPT")},
		{name: "udplite", table: "filter", chain: "INPUT", rule: Rule{Match: m(Protocol(ProtoUDPLite)), Action: Accept()},
			want: rmArgs("-p udplite -j ACCEPT")},
		{name: "protocol by number", table: "filter", chain: "INPUT", rule: Rule{Match: m(Protocol(ProtoGRE)), Action: Accept()},
			want:        rmArgs("-p 47 -j ACCEPT"),
			saveDiffers: "iptables-save names the protocol from /etc/protocols"},
		{name: "interfaces", table: "filter", chain: "FORWARD",
			rule: Rule{Match: m(InInterface("eth+"), NotOutInterface("veth0")), Action: Accept()},
			want: rmArgs("-i eth+ ! -o veth0 -j ACCEPT")},
		{name: "not in interface", table: "filter", chain: "INPUT",
			rule: Rule{Match: m(NotInInterface("lo")), Action: Accept()},
			want: rmArgs("! -i lo -j ACCEPT")},
		{name: "out interface longest name", table: "filter", chain: "OUTPUT",
			rule: Rule{Match: m(OutInterface("abcdefghijklmn+")), Action: Accept()},
			want: rmArgs("-o abcdefghijklmn+ -j ACCEPT")},
		{name: "mark", table: "filter", chain: "INPUT",
			rule: Rule{Match: m(MarkMatches(0x1, 0x1)), Action: Accept()},
			want: rmArgs("-m mark --mark 0x1/0x1 -j ACCEPT")},
		{name: "not mark", table: "filter", chain: "INPUT",
			rule: Rule{Match: m(NotMarkMatches(0x100, 0xff00)), Action: Accept()},
			want: rmArgs("-m mark ! --mark 0x100/0xff00 -j ACCEPT")},
		{name: "mark full mask", table: "filter", chain: "INPUT",
			rule: Rule{Match: m(MarkMatches(0xdead, 0xffffffff)), Action: Accept()},
			want: rmArgs("-m mark --mark 0xdead -j ACCEPT")},
		{name: "source set", table: "filter", chain: "INPUT",
			rule: Rule{Match: m(SourceIPSet("np-net4")), Action: Accept()},
			want: rmArgs("-m set --match-set np-net4 src -j ACCEPT")},
		{name: "not dest set", table: "filter", chain: "INPUT",
			rule: Rule{Match: m(NotDestIPSet("np-net4")), Action: Drop()},
			want: rmArgs("-m set ! --match-set np-net4 dst -j DROP")},
		{name: "two-dimension set", table: "filter", chain: "INPUT",
			rule: Rule{Match: m(IPSetMatch("np-ipport4", Dst, Dst)), Action: Accept()},
			want: rmArgs("-m set --match-set np-ipport4 dst,dst -j ACCEPT")},
		{name: "three-dimension set and not source set", table: "filter", chain: "FORWARD",
			rule: Rule{Match: m(IPSetMatch("np-ipportnet4", Dst, Dst, Src), NotSourceIPSet("np-net4")), Action: Accept()},
			want: rmArgs("-m set --match-set np-ipportnet4 dst,dst,src -m set ! --match-set np-net4 src -j ACCEPT")},
		{name: "conntrack", table: "filter", chain: "INPUT",
			rule: Rule{Match: m(ConntrackState(CTStateEstablished, CTStateRelated)), Action: Accept()},
			want: rmArgs("-m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT")},
		{name: "not conntrack", table: "filter", chain: "INPUT",
			rule: Rule{Match: m(NotConntrackState(CTStateInvalid)), Action: Accept()},
			want: rmArgs("-m conntrack ! --ctstate INVALID -j ACCEPT")},
		{name: "conntrack every state", table: "filter", chain: "INPUT",
			rule: Rule{Match: m(ConntrackState(CTStateDNAT, CTStateSNAT, CTStateUntracked, CTStateEstablished,
				CTStateRelated, CTStateNew, CTStateInvalid)), Action: Accept()},
			want: rmArgs("-m conntrack --ctstate INVALID,NEW,RELATED,ESTABLISHED,UNTRACKED,SNAT,DNAT -j ACCEPT")},
		{name: "dest address type", table: "filter", chain: "INPUT",
			rule: Rule{Match: m(DestAddrType(AddrTypeLocal)), Action: Accept()},
			want: rmArgs("-m addrtype --dst-type LOCAL -j ACCEPT")},
		{name: "not source address types", table: "filter", chain: "INPUT",
			rule: Rule{Match: m(NotSourceAddrType(AddrTypeMulticast | AddrTypeBroadcast)), Action: Accept()},
			want: rmArgs("-m addrtype ! --src-type BROADCAST,MULTICAST -j ACCEPT")},
		{name: "address type limit in", table: "filter", chain: "INPUT",
			rule: Rule{Match: m(AddrTypeMatch{Types: AddrTypeLocal, Dir: Dst, LimitIfaceIn: true}), Action: Accept()},
			want: rmArgs("-m addrtype --dst-type LOCAL --limit-iface-in -j ACCEPT")},
		{name: "address type limit out", table: "filter", chain: "OUTPUT",
			rule: Rule{Match: m(AddrTypeMatch{Types: AddrTypeUnicast | AddrTypeLocal, Dir: Src, LimitIfaceOut: true}), Action: Accept()},
			want: rmArgs("-m addrtype --src-type UNICAST,LOCAL --limit-iface-out -j ACCEPT")},
		{name: "not dest address type", table: "filter", chain: "INPUT",
			rule: Rule{Match: m(NotDestAddrType(AddrTypeBlackhole | AddrTypeUnreachable | AddrTypeProhibit)), Action: Drop()},
			want: rmArgs("-m addrtype ! --dst-type BLACKHOLE,UNREACHABLE,PROHIBIT -j DROP")},
		{name: "icmp type brings protocol", table: "filter", chain: "INPUT",
			rule: Rule{Match: m(ICMPType(8)), Action: Accept()},
			want: rmArgs("-p icmp -m icmp --icmp-type 8 -j ACCEPT")},
		{name: "icmp type code with protocol", table: "filter", chain: "INPUT",
			rule: Rule{Match: m(ICMPTypeCode(3, 4), Protocol(ProtoICMP)), Action: Accept()},
			want: rmArgs("-p icmp -m icmp --icmp-type 3/4 -j ACCEPT")},
		{name: "not icmp type", table: "filter", chain: "INPUT",
			rule: Rule{Match: m(ICMPMatch{Version: IPv4, Type: 0, Negate: true}), Action: Drop()},
			want: rmArgs("-p icmp -m icmp ! --icmp-type 0 -j DROP")},
		{name: "icmp any type", table: "filter", chain: "INPUT",
			rule: Rule{Match: m(ICMPType(255)), Action: Accept()},
			want: rmArgs("-p icmp -m icmp --icmp-type any -j ACCEPT")},
		{name: "comments", table: "filter", chain: "INPUT",
			rule: Rule{Match: m(Protocol(ProtoTCP)), Action: Accept(), Comments: []string{"allow web", "np:AbC-x9", "café it's"}},
			want: rmArgs("-p tcp -m comment --comment allow_web -m comment --comment np:AbC-x9 -m comment --comment café_it's -j ACCEPT")},
		{name: "drop", table: "filter", chain: "FORWARD", rule: Rule{Action: Drop()}, want: rmArgs("-j DROP")},
		{name: "return", table: "filter", chain: "FORWARD", rule: Rule{Action: Return()}, want: rmArgs("-j RETURN")},
		{name: "reject default", table: "filter", chain: "INPUT", rule: Rule{Action: Reject(RejectPortUnreachable)},
			want: rmArgs("-j REJECT --reject-with icmp-port-unreachable")},
		{name: "reject tcp reset", table: "filter", chain: "INPUT",
			rule: Rule{Match: m(Protocol(ProtoTCP)), Action: Reject(RejectTCPReset)},
			want: rmArgs("-p tcp -j REJECT --reject-with tcp-reset")},
		{name: "reject admin prohibited", table: "filter", chain: "INPUT", rule: Rule{Action: Reject(RejectAdminProhibited)},
			want: rmArgs("-j REJECT --reject-with icmp-admin-prohibited")},
		{name: "reject net unreachable", table: "filter", chain: "INPUT", rule: Rule{Action: Reject(RejectNetUnreachable)},
			want: rmArgs("-j REJECT --reject-with icmp-net-unreachable")},
		{name: "reject host unreachable", table: "filter", chain: "INPUT", rule: Rule{Action: Reject(RejectHostUnreachable)},
			want: rmArgs("-j REJECT --reject-with icmp-host-unreachable")},
		{name: "reject proto unreachable", table: "filter", chain: "INPUT", rule: Rule{Action: Reject(RejectProtoUnreachable)},
			want: rmArgs("-j REJECT --reject-with icmp-proto-unreachable")},
		{name: "reject net prohibited", table: "filter", chain: "INPUT", rule: Rule{Action: Reject(RejectNetProhibited)},
			want: rmArgs("-j REJECT --reject-with icmp-net-prohibited")},
		{name: "reject host prohibited", table: "filter", chain: "INPUT", rule: Rule{Action: Reject(RejectHostProhibited)},
			want: rmArgs("-j REJECT --reject-with icmp-host-prohibited")},
		{name: "jump", table: "filter", chain: "INPUT", rule: Rule{Match: m(InInterface("eth0")), Action: Jump(rmTarget)},
			want: rmArgs("-i eth0 -j NP-TARGET")},
		{name: "goto", table: "filter", chain: "FORWARD", rule: Rule{Action: Goto(rmTarget)},
			want: rmArgs("-g NP-TARGET")},
		{name: "log", table: "filter", chain: "INPUT", rule: Rule{Action: Log(LogOptions{Prefix: "np drop: "})},
			want: rmArgs("-j LOG --log-prefix np_drop:_")},
		{name: "log level", table: "filter", chain: "INPUT",
			rule: Rule{Action: Log(LogOptions{Prefix: "12345678901234567890123456789", Level: LogLevelDebug})},
			want: rmArgs("-j LOG --log-prefix 12345678901234567890123456789 --log-level 7")},
		{name: "log warning is default", table: "filter", chain: "INPUT", rule: Rule{Action: Log(LogOptions{Level: LogLevelWarning})},
			want: rmArgs("-j LOG")},
		{name: "log emerg", table: "filter", chain: "INPUT", rule: Rule{Action: Log(LogOptions{Level: LogLevelEmerg})},
			want: rmArgs("-j LOG --log-level 0")},
		{name: "nflog", table: "filter", chain: "INPUT",
			rule: Rule{Action: NFLOG(NFLOGOptions{Group: 5, Prefix: "np dropped", Size: 128})},
			want: rmArgs("-j NFLOG --nflog-prefix np_dropped --nflog-group 5 --nflog-size 128")},
		{name: "nflog defaults", table: "filter", chain: "INPUT", rule: Rule{Action: NFLOG(NFLOGOptions{})},
			want: rmArgs("-j NFLOG")},
		{name: "set mark", table: "mangle", chain: "PREROUTING", rule: Rule{Action: SetMark(0x1)},
			want: rmArgs("-j MARK --set-xmark 0x1/0xffffffff")},
		{name: "set masked mark", table: "mangle", chain: "PREROUTING",
			rule: Rule{Match: m(NotMarkMatches(0x100, 0x100)), Action: SetMaskedMark(0x100, 0xff00)},
			want: rmArgs("-m mark ! --mark 0x100/0x100 -j MARK --set-xmark 0x100/0xff00")},
		{name: "clear mark", table: "mangle", chain: "POSTROUTING", rule: Rule{Action: ClearMark(0xf000)},
			want: rmArgs("-j MARK --set-xmark 0x0/0xf000")},
		{name: "filter-table mark", table: "filter", chain: "FORWARD", rule: Rule{Action: SetMaskedMark(0x10000, 0x10000)},
			want: rmArgs("-j MARK --set-xmark 0x10000/0x10000")},
		{name: "masquerade", table: "nat", chain: "POSTROUTING", rule: Rule{Action: Masquerade(MasqueradeOptions{})},
			want: rmArgs("-j MASQUERADE")},
		{name: "masquerade random fully", table: "nat", chain: "POSTROUTING",
			rule: Rule{Match: m(OutInterface("eth0")), Action: Masquerade(MasqueradeOptions{RandomFully: true})},
			want: rmArgs("-o eth0 -j MASQUERADE --random-fully")},
		{name: "masquerade to ports", table: "nat", chain: "POSTROUTING",
			rule: Rule{Match: m(Protocol(ProtoTCP)), Action: Masquerade(MasqueradeOptions{RandomFully: true, ToPorts: Ports(1024, 65535)})},
			want: rmArgs("-p tcp -j MASQUERADE --to-ports 1024-65535 --random-fully")},
		{name: "masquerade to one port", table: "nat", chain: "POSTROUTING",
			rule: Rule{Match: m(Protocol(ProtoUDP)), Action: Masquerade(MasqueradeOptions{ToPorts: Port(4000)})},
			want: rmArgs("-p udp -j MASQUERADE --to-ports 4000")},
		{name: "snat", table: "nat", chain: "POSTROUTING",
			rule: Rule{Match: m(SourceNet(rmPrefix("10.0.0.0/8"))), Action: SNAT(rmAddr("192.0.2.1"), SNATOptions{})},
			want: rmArgs("-s 10.0.0.0/8 -j SNAT --to-source 192.0.2.1")},
		{name: "snat ports random fully", table: "nat", chain: "POSTROUTING",
			rule: Rule{Match: m(Protocol(ProtoUDP)), Action: SNAT(rmAddr("192.0.2.1"), SNATOptions{RandomFully: true, Ports: Ports(1000, 2000)})},
			want: rmArgs("-p udp -j SNAT --to-source 192.0.2.1:1000-2000 --random-fully")},
		{name: "dnat address", table: "nat", chain: "PREROUTING",
			rule: Rule{Match: m(DestNet(rmPrefix("198.51.100.7/32"))), Action: DNAT(netip.AddrPortFrom(rmAddr("10.0.0.1"), 0))},
			want: rmArgs("-d 198.51.100.7/32 -j DNAT --to-destination 10.0.0.1")},
		{name: "dnat port", table: "nat", chain: "OUTPUT",
			rule: Rule{Match: m(Protocol(ProtoTCP), DestPorts(Port(80))), Action: DNAT(netip.MustParseAddrPort("10.0.0.1:8080"))},
			want: rmArgs("-p tcp -m tcp --dport 80 -j DNAT --to-destination 10.0.0.1:8080")},
		{name: "dnat port range", table: "nat", chain: "PREROUTING",
			rule: Rule{Match: m(Protocol(ProtoTCP)), Action: DNATAction{To: rmAddr("10.0.0.2"), Ports: Ports(80, 90)}},
			want: rmArgs("-p tcp -j DNAT --to-destination 10.0.0.2:80-90")},
		{name: "notrack", table: "raw", chain: "PREROUTING", rule: Rule{Action: NoTrack()},
			want: rmArgs("-j CT --notrack")},
		{name: "notrack dns", table: "raw", chain: "OUTPUT",
			rule: Rule{Match: m(Protocol(ProtoUDP), DestPorts(Port(53))), Action: NoTrack(), Comments: []string{"no conntrack for DNS"}},
			want: rmArgs("-p udp -m udp --dport 53 -m comment --comment no_conntrack_for_DNS -j CT --notrack")},
	}
	v6 := []rmCase{
		{name: "source net", table: "filter", chain: "INPUT",
			rule: Rule{Match: m(SourceNet(rmPrefix("fd00::/64"))), Action: Drop()},
			want: rmArgs("-s fd00::/64 -j DROP")},
		{name: "not dest host", table: "filter", chain: "INPUT",
			rule: Rule{Match: m(NotDestNet(rmPrefix("fd01::1/128"))), Action: Accept()},
			want: rmArgs("! -d fd01::1/128 -j ACCEPT")},
		{name: "mapped v4 address", table: "filter", chain: "INPUT",
			rule: Rule{Match: m(SourceNet(rmPrefix("::ffff:192.0.2.1/128"))), Action: Drop()},
			want: rmArgs("-s ::ffff:192.0.2.1/128 -j DROP")},
		{name: "whole address space", table: "filter", chain: "INPUT",
			rule:        Rule{Match: m(DestNet(rmPrefix("::/0"))), Action: Accept()},
			want:        rmArgs("-d ::/0 -j ACCEPT"),
			saveDiffers: "ip6tables-save leaves out a /0 destination"},
		{name: "header criteria first", table: "filter", chain: "FORWARD",
			rule: Rule{Match: m(Protocol(ProtoUDP), DestPorts(Port(53), Port(5353)), OutInterface("wg0"),
				InInterface("cali+"), DestNet(rmPrefix("2001:db8::/32"))), Action: Accept()},
			want: rmArgs("-d 2001:db8::/32 -i cali+ -o wg0 -p udp -m multiport --dports 53,5353 -j ACCEPT")},
		{name: "tcp ports", table: "filter", chain: "INPUT",
			rule: Rule{Match: m(Protocol(ProtoTCP), NotSourcePorts(Ports(0, 1023))), Action: Drop()},
			want: rmArgs("-p tcp -m tcp --sport 1024:65535 -j DROP")},
		{name: "icmpv6 type", table: "filter", chain: "INPUT",
			rule: Rule{Match: m(ICMPv6Type(128)), Action: Accept()},
			want: rmArgs("-p ipv6-icmp -m icmp6 --icmpv6-type 128 -j ACCEPT")},
		{name: "icmpv6 type code", table: "filter", chain: "INPUT",
			rule: Rule{Match: m(Protocol(ProtoICMPv6), ICMPv6TypeCode(1, 3)), Action: Accept()},
			want: rmArgs("-p ipv6-icmp -m icmp6 --icmpv6-type 1/3 -j ACCEPT")},
		{name: "not icmpv6 type 255", table: "filter", chain: "INPUT",
			rule: Rule{Match: m(ICMPMatch{Version: IPv6, Type: 255, Negate: true}), Action: Accept()},
			want: rmArgs("-p ipv6-icmp -m icmp6 ! --icmpv6-type 255 -j ACCEPT")},
		{name: "address types", table: "filter", chain: "INPUT",
			rule: Rule{Match: m(SourceAddrType(AddrTypeUnspec | AddrTypeUnicast | AddrTypeLocal | AddrTypeAnycast |
				AddrTypeMulticast | AddrTypeUnreachable)), Action: Accept()},
			want: rmArgs("-m addrtype --src-type UNSPEC,UNICAST,LOCAL,ANYCAST,MULTICAST,UNREACHABLE -j ACCEPT")},
		{name: "sets", table: "filter", chain: "INPUT",
			rule: Rule{Match: m(SourceIPSet("np-net6"), IPSetMatch("np-ipport6", Dst, Dst), IPSetMatch("np-ipportnet6", Dst, Dst, Src)), Action: Accept()},
			want: rmArgs("-m set --match-set np-net6 src -m set --match-set np-ipport6 dst,dst -m set --match-set np-ipportnet6 dst,dst,src -j ACCEPT")},
		{name: "conntrack and mark", table: "filter", chain: "FORWARD",
			rule: Rule{Match: m(ConntrackState(CTStateNew), MarkMatches(0x0, 0x30000)), Action: Accept()},
			want: rmArgs("-m conntrack --ctstate NEW -m mark --mark 0x0/0x30000 -j ACCEPT")},
		{name: "reject default", table: "filter", chain: "INPUT", rule: Rule{Action: Reject(RejectPortUnreachable)},
			want: rmArgs("-j REJECT --reject-with icmp6-port-unreachable")},
		{name: "reject tcp reset", table: "filter", chain: "INPUT",
			rule: Rule{Match: m(Protocol(ProtoTCP)), Action: Reject(RejectTCPReset)},
			want: rmArgs("-p tcp -j REJECT --reject-with tcp-reset")},
		{name: "reject admin prohibited", table: "filter", chain: "INPUT", rule: Rule{Action: Reject(RejectAdminProhibited)},
			want: rmArgs("-j REJECT --reject-with icmp6-adm-prohibited")},
		{name: "reject no route", table: "filter", chain: "INPUT", rule: Rule{Action: Reject(RejectNoRoute)},
			want: rmArgs("-j REJECT --reject-with icmp6-no-route")},
		{name: "reject addr unreachable", table: "filter", chain: "INPUT", rule: Rule{Action: Reject(RejectAddrUnreachable)},
			want: rmArgs("-j REJECT --reject-with icmp6-addr-unreachable")},
		{name: "reject policy fail", table: "filter", chain: "INPUT", rule: Rule{Action: Reject(RejectPolicyFail)},
			want: rmArgs("-j REJECT --reject-with icmp6-policy-fail")},
		{name: "reject reject route", table: "filter", chain: "INPUT", rule: Rule{Action: Reject(RejectRejectRoute)},
			want: rmArgs("-j REJECT --reject-with icmp6-reject-route")},
		{name: "jump with comment", table: "filter", chain: "OUTPUT",
			rule: Rule{Action: Jump(rmTarget), Comments: []string{"np:0123456789abcdef"}},
			want: rmArgs("-m comment --comment np:0123456789abcdef -j NP-TARGET")},
		{name: "goto", table: "filter", chain: "INPUT", rule: Rule{Match: m(NotInInterface("lo")), Action: Goto(rmTarget)},
			want: rmArgs("! -i lo -g NP-TARGET")},
		{name: "log", table: "filter", chain: "INPUT", rule: Rule{Action: Log(LogOptions{Prefix: "np6: ", Level: LogLevelInfo})},
			want: rmArgs("-j LOG --log-prefix np6:_ --log-level 6")},
		{name: "nflog", table: "filter", chain: "INPUT",
			rule: Rule{Action: NFLOG(NFLOGOptions{Group: 65535, Prefix: strings.Repeat("p", MaxNFLOGPrefixLength)})},
			want: append(rmArgs("-j NFLOG --nflog-prefix"), strings.Repeat("p", MaxNFLOGPrefixLength), "--nflog-group", "65535")},
		{name: "set mark", table: "mangle", chain: "OUTPUT", rule: Rule{Action: SetMaskedMark(0x4000, 0x4000)},
			want: rmArgs("-j MARK --set-xmark 0x4000/0x4000")},
		{name: "clear mark", table: "mangle", chain: "PREROUTING", rule: Rule{Action: ClearMark(0xffffffff)},
			want: rmArgs("-j MARK --set-xmark 0x0/0xffffffff")},
		{name: "masquerade", table: "nat", chain: "POSTROUTING",
			rule: Rule{Match: m(Protocol(ProtoTCP)), Action: Masquerade(MasqueradeOptions{ToPorts: Ports(30000, 40000), RandomFully: true})},
			want: rmArgs("-p tcp -j MASQUERADE --to-ports 30000-40000 --random-fully")},
		{name: "snat", table: "nat", chain: "POSTROUTING", rule: Rule{Action: SNAT(rmAddr("2001:db8::1"), SNATOptions{})},
			want: rmArgs("-j SNAT --to-source 2001:db8::1")},
		{name: "snat ports", table: "nat", chain: "POSTROUTING",
			rule: Rule{Match: m(Protocol(ProtoSCTP)), Action: SNAT(rmAddr("2001:db8::1"), SNATOptions{Ports: Ports(80, 90), RandomFully: true})},
			want: rmArgs("-p sctp -j SNAT --to-source [2001:db8::1]:80-90 --random-fully")},
		{name: "dnat", table: "nat", chain: "PREROUTING", rule: Rule{Action: DNAT(netip.AddrPortFrom(rmAddr("fd00::10"), 0))},
			want: rmArgs("-j DNAT --to-destination fd00::10")},
		{name: "dnat port", table: "nat", chain: "OUTPUT",
			rule: Rule{Match: m(Protocol(ProtoTCP), DestPorts(Port(443))), Action: DNAT(netip.MustParseAddrPort("[fd00::10]:8443"))},
			want: rmArgs("-p tcp -m tcp --dport 443 -j DNAT --to-destination [fd00::10]:8443")},
		{name: "notrack", table: "raw", chain: "PREROUTING",
			rule: Rule{Match: m(SourceNet(rmPrefix("fe80::/10"))), Action: NoTrack()},
			want: rmArgs("-s fe80::/10 -j CT --notrack")},
	}
	for i := range v4 {
		v4[i].v = IPv4
	}
	for i := range v6 {
		v6[i].v = IPv6
	}
	return append(v4, v6...)
}

func TestRuleArgsGolden(t *testing.T) {
	for _, tc := range rmGoldenCases() {
		t.Run(tc.v.String()+"/"+tc.name, func(t *testing.T) {
			got, err := tc.rule.Args(tc.v)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			again, err := tc.rule.Args(tc.v)
			require.NoError(t, err)
			assert.Equal(t, got, again, "rendering must be deterministic")
			assert.NoError(t, tc.rule.Validate(tc.v))
		})
	}
}

// rmQuote renders one argument as an iptables-restore token. Rule
// arguments never hold double quotes or backslashes.
func rmQuote(arg string) string {
	if arg == "" || strings.ContainsAny(arg, " \t'#") {
		return `"` + arg + `"`
	}
	return arg
}

// rmRestoreLine renders "<op> CHAIN args" as one restore line.
func rmRestoreLine(op, chain string, args []string) string {
	var b strings.Builder
	b.WriteString(op + " " + chain)
	for _, a := range args {
		b.WriteString(" " + rmQuote(a))
	}
	return b.String()
}

// rmRestoreInput renders the golden rules of version v as iptables-restore
// input, one transaction per table, with op "-A" (append, with the jump
// target chain declared and each rule preceded by a comment line naming
// it) or "-D" (delete).
func rmRestoreInput(t testing.TB, v IPVersion, op string) string {
	t.Helper()
	var b strings.Builder
	if op == "-A" {
		fmt.Fprintf(&b, "# Golden %v rules of package iptables, rendered by Rule.Args.\n", v)
		b.WriteString("# Regenerate: go test ./iptables -run TestRuleArgsGoldenFile -update\n")
	}
	cases := rmGoldenCases()
	for _, table := range rmTables {
		fmt.Fprintf(&b, "*%s\n", table)
		if op == "-A" && table == "filter" {
			fmt.Fprintf(&b, ":%s - [0:0]\n", rmTarget)
		}
		for _, tc := range cases {
			if tc.v != v || tc.table != table {
				continue
			}
			args, err := tc.rule.Args(v)
			require.NoError(t, err, tc.name)
			if op == "-A" {
				fmt.Fprintf(&b, "# %s\n", tc.name)
			}
			b.WriteString(rmRestoreLine(op, tc.chain, args) + "\n")
		}
		b.WriteString("COMMIT\n")
	}
	return b.String()
}

// rmGoldenPath is the golden file of version v.
func rmGoldenPath(v IPVersion) string {
	return filepath.Join("testdata", "rules", strings.ToLower(v.String())+".golden")
}

func TestRuleArgsGoldenFile(t *testing.T) {
	for _, v := range []IPVersion{IPv4, IPv6} {
		t.Run(v.String(), func(t *testing.T) {
			got := rmRestoreInput(t, v, "-A")
			path := rmGoldenPath(v)
			if rmUpdate() {
				require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
				require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err, "run with -update to create the golden file")
			assert.Equal(t, string(want), got, "rendering changed; review and regenerate with -update")
		})
	}
}

func TestRuleGoldenCasesCoverEveryType(t *testing.T) {
	seen := map[string]map[IPVersion]bool{}
	note := func(x any, v IPVersion) {
		name := fmt.Sprintf("%T", x)
		if seen[name] == nil {
			seen[name] = map[IPVersion]bool{}
		}
		seen[name][v] = true
	}
	for _, tc := range rmGoldenCases() {
		for _, c := range tc.rule.Match {
			note(c, tc.v)
		}
		note(tc.rule.Action, tc.v)
	}
	for _, x := range []any{NetMatch{}, ProtoMatch{}, PortMatch{}, IfaceMatch{}, MarkMatch{}, SetMatch{},
		ConntrackMatch{}, AddrTypeMatch{}, ICMPMatch{}, AcceptAction{}, DropAction{}, RejectAction{},
		ReturnAction{}, JumpAction{}, GotoAction{}, SetMarkAction{}, MasqueradeAction{}, SNATAction{},
		DNATAction{}, LogAction{}, NoTrackAction{}, NFLOGAction{}} {
		name := fmt.Sprintf("%T", x)
		assert.True(t, seen[name][IPv4], "%s has no IPv4 golden case", name)
		if name != "iptables.AcceptAction" && name != "iptables.DropAction" && name != "iptables.ReturnAction" {
			assert.True(t, seen[name][IPv6], "%s has no IPv6 golden case", name)
		}
	}
}

func TestRuleArgsErrors(t *testing.T) {
	m := func(c ...Criterion) Match { return c }
	tcp := Protocol(ProtoTCP)
	tooMany := make([]PortRange, 16)
	for i := range tooMany {
		tooMany[i] = Port(uint16(i + 1))
	}
	var nilNet *NetMatch
	var nilJump *JumpAction
	tests := []struct {
		name string
		v    IPVersion
		rule Rule
		is   error // the specific sentinel, besides ErrInvalidRule
		msg  string
	}{
		{"unknown version", 5, Rule{Action: Accept()}, nil, "unknown IP version"},
		{"no action", IPv4, Rule{}, nil, "no action"},
		{"nil action pointer", IPv4, Rule{Action: nilJump}, nil, "nil *iptables.JumpAction action"},
		{"nil criterion", IPv4, Rule{Match: m(nil), Action: Accept()}, nil, "no criterion (criterion 0)"},
		{"nil criterion pointer", IPv4, Rule{Match: m(tcp, nilNet), Action: Accept()}, nil, "criterion 1"},
		{"zero prefix", IPv4, Rule{Match: m(SourceNet(netip.Prefix{})), Action: Accept()}, nil, "invalid or zero prefix"},
		{"bad prefix length", IPv4, Rule{Match: m(DestNet(netip.PrefixFrom(rmAddr("10.0.0.0"), 33))), Action: Accept()}, nil, "invalid or zero prefix"},
		{"net without direction", IPv4, Rule{Match: m(NetMatch{Prefix: rmPrefix("10.0.0.0/8")}), Action: Accept()}, nil, "Direction(0)"},
		{"v4 prefix in v6 rule", IPv6, Rule{Match: m(SourceNet(rmPrefix("10.0.0.0/8"))), Action: Accept()}, ErrWrongIPVersion, "src prefix 10.0.0.0/8 in an IPv6 rule"},
		{"v6 prefix in v4 rule", IPv4, Rule{Match: m(DestNet(rmPrefix("fd00::/8"))), Action: Accept()}, ErrWrongIPVersion, "in an IPv4 rule"},
		{"mixed versions", IPv4, Rule{Match: m(SourceNet(rmPrefix("10.0.0.0/8")), DestNet(rmPrefix("fd00::/8"))), Action: Accept()}, ErrWrongIPVersion, "criterion 1"},
		{"host bits", IPv4, Rule{Match: m(SourceNet(rmPrefix("10.0.0.1/24"))), Action: Accept()}, ipfamily.ErrHostBits, "10.0.0.1/24 (the network is 10.0.0.0/24)"},
		{"host bits v6", IPv6, Rule{Match: m(NotDestNet(rmPrefix("fd00::1/64"))), Action: Accept()}, ipfamily.ErrHostBits, "dst prefix: ipfamily: prefix has host bits set: fd00::1/64"},
		{"negated /0", IPv4, Rule{Match: m(NotSourceNet(rmPrefix("0.0.0.0/0"))), Action: Accept()}, nil, "matches no packet"},
		{"two sources", IPv4, Rule{Match: m(SourceNet(rmPrefix("10.0.0.0/8")), SourceNet(rmPrefix("11.0.0.0/8"))), Action: Accept()}, nil, "more than one src address"},
		{"two protocols", IPv4, Rule{Match: m(tcp, Protocol(ProtoUDP)), Action: Accept()}, nil, "more than one protocol"},
		{"protocol zero", IPv4, Rule{Match: m(Protocol(0)), Action: Accept()}, nil, "protocol 0"},
		{"icmp protocol in v6", IPv6, Rule{Match: m(Protocol(ProtoICMP)), Action: Accept()}, ErrWrongIPVersion, "protocol icmp in an IPv6 rule"},
		{"icmpv6 protocol in v4", IPv4, Rule{Match: m(Protocol(ProtoICMPv6)), Action: Accept()}, ErrWrongIPVersion, "ipv6-icmp in an IPv4 rule"},
		{"ports without protocol", IPv4, Rule{Match: m(DestPorts(Port(80))), Action: Accept()}, nil, "port match without tcp/udp/sctp protocol"},
		{"ports with icmp", IPv4, Rule{Match: m(Protocol(ProtoICMP), DestPorts(Port(80))), Action: Accept()}, nil, "port match without tcp/udp/sctp protocol"},
		{"ports with negated tcp", IPv4, Rule{Match: m(NotProtocol(ProtoTCP), SourcePorts(Port(80))), Action: Accept()}, nil, "port match without tcp/udp/sctp protocol"},
		{"ports with udplite", IPv6, Rule{Match: m(Protocol(ProtoUDPLite), SourcePorts(Port(80))), Action: Accept()}, nil, "port match without tcp/udp/sctp protocol"},
		{"no ports", IPv4, Rule{Match: m(tcp, DestPorts()), Action: Accept()}, nil, "without ports"},
		{"inverted range", IPv4, Rule{Match: m(tcp, DestPorts(Ports(90, 80))), Action: Accept()}, nil, "ends below its start"},
		{"too many ports", IPv4, Rule{Match: m(tcp, DestPorts(tooMany...)), Action: Accept()}, nil, "16 multiport entries, over the limit of 15"},
		{"ranges count twice", IPv4, Rule{Match: m(tcp, SourcePorts(Ports(1, 2), Ports(3, 4), Ports(5, 6), Ports(7, 8), Ports(9, 10), Ports(11, 12), Ports(13, 14), Ports(15, 16))), Action: Accept()}, nil, "16 multiport entries"},
		{"two dest port criteria", IPv4, Rule{Match: m(tcp, DestPorts(Port(1)), NotDestPorts(Port(2), Port(3))), Action: Accept()}, nil, "more than one dst port criterion"},
		{"whole port range", IPv4, Rule{Match: m(tcp, SourcePorts(Ports(0, 65535))), Action: Accept()}, nil, "matches every port"},
		{"negated whole port range", IPv4, Rule{Match: m(tcp, NotDestPorts(Ports(0, 65535))), Action: Accept()}, nil, "matches every port"},
		{"ports without direction", IPv4, Rule{Match: m(tcp, PortMatch{Ranges: []PortRange{Port(1)}}), Action: Accept()}, nil, "port match with Direction(0)"},
		{"interface too long", IPv4, Rule{Match: m(InInterface("abcdefghijklmnop")), Action: Accept()}, nil, "must be 1 to 15 characters"},
		{"empty interface", IPv4, Rule{Match: m(OutInterface("")), Action: Accept()}, nil, "must be 1 to 15"},
		{"interface with slash", IPv4, Rule{Match: m(InInterface("eth/0")), Action: Accept()}, nil, "contains '/'"},
		{"interface with space", IPv4, Rule{Match: m(InInterface("eth 0")), Action: Accept()}, nil, "contains ' '"},
		{"interface inner plus", IPv4, Rule{Match: m(InInterface("et+h")), Action: Accept()}, nil, "trailing"},
		{"interface dot", IPv4, Rule{Match: m(InInterface("..")), Action: Accept()}, nil, "invalid interface name"},
		{"interface dash", IPv4, Rule{Match: m(InInterface("-eth")), Action: Accept()}, nil, "invalid interface name"},
		{"two in interfaces", IPv4, Rule{Match: m(InInterface("a"), NotInInterface("b")), Action: Accept()}, nil, "more than one input interface"},
		{"mark outside mask", IPv4, Rule{Match: m(MarkMatches(0x3, 0x1)), Action: Accept()}, nil, "mark 0x3 has bits outside mask 0x1"},
		{"mark zero mask", IPv4, Rule{Match: m(MarkMatches(0, 0)), Action: Accept()}, nil, "zero mask"},
		{"set name too long", IPv4, Rule{Match: m(SourceIPSet(strings.Repeat("s", 32))), Action: Accept()}, nil, "must be 1 to 31"},
		{"set name empty", IPv4, Rule{Match: m(DestIPSet("")), Action: Accept()}, nil, "must be 1 to 31"},
		{"set name blank", IPv4, Rule{Match: m(DestIPSet("a b")), Action: Accept()}, nil, "contains ' '"},
		{"set name dash", IPv4, Rule{Match: m(DestIPSet("-x")), Action: Accept()}, nil, "starts with"},
		{"set without dimensions", IPv4, Rule{Match: m(IPSetMatch("s")), Action: Accept()}, nil, "0 dimensions"},
		{"set with 7 dimensions", IPv4, Rule{Match: m(IPSetMatch("s", Src, Src, Src, Dst, Dst, Dst, Dst)), Action: Accept()}, nil, "7 dimensions"},
		{"set bad dimension", IPv4, Rule{Match: m(IPSetMatch("s", Src, 7)), Action: Accept()}, nil, "dimension 2 has Direction(7)"},
		{"no ct state", IPv4, Rule{Match: m(ConntrackState()), Action: Accept()}, nil, "without states"},
		{"unknown ct state", IPv4, Rule{Match: m(ConntrackState(1 << 9)), Action: Accept()}, nil, "unknown states"},
		{"no address type", IPv4, Rule{Match: m(SourceAddrType(0)), Action: Accept()}, nil, "without types"},
		{"unknown address type", IPv4, Rule{Match: m(DestAddrType(1 << 14)), Action: Accept()}, nil, "unknown types"},
		{"address type both limits", IPv4, Rule{Match: m(AddrTypeMatch{Types: AddrTypeLocal, Dir: Dst, LimitIfaceIn: true, LimitIfaceOut: true}), Action: Accept()}, nil, "both"},
		{"address type without direction", IPv4, Rule{Match: m(AddrTypeMatch{Types: AddrTypeLocal}), Action: Accept()}, nil, "Direction(0)"},
		{"broadcast in v6", IPv6, Rule{Match: m(DestAddrType(AddrTypeBroadcast | AddrTypeLocal)), Action: Accept()}, ErrWrongIPVersion, "BROADCAST do not exist for IPv6"},
		{"icmp in v6", IPv6, Rule{Match: m(ICMPType(8)), Action: Accept()}, ErrWrongIPVersion, "icmp type match in an IPv6 rule"},
		{"icmpv6 in v4", IPv4, Rule{Match: m(ICMPv6TypeCode(1, 0)), Action: Accept()}, ErrWrongIPVersion, "ipv6-icmp type match in an IPv4 rule"},
		{"icmp without version", IPv4, Rule{Match: m(ICMPMatch{Type: 8}), Action: Accept()}, nil, "unknown IP version"},
		{"icmp with tcp", IPv4, Rule{Match: m(tcp, ICMPType(8)), Action: Accept()}, nil, "protocol criterion is tcp"},
		{"icmp with negated icmp", IPv4, Rule{Match: m(ICMPType(8), NotProtocol(ProtoICMP)), Action: Accept()}, nil, "protocol criterion is ! icmp"},
		{"icmp any with code", IPv4, Rule{Match: m(ICMPTypeCode(255, 0)), Action: Accept()}, nil, "takes no code"},
		{"comment with newline", IPv4, Rule{Action: Accept(), Comments: []string{"a\nb"}}, nil, "newline"},
		{"comment with quote", IPv4, Rule{Action: Accept(), Comments: []string{`say "hi"`}}, nil, "double quote"},
		{"comment with backslash", IPv4, Rule{Action: Accept(), Comments: []string{`a\b`}}, nil, "backslash"},
		{"comment with tab", IPv4, Rule{Action: Accept(), Comments: []string{"a\tb"}}, nil, "control character"},
		{"comment not utf-8", IPv4, Rule{Action: Accept(), Comments: []string{"a\xffb"}}, nil, "UTF-8"},
		{"comment too long", IPv4, Rule{Action: Accept(), Comments: []string{strings.Repeat("c", 256)}}, nil, "longer than 255"},
		{"empty comment", IPv4, Rule{Action: Accept(), Comments: []string{"ok", ""}}, nil, "comment 1"},
		{"jump name too long", IPv4, Rule{Action: Jump(strings.Repeat("C", 29))}, ErrInvalidChainName, "must be 1 to 28 characters"},
		{"goto empty chain", IPv4, Rule{Action: Goto("")}, ErrInvalidChainName, "goto target"},
		{"jump to builtin chain", IPv4, Rule{Action: Jump("INPUT")}, ErrInvalidChainName, "built-in chain or a target"},
		{"jump to target name", IPv6, Rule{Action: Goto("MASQUERADE")}, ErrInvalidChainName, "built-in chain or a target"},
		{"jump with blank", IPv4, Rule{Action: Jump("a b")}, ErrInvalidChainName, "contains ' '"},
		{"reject unknown", IPv4, Rule{Action: Reject(99)}, nil, "RejectWith(99)"},
		{"reject v4 reply in v6", IPv6, Rule{Action: Reject(RejectHostProhibited)}, ErrWrongIPVersion, "host-prohibited does not exist in IPv6"},
		{"reject v6 reply in v4", IPv4, Rule{Action: Reject(RejectNoRoute)}, ErrWrongIPVersion, "no-route does not exist in IPv4"},
		{"tcp reset without tcp", IPv4, Rule{Match: m(Protocol(ProtoUDP)), Action: Reject(RejectTCPReset)}, nil, "tcp-reset needs"},
		{"tcp reset with negated tcp", IPv6, Rule{Match: m(NotProtocol(ProtoTCP)), Action: Reject(RejectTCPReset)}, nil, "tcp-reset needs"},
		{"set mark outside mask", IPv4, Rule{Action: SetMaskedMark(0x10, 0x1)}, nil, "bits outside mask"},
		{"set mark zero mask", IPv4, Rule{Action: ClearMark(0)}, nil, "zero mask"},
		{"masquerade ports without protocol", IPv4, Rule{Action: Masquerade(MasqueradeOptions{ToPorts: Port(80)})}, nil, "ports without tcp/udp/sctp"},
		{"masquerade port zero", IPv4, Rule{Match: m(tcp), Action: Masquerade(MasqueradeOptions{ToPorts: Ports(0, 10)})}, nil, "must be 1 to 65535"},
		{"masquerade inverted ports", IPv4, Rule{Match: m(tcp), Action: Masquerade(MasqueradeOptions{ToPorts: Ports(20, 10)})}, nil, "not end below"},
		{"snat without address", IPv4, Rule{Action: SNAT(netip.Addr{}, SNATOptions{})}, nil, "without an address"},
		{"snat v6 address in v4", IPv4, Rule{Action: SNAT(rmAddr("fd00::1"), SNATOptions{})}, ErrWrongIPVersion, "SNAT address fd00::1 in an IPv4 rule"},
		{"snat zoned address", IPv6, Rule{Action: SNAT(rmAddr("fe80::1%eth0"), SNATOptions{})}, nil, "has a zone"},
		{"snat unspecified", IPv4, Rule{Action: SNAT(rmAddr("0.0.0.0"), SNATOptions{})}, nil, "unspecified"},
		{"snat ports without protocol", IPv4, Rule{Action: SNAT(rmAddr("1.2.3.4"), SNATOptions{Ports: Port(5)})}, nil, "ports without tcp/udp/sctp"},
		{"dnat v4 address in v6", IPv6, Rule{Action: DNAT(netip.MustParseAddrPort("10.0.0.1:80"))}, ErrWrongIPVersion, "DNAT address 10.0.0.1 in an IPv6 rule"},
		{"dnat port without protocol", IPv4, Rule{Action: DNAT(netip.MustParseAddrPort("10.0.0.1:80"))}, nil, "ports without tcp/udp/sctp"},
		{"dnat zero", IPv6, Rule{Action: DNAT(netip.AddrPort{})}, nil, "without an address"},
		{"log prefix too long", IPv4, Rule{Action: Log(LogOptions{Prefix: strings.Repeat("l", 30)})}, nil, "longer than 29"},
		{"log prefix newline", IPv4, Rule{Action: Log(LogOptions{Prefix: "a\n"})}, nil, "newline"},
		{"log level unknown", IPv4, Rule{Action: Log(LogOptions{Level: 9})}, nil, "unknown log level"},
		{"nflog prefix too long", IPv6, Rule{Action: NFLOG(NFLOGOptions{Prefix: strings.Repeat("n", 64)})}, nil, "longer than 63"},
		{"nflog prefix quote", IPv6, Rule{Action: NFLOG(NFLOGOptions{Prefix: `"`})}, nil, "double quote"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args, err := tc.rule.Args(tc.v)
			require.Error(t, err)
			assert.Nil(t, args, "no arguments on error")
			assert.ErrorIs(t, err, ErrInvalidRule)
			if tc.is != nil {
				assert.ErrorIs(t, err, tc.is)
			} else {
				assert.NotErrorIs(t, err, ErrWrongIPVersion)
			}
			assert.Contains(t, err.Error(), tc.msg)
			assert.True(t, strings.HasPrefix(err.Error(), "iptables: invalid rule: "), err.Error())
			assert.Equal(t, 1, strings.Count(err.Error(), "iptables:"), err.Error())
			assert.Equal(t, err, tc.rule.Validate(tc.v), "Validate returns the error of Args")
		})
	}
}

// rmForeignCriterion and rmForeignAction stand for implementations the
// package does not know: Args uses their iptablesArgs as they are.
type rmForeignCriterion struct {
	args []string
	err  error
}

func (c rmForeignCriterion) iptablesArgs(IPVersion) ([]string, error) { return c.args, c.err }

type rmForeignAction struct {
	args []string
	err  error
}

func (a rmForeignAction) iptablesArgs(IPVersion) ([]string, error) { return a.args, a.err }
func (a rmForeignAction) JumpTarget() string                       { return "" }

func TestRuleArgsForeignImplementations(t *testing.T) {
	r := Rule{
		Match:  Match{rmForeignCriterion{args: []string{"-m", "foo"}}, SourceNet(rmPrefix("10.0.0.0/8"))},
		Action: rmForeignAction{args: []string{"-j", "FOO"}},
	}
	got, err := r.Args(IPv4)
	require.NoError(t, err)
	assert.Equal(t, rmArgs("-s 10.0.0.0/8 -m foo -j FOO"), got)

	boom := errors.New("boom")
	_, err = Rule{Match: Match{rmForeignCriterion{err: boom}}, Action: Accept()}.Args(IPv4)
	assert.ErrorIs(t, err, boom)
	_, err = Rule{Action: rmForeignAction{err: boom}}.Args(IPv6)
	assert.ErrorIs(t, err, boom)
}

func TestRuleArgsAcceptsPointers(t *testing.T) {
	byValue := Rule{Match: Match{Protocol(ProtoTCP), DestPorts(Port(80))}, Action: Jump("X")}
	want, err := byValue.Args(IPv4)
	require.NoError(t, err)
	byPointer := Rule{
		Match:  Match{&ProtoMatch{Proto: ProtoTCP}, &PortMatch{Dir: Dst, Ranges: []PortRange{Port(80)}}},
		Action: &JumpAction{Chain: "X"},
	}
	got, err := byPointer.Args(IPv4)
	require.NoError(t, err)
	assert.Equal(t, want, got)
	assert.Equal(t, "X", byPointer.Action.JumpTarget())
}

func TestRuleArgsReturnsFreshSlice(t *testing.T) {
	r := Rule{Match: Match{SourceNet(rmPrefix("10.0.0.0/8"))}, Action: Accept(), Comments: []string{"c"}}
	a, err := r.Args(IPv4)
	require.NoError(t, err)
	a[0] = "mutated"
	b, err := r.Args(IPv4)
	require.NoError(t, err)
	assert.Equal(t, "-s", b[0])
}

func TestStandaloneArgs(t *testing.T) {
	// Each criterion and action renders alone as it does in a rule.
	tests := []struct {
		name string
		got  func() ([]string, error)
		want []string
	}{
		{"net", func() ([]string, error) { return NotDestNet(rmPrefix("10.0.0.0/24")).iptablesArgs(IPv4) }, rmArgs("! -d 10.0.0.0/24")},
		{"icmp", func() ([]string, error) { return ICMPv6Type(135).iptablesArgs(IPv6) }, rmArgs("-p ipv6-icmp -m icmp6 --icmpv6-type 135")},
		{"mark", func() ([]string, error) { return MarkMatches(1, 3).iptablesArgs(IPv6) }, rmArgs("-m mark --mark 0x1/0x3")},
		{"proto", func() ([]string, error) { return Protocol(200).iptablesArgs(IPv4) }, rmArgs("-p 200")},
		{"iface", func() ([]string, error) { return OutInterface("+").iptablesArgs(IPv4) }, rmArgs("-o +")},
		{"set", func() ([]string, error) { return SourceIPSet("s").iptablesArgs(IPv4) }, rmArgs("-m set --match-set s src")},
		{"ct", func() ([]string, error) { return ConntrackState(CTStateNew).iptablesArgs(IPv4) }, rmArgs("-m conntrack --ctstate NEW")},
		{"addrtype", func() ([]string, error) { return DestAddrType(AddrTypeLocal).iptablesArgs(IPv6) }, rmArgs("-m addrtype --dst-type LOCAL")},
		{"accept", func() ([]string, error) { return Accept().iptablesArgs(IPv4) }, rmArgs("-j ACCEPT")},
		{"drop", func() ([]string, error) { return Drop().iptablesArgs(IPv6) }, rmArgs("-j DROP")},
		{"return", func() ([]string, error) { return Return().iptablesArgs(IPv6) }, rmArgs("-j RETURN")},
		{"reject", func() ([]string, error) { return Reject(RejectAdminProhibited).iptablesArgs(IPv6) }, rmArgs("-j REJECT --reject-with icmp6-adm-prohibited")},
		{"jump", func() ([]string, error) { return Jump("C").iptablesArgs(IPv4) }, rmArgs("-j C")},
		{"goto", func() ([]string, error) { return Goto("C").iptablesArgs(IPv4) }, rmArgs("-g C")},
		{"mark action", func() ([]string, error) { return SetMark(7).iptablesArgs(IPv4) }, rmArgs("-j MARK --set-xmark 0x7/0xffffffff")},
		{"masquerade", func() ([]string, error) { return Masquerade(MasqueradeOptions{}).iptablesArgs(IPv6) }, rmArgs("-j MASQUERADE")},
		{"snat", func() ([]string, error) { return SNAT(rmAddr("1.1.1.1"), SNATOptions{}).iptablesArgs(IPv4) }, rmArgs("-j SNAT --to-source 1.1.1.1")},
		{"dnat", func() ([]string, error) {
			return DNAT(netip.AddrPortFrom(rmAddr("::1"), 0)).iptablesArgs(IPv6)
		}, rmArgs("-j DNAT --to-destination ::1")},
		{"log", func() ([]string, error) { return Log(LogOptions{}).iptablesArgs(IPv4) }, rmArgs("-j LOG")},
		{"notrack", func() ([]string, error) { return NoTrack().iptablesArgs(IPv4) }, rmArgs("-j CT --notrack")},
		{"nflog", func() ([]string, error) { return NFLOG(NFLOGOptions{Size: 1}).iptablesArgs(IPv4) }, rmArgs("-j NFLOG --nflog-size 1")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.got()
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
	// Alone, a port criterion has no protocol, and an unknown version is
	// refused by every criterion and action.
	_, err := DestPorts(Port(1)).iptablesArgs(IPv4)
	assert.ErrorContains(t, err, "port match without tcp/udp/sctp protocol")
	_, err = Reject(RejectTCPReset).iptablesArgs(IPv4)
	assert.ErrorIs(t, err, ErrInvalidRule)
	_, err = SourceNet(rmPrefix("10.0.0.0/8")).iptablesArgs(0)
	assert.ErrorIs(t, err, ErrInvalidRule)
	_, err = Accept().iptablesArgs(7)
	assert.ErrorIs(t, err, ErrInvalidRule)
}

func TestJumpTarget(t *testing.T) {
	assert.Equal(t, "A", Jump("A").JumpTarget())
	assert.Equal(t, "B", Goto("B").JumpTarget())
	for _, a := range []Action{Accept(), Drop(), Return(), Reject(0), SetMark(1), ClearMark(1), SetMaskedMark(1, 1),
		Masquerade(MasqueradeOptions{}), SNAT(rmAddr("1.1.1.1"), SNATOptions{}), DNAT(netip.AddrPort{}),
		Log(LogOptions{}), NoTrack(), NFLOG(NFLOGOptions{})} {
		assert.Empty(t, a.JumpTarget(), "%T", a)
	}
}

func TestValidateChainName(t *testing.T) {
	assert.NoError(t, ValidateChainName(strings.Repeat("c", MaxChainNameLength)))
	for _, bad := range []string{"", strings.Repeat("c", MaxChainNameLength+1), "-x", "!x", "a b", "é", `a"b`} {
		assert.ErrorIs(t, ValidateChainName(bad), ErrInvalidChainName, "%q", bad)
	}
}

func TestIPVersionString(t *testing.T) {
	assert.Equal(t, "IPv4", IPv4.String())
	assert.Equal(t, "IPv6", IPv6.String())
	assert.Equal(t, "Family(5)", IPVersion(5).String())
	assert.False(t, IPVersion(0).Valid())
}

func TestCommentLimits(t *testing.T) {
	r := Rule{Action: Accept(), Comments: []string{strings.Repeat("é", MaxCommentLength/2)}}
	assert.NoError(t, r.Validate(IPv4), "multi-byte text up to %d bytes", MaxCommentLength)
	r.Comments = []string{strings.Repeat("c", MaxCommentLength)}
	assert.NoError(t, r.Validate(IPv6))
}

func BenchmarkRuleArgs(b *testing.B) {
	r := Rule{
		Match: Match{Protocol(ProtoTCP), SourceNet(rmPrefix("10.0.0.0/8")), DestPorts(Port(80), Port(443)),
			ConntrackState(CTStateNew), SourceIPSet("np-net4"), MarkMatches(0x100, 0xff00)},
		Action:   Jump("NP-TARGET"),
		Comments: []string{"np:0123456789abcdef"},
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Args(IPv4); err != nil {
			b.Fatal(err)
		}
	}
}
