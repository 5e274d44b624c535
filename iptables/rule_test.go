package iptables

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/netfilter"
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
	v     ipfamily.Family
	table string
	chain string
	rule  netfilter.Rule
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
var rmSetNames = map[ipfamily.Family][][2]string{
	ipfamily.IPv4: {{"np-net4", "hash:net"}, {"np-ipport4", "hash:ip,port"}, {"np-ipportnet4", "hash:ip,port,net"}},
	ipfamily.IPv6: {{"np-net6", "hash:net"}, {"np-ipport6", "hash:ip,port"}, {"np-ipportnet6", "hash:ip,port,net"}},
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
	m := func(c ...netfilter.Match) []netfilter.Match { return c }
	v4 := []rmCase{
		{name: "accept all", table: "filter", chain: "INPUT", rule: netfilter.Rule{Action: netfilter.Accept()}, want: rmArgs("-j ACCEPT")},
		{name: "source net", table: "filter", chain: "INPUT",
			rule: netfilter.Rule{Matches: m(netfilter.SourceNet(rmPrefix("10.0.0.0/8"))), Action: netfilter.Drop()},
			want: rmArgs("-s 10.0.0.0/8 -j DROP")},
		{name: "not source net", table: "filter", chain: "INPUT",
			rule: netfilter.Rule{Matches: m(netfilter.Not(netfilter.SourceNet(rmPrefix("192.168.0.0/16")))), Action: netfilter.Accept()},
			want: rmArgs("! -s 192.168.0.0/16 -j ACCEPT")},
		{name: "dest host", table: "filter", chain: "INPUT",
			rule: netfilter.Rule{Matches: m(netfilter.DestNet(rmPrefix("10.0.0.1/32"))), Action: netfilter.Return()},
			want: rmArgs("-d 10.0.0.1/32 -j RETURN")},
		{name: "not dest net", table: "filter", chain: "OUTPUT",
			rule: netfilter.Rule{Matches: m(netfilter.Not(netfilter.DestNet(rmPrefix("172.16.0.0/12")))), Action: netfilter.Accept()},
			want: rmArgs("! -d 172.16.0.0/12 -j ACCEPT")},
		{name: "whole address space", table: "filter", chain: "INPUT",
			rule:        netfilter.Rule{Matches: m(netfilter.SourceNet(rmPrefix("0.0.0.0/0"))), Action: netfilter.Accept()},
			want:        rmArgs("-s 0.0.0.0/0 -j ACCEPT"),
			saveDiffers: "iptables-save leaves out a /0 source"},
		{name: "header criteria first", table: "filter", chain: "INPUT",
			rule: netfilter.Rule{Matches: m(netfilter.Protocol(netfilter.ProtoTCP), netfilter.DestPorts(netfilter.Port(80)), netfilter.InInterface("eth0"),
				netfilter.DestNet(rmPrefix("10.0.0.0/24")), netfilter.SourceNet(rmPrefix("10.1.0.0/16"))), Action: netfilter.Accept()},
			want: rmArgs("-s 10.1.0.0/16 -d 10.0.0.0/24 -i eth0 -p tcp -m tcp --dport 80 -j ACCEPT")},
		{name: "udp source port range", table: "filter", chain: "INPUT",
			rule: netfilter.Rule{Matches: m(netfilter.Protocol(netfilter.ProtoUDP), netfilter.SourcePorts(netfilter.Ports(1000, 2000))), Action: netfilter.Accept()},
			want: rmArgs("-p udp -m udp --sport 1000:2000 -j ACCEPT")},
		{name: "multiport", table: "filter", chain: "INPUT",
			rule: netfilter.Rule{Matches: m(netfilter.Protocol(netfilter.ProtoTCP), netfilter.DestPorts(netfilter.Port(22), netfilter.Port(80), netfilter.Ports(8000, 8080))), Action: netfilter.Accept()},
			want: rmArgs("-p tcp -m multiport --dports 22,80,8000:8080 -j ACCEPT")},
		{name: "multiport one-port range", table: "filter", chain: "INPUT",
			rule: netfilter.Rule{Matches: m(netfilter.Protocol(netfilter.ProtoTCP), netfilter.SourcePorts(netfilter.Ports(7, 7), netfilter.Port(9))), Action: netfilter.Accept()},
			want: rmArgs("-p tcp -m multiport --sports 7,9 -j ACCEPT")},
		{name: "not dest port", table: "filter", chain: "INPUT",
			rule: netfilter.Rule{Matches: m(netfilter.Protocol(netfilter.ProtoTCP), netfilter.Not(netfilter.DestPorts(netfilter.Port(22)))), Action: netfilter.Drop()},
			want: rmArgs("-p tcp -m tcp ! --dport 22 -j DROP")},
		{name: "sctp not source multiport", table: "filter", chain: "INPUT",
			rule: netfilter.Rule{Matches: m(netfilter.Protocol(netfilter.ProtoSCTP), netfilter.Not(netfilter.SourcePorts(netfilter.Port(1), netfilter.Port(2)))), Action: netfilter.Drop()},
			want: rmArgs("-p sctp -m multiport ! --sports 1,2 -j DROP")},
		{name: "sctp single port", table: "filter", chain: "INPUT",
			rule: netfilter.Rule{Matches: m(netfilter.Protocol(netfilter.ProtoSCTP), netfilter.DestPorts(netfilter.Port(3868))), Action: netfilter.Accept()},
			want: rmArgs("-p sctp -m sctp --dport 3868 -j ACCEPT")},
		{name: "fifteen ports", table: "filter", chain: "INPUT",
			rule: netfilter.Rule{Matches: m(netfilter.Protocol(netfilter.ProtoUDP), netfilter.DestPorts(netfilter.Port(1), netfilter.Port(2), netfilter.Port(3), netfilter.Port(4), netfilter.Port(5), netfilter.Port(6),
				netfilter.Port(7), netfilter.Port(8), netfilter.Port(9), netfilter.Port(10), netfilter.Port(11), netfilter.Port(12), netfilter.Port(13), netfilter.Ports(14, 15))), Action: netfilter.Accept()},
			want: rmArgs("-p udp -m multiport --dports 1,2,3,4,5,6,7,8,9,10,11,12,13,14:15 -j ACCEPT")},
		{name: "source and dest ports", table: "filter", chain: "INPUT",
			rule: netfilter.Rule{Matches: m(netfilter.Protocol(netfilter.ProtoTCP), netfilter.SourcePorts(netfilter.Port(1024)), netfilter.DestPorts(netfilter.Port(443))), Action: netfilter.Accept()},
			want: rmArgs("-p tcp -m tcp --sport 1024 --dport 443 -j ACCEPT")},
		{name: "source and dest ports share one match", table: "filter", chain: "INPUT",
			rule: netfilter.Rule{Matches: m(netfilter.Protocol(netfilter.ProtoUDP), netfilter.Not(netfilter.SourcePorts(netfilter.Port(53))), netfilter.Mark(1, 1), netfilter.DestPorts(netfilter.Ports(1, 2))), Action: netfilter.Accept()},
			want: rmArgs("-p udp -m udp ! --sport 53 --dport 1:2 -m mark --mark 0x1/0x1 -j ACCEPT")},
		{name: "dest before source port", table: "filter", chain: "INPUT",
			rule: netfilter.Rule{Matches: m(netfilter.Protocol(netfilter.ProtoSCTP), netfilter.ConntrackState(netfilter.CTStateNew), netfilter.DestPorts(netfilter.Port(9)), netfilter.SourcePorts(netfilter.Port(8))), Action: netfilter.Accept()},
			want: rmArgs("-p sctp -m conntrack --ctstate NEW -m sctp --sport 8 --dport 9 -j ACCEPT")},
		{name: "single port and multiport", table: "filter", chain: "INPUT",
			rule: netfilter.Rule{Matches: m(netfilter.Protocol(netfilter.ProtoTCP), netfilter.SourcePorts(netfilter.Port(1), netfilter.Port(2)), netfilter.DestPorts(netfilter.Port(3))), Action: netfilter.Accept()},
			want: rmArgs("-p tcp -m multiport --sports 1,2 -m tcp --dport 3 -j ACCEPT")},
		{name: "negated low range", table: "filter", chain: "INPUT",
			rule: netfilter.Rule{Matches: m(netfilter.Protocol(netfilter.ProtoTCP), netfilter.Not(netfilter.DestPorts(netfilter.Ports(0, 1)))), Action: netfilter.Accept()},
			want: rmArgs("-p tcp -m tcp --dport 2:65535 -j ACCEPT")},
		{name: "negated port zero", table: "filter", chain: "INPUT",
			rule: netfilter.Rule{Matches: m(netfilter.Protocol(netfilter.ProtoTCP), netfilter.Not(netfilter.DestPorts(netfilter.Port(0)))), Action: netfilter.Accept()},
			want: rmArgs("-p tcp -m tcp ! --dport 0 -j ACCEPT")},
		{name: "not protocol", table: "filter", chain: "INPUT",
			rule: netfilter.Rule{Matches: m(netfilter.Not(netfilter.Protocol(netfilter.ProtoUDP))), Action: netfilter.Accept()},
			want: rmArgs("! -p udp -j ACCEPT")},
		{name: "esp", table: "filter", chain: "INPUT", rule: netfilter.Rule{Matches: m(netfilter.Protocol(netfilter.ProtoESP)), Action: netfilter.Accept()},
			want: rmArgs("-p esp -j ACCEPT")},
		{name: "ah", table: "filter", chain: "INPUT", rule: netfilter.Rule{Matches: m(netfilter.Protocol(netfilter.ProtoAH)), Action: netfilter.Accept()},
			want: rmArgs("-p ah -j ACCEPT")},
		{name: "udplite", table: "filter", chain: "INPUT", rule: netfilter.Rule{Matches: m(netfilter.Protocol(netfilter.ProtoUDPLite)), Action: netfilter.Accept()},
			want: rmArgs("-p udplite -j ACCEPT")},
		{name: "protocol by number", table: "filter", chain: "INPUT", rule: netfilter.Rule{Matches: m(netfilter.Protocol(netfilter.ProtoGRE)), Action: netfilter.Accept()},
			want:        rmArgs("-p 47 -j ACCEPT"),
			saveDiffers: "iptables-save names the protocol from /etc/protocols"},
		{name: "interfaces", table: "filter", chain: "FORWARD",
			rule: netfilter.Rule{Matches: m(netfilter.InInterface("eth+"), netfilter.Not(netfilter.OutInterface("veth0"))), Action: netfilter.Accept()},
			want: rmArgs("-i eth+ ! -o veth0 -j ACCEPT")},
		{name: "not in interface", table: "filter", chain: "INPUT",
			rule: netfilter.Rule{Matches: m(netfilter.Not(netfilter.InInterface("lo"))), Action: netfilter.Accept()},
			want: rmArgs("! -i lo -j ACCEPT")},
		{name: "out interface longest name", table: "filter", chain: "OUTPUT",
			rule: netfilter.Rule{Matches: m(netfilter.OutInterface("abcdefghijklmn+")), Action: netfilter.Accept()},
			want: rmArgs("-o abcdefghijklmn+ -j ACCEPT")},
		{name: "mark", table: "filter", chain: "INPUT",
			rule: netfilter.Rule{Matches: m(netfilter.Mark(0x1, 0x1)), Action: netfilter.Accept()},
			want: rmArgs("-m mark --mark 0x1/0x1 -j ACCEPT")},
		{name: "not mark", table: "filter", chain: "INPUT",
			rule: netfilter.Rule{Matches: m(netfilter.Not(netfilter.Mark(0x100, 0xff00))), Action: netfilter.Accept()},
			want: rmArgs("-m mark ! --mark 0x100/0xff00 -j ACCEPT")},
		{name: "mark full mask", table: "filter", chain: "INPUT",
			rule: netfilter.Rule{Matches: m(netfilter.Mark(0xdead, 0xffffffff)), Action: netfilter.Accept()},
			want: rmArgs("-m mark --mark 0xdead -j ACCEPT")},
		{name: "source set", table: "filter", chain: "INPUT",
			rule: netfilter.Rule{Matches: m(netfilter.SourceIPSet("np-net4")), Action: netfilter.Accept()},
			want: rmArgs("-m set --match-set np-net4 src -j ACCEPT")},
		{name: "not dest set", table: "filter", chain: "INPUT",
			rule: netfilter.Rule{Matches: m(netfilter.Not(netfilter.DestIPSet("np-net4"))), Action: netfilter.Drop()},
			want: rmArgs("-m set ! --match-set np-net4 dst -j DROP")},
		{name: "two-dimension set", table: "filter", chain: "INPUT",
			rule: netfilter.Rule{Matches: m(netfilter.IPSet("np-ipport4", netfilter.Dst, netfilter.Dst)), Action: netfilter.Accept()},
			want: rmArgs("-m set --match-set np-ipport4 dst,dst -j ACCEPT")},
		{name: "three-dimension set and not source set", table: "filter", chain: "FORWARD",
			rule: netfilter.Rule{Matches: m(netfilter.IPSet("np-ipportnet4", netfilter.Dst, netfilter.Dst, netfilter.Src), netfilter.Not(netfilter.SourceIPSet("np-net4"))), Action: netfilter.Accept()},
			want: rmArgs("-m set --match-set np-ipportnet4 dst,dst,src -m set ! --match-set np-net4 src -j ACCEPT")},
		{name: "conntrack", table: "filter", chain: "INPUT",
			rule: netfilter.Rule{Matches: m(netfilter.ConntrackState(netfilter.CTStateEstablished, netfilter.CTStateRelated)), Action: netfilter.Accept()},
			want: rmArgs("-m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT")},
		{name: "not conntrack", table: "filter", chain: "INPUT",
			rule: netfilter.Rule{Matches: m(netfilter.Not(netfilter.ConntrackState(netfilter.CTStateInvalid))), Action: netfilter.Accept()},
			want: rmArgs("-m conntrack ! --ctstate INVALID -j ACCEPT")},
		{name: "conntrack every state", table: "filter", chain: "INPUT",
			rule: netfilter.Rule{Matches: m(netfilter.ConntrackState(netfilter.CTStateDNAT, netfilter.CTStateSNAT, netfilter.CTStateUntracked, netfilter.CTStateEstablished,
				netfilter.CTStateRelated, netfilter.CTStateNew, netfilter.CTStateInvalid)), Action: netfilter.Accept()},
			want: rmArgs("-m conntrack --ctstate INVALID,NEW,RELATED,ESTABLISHED,UNTRACKED,SNAT,DNAT -j ACCEPT")},
		{name: "dest address type", table: "filter", chain: "INPUT",
			rule: netfilter.Rule{Matches: m(netfilter.DestAddrType(netfilter.AddrTypeLocal)), Action: netfilter.Accept()},
			want: rmArgs("-m addrtype --dst-type LOCAL -j ACCEPT")},
		{name: "not source address types", table: "filter", chain: "INPUT",
			rule: netfilter.Rule{Matches: m(netfilter.Not(netfilter.SourceAddrType(netfilter.AddrTypeMulticast | netfilter.AddrTypeBroadcast))), Action: netfilter.Accept()},
			want: rmArgs("-m addrtype ! --src-type BROADCAST,MULTICAST -j ACCEPT")},
		{name: "address type limit in", table: "filter", chain: "INPUT",
			rule: netfilter.Rule{Matches: m(netfilter.MatchAddrType{Types: netfilter.AddrTypeLocal, Dir: netfilter.Dst, LimitIfaceIn: true}), Action: netfilter.Accept()},
			want: rmArgs("-m addrtype --dst-type LOCAL --limit-iface-in -j ACCEPT")},
		{name: "address type limit out", table: "filter", chain: "OUTPUT",
			rule: netfilter.Rule{Matches: m(netfilter.MatchAddrType{Types: netfilter.AddrTypeUnicast | netfilter.AddrTypeLocal, Dir: netfilter.Src, LimitIfaceOut: true}), Action: netfilter.Accept()},
			want: rmArgs("-m addrtype --src-type UNICAST,LOCAL --limit-iface-out -j ACCEPT")},
		{name: "not dest address type", table: "filter", chain: "INPUT",
			rule: netfilter.Rule{Matches: m(netfilter.Not(netfilter.DestAddrType(netfilter.AddrTypeBlackhole | netfilter.AddrTypeUnreachable | netfilter.AddrTypeProhibit))), Action: netfilter.Drop()},
			want: rmArgs("-m addrtype ! --dst-type BLACKHOLE,UNREACHABLE,PROHIBIT -j DROP")},
		{name: "icmp type brings protocol", table: "filter", chain: "INPUT",
			rule: netfilter.Rule{Matches: m(netfilter.ICMPType(8)), Action: netfilter.Accept()},
			want: rmArgs("-p icmp -m icmp --icmp-type 8 -j ACCEPT")},
		{name: "icmp type code with protocol", table: "filter", chain: "INPUT",
			rule: netfilter.Rule{Matches: m(netfilter.ICMPTypeCode(3, 4), netfilter.Protocol(netfilter.ProtoICMP)), Action: netfilter.Accept()},
			want: rmArgs("-p icmp -m icmp --icmp-type 3/4 -j ACCEPT")},
		{name: "not icmp type", table: "filter", chain: "INPUT",
			rule: netfilter.Rule{Matches: m(netfilter.MatchICMP{Family: ipfamily.IPv4, Type: 0, Negate: true}), Action: netfilter.Drop()},
			want: rmArgs("-p icmp -m icmp ! --icmp-type 0 -j DROP")},
		{name: "limit", table: "filter", chain: "INPUT",
			rule:        netfilter.Rule{Matches: m(netfilter.Protocol(netfilter.ProtoTCP), netfilter.Limit(netfilter.MaxLimitRatePerSecond, netfilter.PerSecond, 0)), Action: netfilter.Log("np-limited:")},
			want:        rmArgs("-p tcp -m limit --limit 10000/second --limit-burst 5 -j LOG --log-prefix np-limited:"),
			saveDiffers: "iptables-save writes the period as sec"},
		{name: "icmp any type", table: "filter", chain: "INPUT",
			rule: netfilter.Rule{Matches: m(netfilter.ICMPType(255)), Action: netfilter.Accept()},
			want: rmArgs("-p icmp -m icmp --icmp-type any -j ACCEPT")},
		{name: "comments", table: "filter", chain: "INPUT",
			rule: netfilter.Rule{Matches: m(netfilter.Protocol(netfilter.ProtoTCP)), Action: netfilter.Accept(), Comments: []string{"allow web", "np:AbC-x9", "café it's"}},
			want: rmArgs("-p tcp -m comment --comment allow_web -m comment --comment np:AbC-x9 -m comment --comment café_it's -j ACCEPT")},
		{name: "drop", table: "filter", chain: "FORWARD", rule: netfilter.Rule{Action: netfilter.Drop()}, want: rmArgs("-j DROP")},
		{name: "return", table: "filter", chain: "FORWARD", rule: netfilter.Rule{Action: netfilter.Return()}, want: rmArgs("-j RETURN")},
		{name: "reject default", table: "filter", chain: "INPUT", rule: netfilter.Rule{Action: netfilter.Reject(netfilter.RejectPortUnreachable)},
			want: rmArgs("-j REJECT --reject-with icmp-port-unreachable")},
		{name: "reject tcp reset", table: "filter", chain: "INPUT",
			rule: netfilter.Rule{Matches: m(netfilter.Protocol(netfilter.ProtoTCP)), Action: netfilter.Reject(netfilter.RejectTCPReset)},
			want: rmArgs("-p tcp -j REJECT --reject-with tcp-reset")},
		{name: "reject admin prohibited", table: "filter", chain: "INPUT", rule: netfilter.Rule{Action: netfilter.Reject(netfilter.RejectAdminProhibited)},
			want: rmArgs("-j REJECT --reject-with icmp-admin-prohibited")},
		{name: "reject net unreachable", table: "filter", chain: "INPUT", rule: netfilter.Rule{Action: netfilter.Reject(netfilter.RejectNetUnreachable)},
			want: rmArgs("-j REJECT --reject-with icmp-net-unreachable")},
		{name: "reject host unreachable", table: "filter", chain: "INPUT", rule: netfilter.Rule{Action: netfilter.Reject(netfilter.RejectHostUnreachable)},
			want: rmArgs("-j REJECT --reject-with icmp-host-unreachable")},
		{name: "reject proto unreachable", table: "filter", chain: "INPUT", rule: netfilter.Rule{Action: netfilter.Reject(netfilter.RejectProtoUnreachable)},
			want: rmArgs("-j REJECT --reject-with icmp-proto-unreachable")},
		{name: "reject net prohibited", table: "filter", chain: "INPUT", rule: netfilter.Rule{Action: netfilter.Reject(netfilter.RejectNetProhibited)},
			want: rmArgs("-j REJECT --reject-with icmp-net-prohibited")},
		{name: "reject host prohibited", table: "filter", chain: "INPUT", rule: netfilter.Rule{Action: netfilter.Reject(netfilter.RejectHostProhibited)},
			want: rmArgs("-j REJECT --reject-with icmp-host-prohibited")},
		{name: "jump", table: "filter", chain: "INPUT", rule: netfilter.Rule{Matches: m(netfilter.InInterface("eth0")), Action: netfilter.Jump(rmTarget)},
			want: rmArgs("-i eth0 -j NP-TARGET")},
		{name: "goto", table: "filter", chain: "FORWARD", rule: netfilter.Rule{Action: netfilter.Goto(rmTarget)},
			want: rmArgs("-g NP-TARGET")},
		{name: "log", table: "filter", chain: "INPUT", rule: netfilter.Rule{Action: netfilter.ActionLog{Prefix: "np drop: "}},
			want: rmArgs("-j LOG --log-prefix np_drop:_")},
		{name: "log level", table: "filter", chain: "INPUT",
			rule: netfilter.Rule{Action: netfilter.ActionLog{Prefix: "12345678901234567890123456789", Level: netfilter.LogLevelDebug}},
			want: rmArgs("-j LOG --log-prefix 12345678901234567890123456789 --log-level 7")},
		{name: "log warning is default", table: "filter", chain: "INPUT", rule: netfilter.Rule{Action: netfilter.ActionLog{Level: netfilter.LogLevelWarning}},
			want: rmArgs("-j LOG")},
		{name: "log emerg", table: "filter", chain: "INPUT", rule: netfilter.Rule{Action: netfilter.ActionLog{Level: netfilter.LogLevelEmerg}},
			want: rmArgs("-j LOG --log-level 0")},
		{name: "nflog", table: "filter", chain: "INPUT",
			rule: netfilter.Rule{Action: netfilter.ActionNFLOG{Group: 5, Prefix: "np dropped", Size: 128}},
			want: rmArgs("-j NFLOG --nflog-prefix np_dropped --nflog-group 5 --nflog-size 128")},
		{name: "nflog defaults", table: "filter", chain: "INPUT", rule: netfilter.Rule{Action: netfilter.ActionNFLOG{}},
			want: rmArgs("-j NFLOG")},
		{name: "set mark", table: "mangle", chain: "PREROUTING", rule: netfilter.Rule{Action: netfilter.SetMark(0x1)},
			want: rmArgs("-j MARK --set-xmark 0x1/0xffffffff")},
		{name: "set masked mark", table: "mangle", chain: "PREROUTING",
			rule: netfilter.Rule{Matches: m(netfilter.Not(netfilter.Mark(0x100, 0x100))), Action: netfilter.SetMaskedMark(0x100, 0xff00)},
			want: rmArgs("-m mark ! --mark 0x100/0x100 -j MARK --set-xmark 0x100/0xff00")},
		{name: "clear mark", table: "mangle", chain: "POSTROUTING", rule: netfilter.Rule{Action: netfilter.ClearMark(0xf000)},
			want: rmArgs("-j MARK --set-xmark 0x0/0xf000")},
		{name: "filter-table mark", table: "filter", chain: "FORWARD", rule: netfilter.Rule{Action: netfilter.SetMaskedMark(0x10000, 0x10000)},
			want: rmArgs("-j MARK --set-xmark 0x10000/0x10000")},
		{name: "masquerade", table: "nat", chain: "POSTROUTING", rule: netfilter.Rule{Action: netfilter.ActionMasquerade{}},
			want: rmArgs("-j MASQUERADE")},
		{name: "masquerade random fully", table: "nat", chain: "POSTROUTING",
			rule: netfilter.Rule{Matches: m(netfilter.OutInterface("eth0")), Action: netfilter.ActionMasquerade{RandomFully: true}},
			want: rmArgs("-o eth0 -j MASQUERADE --random-fully")},
		{name: "masquerade to ports", table: "nat", chain: "POSTROUTING",
			rule: netfilter.Rule{Matches: m(netfilter.Protocol(netfilter.ProtoTCP)), Action: netfilter.ActionMasquerade{RandomFully: true, ToPorts: netfilter.Ports(1024, 65535)}},
			want: rmArgs("-p tcp -j MASQUERADE --to-ports 1024-65535 --random-fully")},
		{name: "masquerade to one port", table: "nat", chain: "POSTROUTING",
			rule: netfilter.Rule{Matches: m(netfilter.Protocol(netfilter.ProtoUDP)), Action: netfilter.ActionMasquerade{ToPorts: netfilter.Port(4000)}},
			want: rmArgs("-p udp -j MASQUERADE --to-ports 4000")},
		{name: "snat", table: "nat", chain: "POSTROUTING",
			rule: netfilter.Rule{Matches: m(netfilter.SourceNet(rmPrefix("10.0.0.0/8"))), Action: netfilter.ActionSNAT{To: rmAddr("192.0.2.1")}},
			want: rmArgs("-s 10.0.0.0/8 -j SNAT --to-source 192.0.2.1")},
		{name: "snat ports random fully", table: "nat", chain: "POSTROUTING",
			rule: netfilter.Rule{Matches: m(netfilter.Protocol(netfilter.ProtoUDP)), Action: netfilter.ActionSNAT{To: rmAddr("192.0.2.1"), RandomFully: true, Ports: netfilter.Ports(1000, 2000)}},
			want: rmArgs("-p udp -j SNAT --to-source 192.0.2.1:1000-2000 --random-fully")},
		{name: "dnat address", table: "nat", chain: "PREROUTING",
			rule: netfilter.Rule{Matches: m(netfilter.DestNet(rmPrefix("198.51.100.7/32"))), Action: netfilter.DNAT(netip.AddrPortFrom(rmAddr("10.0.0.1"), 0))},
			want: rmArgs("-d 198.51.100.7/32 -j DNAT --to-destination 10.0.0.1")},
		{name: "dnat port", table: "nat", chain: "OUTPUT",
			rule: netfilter.Rule{Matches: m(netfilter.Protocol(netfilter.ProtoTCP), netfilter.DestPorts(netfilter.Port(80))), Action: netfilter.DNAT(netip.MustParseAddrPort("10.0.0.1:8080"))},
			want: rmArgs("-p tcp -m tcp --dport 80 -j DNAT --to-destination 10.0.0.1:8080")},
		{name: "dnat port range", table: "nat", chain: "PREROUTING",
			rule: netfilter.Rule{Matches: m(netfilter.Protocol(netfilter.ProtoTCP)), Action: netfilter.ActionDNAT{To: rmAddr("10.0.0.2"), Ports: netfilter.Ports(80, 90)}},
			want: rmArgs("-p tcp -j DNAT --to-destination 10.0.0.2:80-90")},
		{name: "notrack", table: "raw", chain: "PREROUTING", rule: netfilter.Rule{Action: netfilter.NoTrack()},
			want: rmArgs("-j CT --notrack")},
		{name: "notrack dns", table: "raw", chain: "OUTPUT",
			rule: netfilter.Rule{Matches: m(netfilter.Protocol(netfilter.ProtoUDP), netfilter.DestPorts(netfilter.Port(53))), Action: netfilter.NoTrack(), Comments: []string{"no conntrack for DNS"}},
			want: rmArgs("-p udp -m udp --dport 53 -m comment --comment no_conntrack_for_DNS -j CT --notrack")},
	}
	v6 := []rmCase{
		{name: "source net", table: "filter", chain: "INPUT",
			rule: netfilter.Rule{Matches: m(netfilter.SourceNet(rmPrefix("fd00::/64"))), Action: netfilter.Drop()},
			want: rmArgs("-s fd00::/64 -j DROP")},
		{name: "not dest host", table: "filter", chain: "INPUT",
			rule: netfilter.Rule{Matches: m(netfilter.Not(netfilter.DestNet(rmPrefix("fd01::1/128")))), Action: netfilter.Accept()},
			want: rmArgs("! -d fd01::1/128 -j ACCEPT")},
		{name: "mapped v4 address", table: "filter", chain: "INPUT",
			rule: netfilter.Rule{Matches: m(netfilter.SourceNet(rmPrefix("::ffff:192.0.2.1/128"))), Action: netfilter.Drop()},
			want: rmArgs("-s ::ffff:192.0.2.1/128 -j DROP")},
		{name: "whole address space", table: "filter", chain: "INPUT",
			rule:        netfilter.Rule{Matches: m(netfilter.DestNet(rmPrefix("::/0"))), Action: netfilter.Accept()},
			want:        rmArgs("-d ::/0 -j ACCEPT"),
			saveDiffers: "ip6tables-save leaves out a /0 destination"},
		{name: "header criteria first", table: "filter", chain: "FORWARD",
			rule: netfilter.Rule{Matches: m(netfilter.Protocol(netfilter.ProtoUDP), netfilter.DestPorts(netfilter.Port(53), netfilter.Port(5353)), netfilter.OutInterface("wg0"),
				netfilter.InInterface("cali+"), netfilter.DestNet(rmPrefix("2001:db8::/32"))), Action: netfilter.Accept()},
			want: rmArgs("-d 2001:db8::/32 -i cali+ -o wg0 -p udp -m multiport --dports 53,5353 -j ACCEPT")},
		{name: "tcp ports", table: "filter", chain: "INPUT",
			rule: netfilter.Rule{Matches: m(netfilter.Protocol(netfilter.ProtoTCP), netfilter.Not(netfilter.SourcePorts(netfilter.Ports(0, 1023)))), Action: netfilter.Drop()},
			want: rmArgs("-p tcp -m tcp --sport 1024:65535 -j DROP")},
		{name: "icmpv6 type", table: "filter", chain: "INPUT",
			rule: netfilter.Rule{Matches: m(netfilter.ICMPv6Type(128)), Action: netfilter.Accept()},
			want: rmArgs("-p ipv6-icmp -m icmp6 --icmpv6-type 128 -j ACCEPT")},
		{name: "icmpv6 type code", table: "filter", chain: "INPUT",
			rule: netfilter.Rule{Matches: m(netfilter.Protocol(netfilter.ProtoICMPv6), netfilter.ICMPv6TypeCode(1, 3)), Action: netfilter.Accept()},
			want: rmArgs("-p ipv6-icmp -m icmp6 --icmpv6-type 1/3 -j ACCEPT")},
		{name: "limit per hour", table: "filter", chain: "INPUT",
			rule: netfilter.Rule{Matches: m(netfilter.Limit(1, netfilter.PerHour, netfilter.MaxLimitBurst)), Action: netfilter.Accept()},
			want: rmArgs("-m limit --limit 1/hour --limit-burst 10000 -j ACCEPT")},
		{name: "not icmpv6 type 255", table: "filter", chain: "INPUT",
			rule: netfilter.Rule{Matches: m(netfilter.MatchICMP{Family: ipfamily.IPv6, Type: 255, Negate: true}), Action: netfilter.Accept()},
			want: rmArgs("-p ipv6-icmp -m icmp6 ! --icmpv6-type 255 -j ACCEPT")},
		// (UNSPEC, UNICAST and MULTICAST are refused in IPv6 rules: see
		// netfilter.MatchAddrType.)
		{name: "address types", table: "filter", chain: "INPUT",
			rule: netfilter.Rule{Matches: m(netfilter.SourceAddrType(netfilter.AddrTypeLocal | netfilter.AddrTypeAnycast | netfilter.AddrTypeUnreachable)), Action: netfilter.Accept()},
			want: rmArgs("-m addrtype --src-type LOCAL,ANYCAST,UNREACHABLE -j ACCEPT")},
		{name: "sets", table: "filter", chain: "INPUT",
			rule: netfilter.Rule{Matches: m(netfilter.SourceIPSet("np-net6"), netfilter.IPSet("np-ipport6", netfilter.Dst, netfilter.Dst), netfilter.IPSet("np-ipportnet6", netfilter.Dst, netfilter.Dst, netfilter.Src)), Action: netfilter.Accept()},
			want: rmArgs("-m set --match-set np-net6 src -m set --match-set np-ipport6 dst,dst -m set --match-set np-ipportnet6 dst,dst,src -j ACCEPT")},
		{name: "conntrack and mark", table: "filter", chain: "FORWARD",
			rule: netfilter.Rule{Matches: m(netfilter.ConntrackState(netfilter.CTStateNew), netfilter.Mark(0x0, 0x30000)), Action: netfilter.Accept()},
			want: rmArgs("-m conntrack --ctstate NEW -m mark --mark 0x0/0x30000 -j ACCEPT")},
		{name: "reject default", table: "filter", chain: "INPUT", rule: netfilter.Rule{Action: netfilter.Reject(netfilter.RejectPortUnreachable)},
			want: rmArgs("-j REJECT --reject-with icmp6-port-unreachable")},
		{name: "reject tcp reset", table: "filter", chain: "INPUT",
			rule: netfilter.Rule{Matches: m(netfilter.Protocol(netfilter.ProtoTCP)), Action: netfilter.Reject(netfilter.RejectTCPReset)},
			want: rmArgs("-p tcp -j REJECT --reject-with tcp-reset")},
		{name: "reject admin prohibited", table: "filter", chain: "INPUT", rule: netfilter.Rule{Action: netfilter.Reject(netfilter.RejectAdminProhibited)},
			want: rmArgs("-j REJECT --reject-with icmp6-adm-prohibited")},
		{name: "reject no route", table: "filter", chain: "INPUT", rule: netfilter.Rule{Action: netfilter.Reject(netfilter.RejectNoRoute)},
			want: rmArgs("-j REJECT --reject-with icmp6-no-route")},
		{name: "reject addr unreachable", table: "filter", chain: "INPUT", rule: netfilter.Rule{Action: netfilter.Reject(netfilter.RejectAddrUnreachable)},
			want: rmArgs("-j REJECT --reject-with icmp6-addr-unreachable")},
		{name: "reject policy fail", table: "filter", chain: "INPUT", rule: netfilter.Rule{Action: netfilter.Reject(netfilter.RejectPolicyFail)},
			want: rmArgs("-j REJECT --reject-with icmp6-policy-fail")},
		{name: "reject reject route", table: "filter", chain: "INPUT", rule: netfilter.Rule{Action: netfilter.Reject(netfilter.RejectRejectRoute)},
			want: rmArgs("-j REJECT --reject-with icmp6-reject-route")},
		{name: "jump with comment", table: "filter", chain: "OUTPUT",
			rule: netfilter.Rule{Action: netfilter.Jump(rmTarget), Comments: []string{"np:0123456789abcdef"}},
			want: rmArgs("-m comment --comment np:0123456789abcdef -j NP-TARGET")},
		{name: "goto", table: "filter", chain: "INPUT", rule: netfilter.Rule{Matches: m(netfilter.Not(netfilter.InInterface("lo"))), Action: netfilter.Goto(rmTarget)},
			want: rmArgs("! -i lo -g NP-TARGET")},
		{name: "log", table: "filter", chain: "INPUT", rule: netfilter.Rule{Action: netfilter.ActionLog{Prefix: "np6: ", Level: netfilter.LogLevelInfo}},
			want: rmArgs("-j LOG --log-prefix np6:_ --log-level 6")},
		{name: "nflog", table: "filter", chain: "INPUT",
			rule: netfilter.Rule{Action: netfilter.ActionNFLOG{Group: 65535, Prefix: strings.Repeat("p", MaxNFLOGPrefixLength)}},
			want: append(rmArgs("-j NFLOG --nflog-prefix"), strings.Repeat("p", MaxNFLOGPrefixLength), "--nflog-group", "65535")},
		{name: "set mark", table: "mangle", chain: "OUTPUT", rule: netfilter.Rule{Action: netfilter.SetMaskedMark(0x4000, 0x4000)},
			want: rmArgs("-j MARK --set-xmark 0x4000/0x4000")},
		{name: "clear mark", table: "mangle", chain: "PREROUTING", rule: netfilter.Rule{Action: netfilter.ClearMark(0xffffffff)},
			want: rmArgs("-j MARK --set-xmark 0x0/0xffffffff")},
		{name: "masquerade", table: "nat", chain: "POSTROUTING",
			rule: netfilter.Rule{Matches: m(netfilter.Protocol(netfilter.ProtoTCP)), Action: netfilter.ActionMasquerade{ToPorts: netfilter.Ports(30000, 40000), RandomFully: true}},
			want: rmArgs("-p tcp -j MASQUERADE --to-ports 30000-40000 --random-fully")},
		{name: "snat", table: "nat", chain: "POSTROUTING", rule: netfilter.Rule{Action: netfilter.ActionSNAT{To: rmAddr("2001:db8::1")}},
			want: rmArgs("-j SNAT --to-source 2001:db8::1")},
		{name: "snat ports", table: "nat", chain: "POSTROUTING",
			rule: netfilter.Rule{Matches: m(netfilter.Protocol(netfilter.ProtoSCTP)), Action: netfilter.ActionSNAT{To: rmAddr("2001:db8::1"), Ports: netfilter.Ports(80, 90), RandomFully: true}},
			want: rmArgs("-p sctp -j SNAT --to-source [2001:db8::1]:80-90 --random-fully")},
		{name: "dnat", table: "nat", chain: "PREROUTING", rule: netfilter.Rule{Action: netfilter.DNAT(netip.AddrPortFrom(rmAddr("fd00::10"), 0))},
			want: rmArgs("-j DNAT --to-destination fd00::10")},
		{name: "dnat port", table: "nat", chain: "OUTPUT",
			rule: netfilter.Rule{Matches: m(netfilter.Protocol(netfilter.ProtoTCP), netfilter.DestPorts(netfilter.Port(443))), Action: netfilter.DNAT(netip.MustParseAddrPort("[fd00::10]:8443"))},
			want: rmArgs("-p tcp -m tcp --dport 443 -j DNAT --to-destination [fd00::10]:8443")},
		{name: "notrack", table: "raw", chain: "PREROUTING",
			rule: netfilter.Rule{Matches: m(netfilter.SourceNet(rmPrefix("fe80::/10"))), Action: netfilter.NoTrack()},
			want: rmArgs("-s fe80::/10 -j CT --notrack")},
	}
	for i := range v4 {
		v4[i].v = ipfamily.IPv4
	}
	for i := range v6 {
		v6[i].v = ipfamily.IPv6
	}
	return append(v4, v6...)
}

func TestRuleArgsGolden(t *testing.T) {
	for _, tc := range rmGoldenCases() {
		t.Run(tc.v.String()+"/"+tc.name, func(t *testing.T) {
			got, err := RuleArgs(tc.rule, tc.v)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			again, err := RuleArgs(tc.rule, tc.v)
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
func rmRestoreInput(t testing.TB, v ipfamily.Family, op string) string {
	t.Helper()
	var b strings.Builder
	if op == "-A" {
		fmt.Fprintf(&b, "# Golden %v rules of package iptables, rendered by RuleArgs.\n", v)
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
			args, err := RuleArgs(tc.rule, v)
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
func rmGoldenPath(v ipfamily.Family) string {
	return filepath.Join("testdata", "rules", strings.ToLower(v.String())+".golden")
}

func TestRuleArgsGoldenFile(t *testing.T) {
	for _, v := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
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

// unsupported are the constructs of the rule model that iptables lacks,
// each with a valid rule's action using it.
var unsupported = map[string]netfilter.Action{
	"netfilter.ActionVerdictMap": netfilter.VerdictMap("np-svc", netfilter.Dst, netfilter.Dst),
}

func TestRuleGoldenCasesCoverEveryType(t *testing.T) {
	seen := map[string]map[ipfamily.Family]bool{}
	note := func(x any, v ipfamily.Family) {
		name := fmt.Sprintf("%T", x)
		if seen[name] == nil {
			seen[name] = map[ipfamily.Family]bool{}
		}
		seen[name][v] = true
	}
	for _, tc := range rmGoldenCases() {
		for _, c := range tc.rule.Matches {
			note(c, tc.v)
		}
		note(tc.rule.Action, tc.v)
	}
	types := modelTypes(t)
	require.Len(t, types, 24, "the criteria and actions of package netfilter")
	for _, name := range types {
		if unsupported[name] != nil {
			_, err := RuleArgs(netfilter.Rule{Action: unsupported[name]}, ipfamily.IPv4)
			assert.ErrorIs(t, err, netfilter.ErrUnsupported, "%s: a construct iptables lacks is refused", name)
			continue
		}
		assert.True(t, seen[name][ipfamily.IPv4], "%s has no IPv4 golden case", name)
		if name != "netfilter.ActionAccept" && name != "netfilter.ActionDrop" && name != "netfilter.ActionReturn" {
			assert.True(t, seen[name][ipfamily.IPv6], "%s has no IPv6 golden case", name)
		}
	}
}

func TestRuleArgsErrors(t *testing.T) {
	// Every rule netfilter.Rule.Validate refuses is refused with the error
	// it gives, under the package's prefix (netfilter's own tests go
	// through the cases); TestLimitsOfIptables has what only iptables
	// refuses.
	tcp := netfilter.Protocol(netfilter.ProtoTCP)
	tests := []struct {
		name string
		v    ipfamily.Family
		rule netfilter.Rule
		is   error // the specific sentinel, besides ErrInvalidRule
		msg  string
	}{
		{"unknown family", 5, rmRule(netfilter.Accept()), nil, "unknown IP family"},
		{"no action", ipfamily.IPv4, netfilter.Rule{}, nil, "no action"},
		{"action pointer", ipfamily.IPv4, netfilter.Rule{Action: &netfilter.ActionJump{Chain: "C"}}, nil, "*netfilter.ActionJump"},
		{"criterion pointer", ipfamily.IPv4, rmRule(netfilter.Accept(), tcp, &netfilter.MatchNet{}), nil, "criterion 1 is a *netfilter.MatchNet"},
		{"v4 prefix in v6 rule", ipfamily.IPv6, rmRule(netfilter.Accept(), netfilter.SourceNet(rmPrefix("10.0.0.0/8"))), netfilter.ErrWrongFamily, "src prefix 10.0.0.0/8 in an IPv6 rule"},
		{"host bits", ipfamily.IPv4, rmRule(netfilter.Accept(), netfilter.SourceNet(rmPrefix("10.0.0.1/24"))), ipfamily.ErrHostBits, "10.0.0.1/24 (the network is 10.0.0.0/24)"},
		{"ports without protocol", ipfamily.IPv4, rmRule(netfilter.Accept(), netfilter.DestPorts(netfilter.Port(80))), nil, "port match without tcp/udp/sctp protocol (criterion 0)"},
		{"interface with slash", ipfamily.IPv4, rmRule(netfilter.Accept(), netfilter.InInterface("eth/0")), nil, "contains '/'"},
		{"comment with quote", ipfamily.IPv4, netfilter.Rule{Action: netfilter.Accept(), Comments: []string{`say "hi"`}}, nil, "double quote"},
		{"jump to builtin chain", ipfamily.IPv4, rmRule(netfilter.Jump("INPUT")), netfilter.ErrInvalidChainName, "built-in chain or a target"},
		{"reject v6 reply in v4", ipfamily.IPv4, rmRule(netfilter.Reject(netfilter.RejectNoRoute)), netfilter.ErrWrongFamily, "no-route does not exist in IPv4"},
		{"snat unspecified", ipfamily.IPv4, rmRule(netfilter.SNAT(rmAddr("0.0.0.0"))), nil, "unspecified"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args, err := RuleArgs(tc.rule, tc.v)
			require.Error(t, err)
			assert.Nil(t, args, "no arguments on error")
			assert.ErrorIs(t, err, netfilter.ErrInvalidRule)
			if tc.is != nil {
				assert.ErrorIs(t, err, tc.is)
			} else {
				assert.NotErrorIs(t, err, netfilter.ErrWrongFamily)
			}
			assert.Contains(t, err.Error(), tc.msg)
			assert.True(t, strings.HasPrefix(err.Error(), "iptables: invalid rule: "), err.Error())
			assert.Equal(t, 1, strings.Count(err.Error(), "iptables:"), err.Error())
			assert.NotContains(t, err.Error(), "netfilter:")
			want := strings.TrimPrefix(tc.rule.Validate(tc.v).Error(), "netfilter: ")
			assert.Equal(t, "iptables: "+want, err.Error(), "the model's error under the package's prefix")
		})
	}
}

func TestRuleArgsReturnsFreshSlice(t *testing.T) {
	r := netfilter.Rule{Matches: []netfilter.Match{netfilter.SourceNet(rmPrefix("10.0.0.0/8"))}, Action: netfilter.Accept(), Comments: []string{"c"}}
	a, err := RuleArgs(r, ipfamily.IPv4)
	require.NoError(t, err)
	a[0] = "mutated"
	b, err := RuleArgs(r, ipfamily.IPv4)
	require.NoError(t, err)
	assert.Equal(t, "-s", b[0])
}

func BenchmarkRuleArgs(b *testing.B) {
	r := netfilter.Rule{
		Matches: []netfilter.Match{netfilter.Protocol(netfilter.ProtoTCP), netfilter.SourceNet(rmPrefix("10.0.0.0/8")), netfilter.DestPorts(netfilter.Port(80), netfilter.Port(443)),
			netfilter.ConntrackState(netfilter.CTStateNew), netfilter.SourceIPSet("np-net4"), netfilter.Mark(0x100, 0xff00)},
		Action:   netfilter.Jump("NP-TARGET"),
		Comments: []string{"np:0123456789abcdef"},
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := RuleArgs(r, ipfamily.IPv4); err != nil {
			b.Fatal(err)
		}
	}
}

// modelTypes returns the criteria and actions of package netfilter, as
// "netfilter.MatchNet": the types with a match or action marker method,
// found in its source, so that a type added there is a golden case missing
// here.
func modelTypes(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob("../netfilter/*.go")
	require.NoError(t, err)
	var out []string
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || fn.Name.Name != "match" && fn.Name.Name != "action" {
				continue
			}
			if id, ok := fn.Recv.List[0].Type.(*ast.Ident); ok {
				out = append(out, "netfilter."+id.Name)
			}
		}
	}
	return out
}
