//go:build linux

package netfiltertest_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/iptables"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/netfilter"
	"github.com/nodeplane/nodeplane/nftables"
)

// Ports the server pod and the host listen on.
const (
	port    = 8080 // the port probes connect to
	other   = 8081 // another listening port
	udpPort = 9090
	vipPort = 80
)

// outcome is what a probe saw.
type outcome string

const (
	accepted outcome = "accepted"
	refused  outcome = "refused"     // connection refused: RST or ICMP port unreachable
	dropped  outcome = "dropped"     // no answer
	failed   outcome = "ping failed" // a ping without a reply (dropped or rejected)
)

// unreachable is the outcome of an ICMP error other than port unreachable,
// by the errno the socket reports.
func unreachable(e syscall.Errno) outcome { return outcome("unreachable: " + e.Error()) }

// seen is the outcome of an accepted connection whose server saw source.
func seen(source string) outcome { return outcome("accepted from " + source) }

// env is a topology of one host and two pods, seen in one IP family: the
// client pod reaches the server pod through the host (FORWARD), the host
// itself (INPUT), and the host reaches the server (OUTPUT).
type env struct {
	f              ipfamily.Family
	topo           *kerneltest.Topology
	host           *kerneltest.Host
	client, server *kerneltest.Pod
	k              *kernel.Namespace
	hostAddr       netip.Addr // the host's underlay address
	clientAddr     netip.Addr
	serverAddr     netip.Addr
	vip            netip.Addr // a service address the host translates to the server
}

// at returns the address of the family of e among v4 and v6.
func (e *env) at(v4, v6 string) netip.Addr {
	if e.f == ipfamily.IPv6 {
		return netip.MustParseAddr(v6)
	}
	return netip.MustParseAddr(v4)
}

// net returns the single-address prefix of a.
func single(a netip.Addr) netip.Prefix { return netip.PrefixFrom(a, a.BitLen()) }

// probe is how a case checks the verdict.
type probe uint8

const (
	tcpForward  probe = iota // client → server:port, through FORWARD
	tcpOther                 // client → server:other
	tcpInput                 // client → host:port (INPUT)
	tcpOutput                // host → server:port (OUTPUT)
	tcpVIP                   // client → vip:vipPort (translated by the host)
	udpForward               // client → server:udpPort
	pingForward              // client pings server
)

// decl is what a case declares on one table: a role's rules at a hook, and
// chains.
type decl struct {
	role   string
	hook   netfilter.Hook
	rules  []netfilter.Rule
	chains []netfilter.Chain
	// countAt is the rule whose counter the case checks.
	countAt int
}

// setDef is a set a case uses: an ipset for iptables, an nft set (in the
// table of role) for nftables.
type setDef struct {
	role    string
	name    string
	ipset   string   // hash:ip, hash:net, hash:ip,port
	members []string // in ipset syntax
	nft     nftables.Set
}

// tcase is one case of the suite.
type tcase struct {
	name string
	// only runs the case in one family (0: both).
	only ipfamily.Family
	// sets and decls are what the case declares.
	sets  func(e *env) []setDef
	decls func(e *env) []decl
	probe probe
	want  func(e *env) outcome
	// count says what the counter of the first rule of the first decl
	// must show: that it matched the probe's packets, or none.
	count count
	// nftOnly: iptables refuses the case (ErrUnsupported).
	nftOnly bool
	// spend is the number of probes run, unjudged, before the judged one
	// (to use up a limit's tokens).
	spend int
}

// count is a case's expectation of its first rule's counter.
type count uint8

const (
	noCount    count = iota // not checked
	matched                 // counted packets
	notMatched              // counted none
)

func is(o outcome) func(*env) outcome { return func(*env) outcome { return o } }

// at builds a one-decl case's rules.
func filterAt(hook netfilter.Hook, rules ...netfilter.Rule) func(*env) []decl {
	return func(*env) []decl { return []decl{{role: "filter", hook: hook, rules: rules}} }
}

func rejectIf(ms ...netfilter.Match) netfilter.Rule {
	return netfilter.Rule{Matches: ms, Action: netfilter.Reject(netfilter.RejectPortUnreachable)}
}

var tcp = netfilter.Protocol(netfilter.ProtoTCP)

func cases() []tcase {
	fwd, in, out := netfilter.HookForward, netfilter.HookInput, netfilter.HookOutput
	pre, post := netfilter.HookPrerouting, netfilter.HookPostrouting
	dport := func(p uint16) netfilter.Match { return netfilter.DestPorts(netfilter.Port(p)) }
	return []tcase{
		{name: "src net matches", decls: func(e *env) []decl {
			return []decl{{role: "filter", hook: fwd, rules: []netfilter.Rule{rejectIf(netfilter.SourceNet(single(e.clientAddr)))}}}
		}, want: is(refused), count: matched},
		{name: "src net other", decls: func(e *env) []decl {
			return []decl{{role: "filter", hook: fwd, rules: []netfilter.Rule{rejectIf(netfilter.SourceNet(netip.PrefixFrom(e.at("192.0.2.0", "2001:db8::"), 24+8*int(e.f/ipfamily.IPv6))))}}}
		}, want: is(accepted), count: notMatched},
		{name: "dst prefix /24 and /60", decls: func(e *env) []decl {
			bits := 24
			if e.f == ipfamily.IPv6 {
				bits = 60
			}
			return []decl{{role: "filter", hook: fwd, rules: []netfilter.Rule{rejectIf(netfilter.DestNet(netip.PrefixFrom(e.serverAddr, bits).Masked()))}}}
		}, want: is(refused), count: matched},
		{name: "dst prefix unaligned /23 and /61", decls: func(e *env) []decl {
			bits := 23
			if e.f == ipfamily.IPv6 {
				bits = 61
			}
			return []decl{{role: "filter", hook: fwd, rules: []netfilter.Rule{rejectIf(netfilter.DestNet(netip.PrefixFrom(e.serverAddr, bits).Masked()))}}}
		}, want: is(refused), count: matched},
		{name: "negated dst net", decls: func(e *env) []decl {
			return []decl{{role: "filter", hook: fwd, rules: []netfilter.Rule{rejectIf(netfilter.Not(netfilter.DestNet(single(e.serverAddr))))}}}
		}, want: is(accepted), count: notMatched},
		{name: "src /0 matches all", decls: func(e *env) []decl {
			return []decl{{role: "filter", hook: fwd, rules: []netfilter.Rule{rejectIf(netfilter.SourceNet(netip.PrefixFrom(e.at("0.0.0.0", "::"), 0)))}}}
		}, want: is(refused), count: matched},
		{name: "protocol tcp", decls: filterAt(fwd, rejectIf(tcp)), want: is(refused), count: matched},
		{name: "protocol udp does not match tcp", decls: filterAt(fwd, rejectIf(netfilter.Protocol(netfilter.ProtoUDP))), want: is(accepted), count: notMatched},
		{name: "negated protocol", decls: filterAt(fwd, rejectIf(netfilter.Not(tcp))), want: is(accepted), count: notMatched},
		{name: "limit with tokens left", decls: filterAt(fwd, rejectIf(netfilter.Protocol(netfilter.ProtoUDP), netfilter.Limit(1, netfilter.PerHour, 2))), probe: udpForward, spend: 1, want: is(refused), count: matched},
		{name: "limit spent", decls: filterAt(fwd, rejectIf(netfilter.Protocol(netfilter.ProtoUDP), netfilter.Limit(1, netfilter.PerHour, 2))), probe: udpForward, spend: 2, want: is(accepted), count: notMatched},
		{name: "limit default burst spent", decls: filterAt(fwd, rejectIf(netfilter.Protocol(netfilter.ProtoUDP), netfilter.Limit(10, netfilter.PerMinute, 0))), probe: udpForward, spend: netfilter.DefaultLimitBurst, want: is(accepted), count: notMatched},
		{name: "protocol udp with udp", decls: filterAt(fwd, rejectIf(netfilter.Protocol(netfilter.ProtoUDP))), probe: udpForward, want: is(refused), count: matched},
		{name: "dport", decls: filterAt(fwd, rejectIf(tcp, dport(port))), want: is(refused), count: matched},
		{name: "dport other", decls: filterAt(fwd, rejectIf(tcp, dport(port))), probe: tcpOther, want: is(accepted), count: notMatched},
		{name: "dport range", decls: filterAt(fwd, rejectIf(tcp, netfilter.DestPorts(netfilter.Ports(port-5, port)))), want: is(refused), count: matched},
		{name: "negated dport range", decls: filterAt(fwd, rejectIf(tcp, netfilter.Not(netfilter.DestPorts(netfilter.Ports(port-5, port))))), want: is(accepted), count: notMatched},
		{name: "negated low range", decls: filterAt(fwd, rejectIf(tcp, netfilter.Not(netfilter.DestPorts(netfilter.Ports(0, 1023))))), want: is(refused), count: matched},
		{name: "dports several", decls: filterAt(fwd, rejectIf(tcp, netfilter.DestPorts(netfilter.Port(22), netfilter.Ports(port, port+1), netfilter.Port(9)))), want: is(refused), count: matched},
		{name: "dports several other", decls: filterAt(fwd, rejectIf(tcp, netfilter.DestPorts(netfilter.Port(22), netfilter.Ports(port+5, port+9)))), want: is(accepted), count: notMatched},
		{name: "negated dports several", decls: filterAt(fwd, rejectIf(tcp, netfilter.Not(netfilter.DestPorts(netfilter.Port(22), netfilter.Port(port))))), want: is(accepted), count: notMatched},
		{name: "sport ephemeral", decls: filterAt(fwd, rejectIf(tcp, netfilter.SourcePorts(netfilter.Ports(1024, 65535)))), want: is(refused), count: matched},
		{name: "sport privileged", decls: filterAt(fwd, rejectIf(tcp, netfilter.SourcePorts(netfilter.Ports(1, 1023)))), want: is(accepted), count: notMatched},
		{name: "input interface", decls: func(e *env) []decl {
			return []decl{{role: "filter", hook: fwd, rules: []netfilter.Rule{rejectIf(netfilter.InInterface(e.client.HostVeth))}}}
		}, want: is(refused), count: matched},
		{name: "input interface other", decls: func(e *env) []decl {
			return []decl{{role: "filter", hook: fwd, rules: []netfilter.Rule{rejectIf(netfilter.InInterface(e.server.HostVeth))}}}
		}, want: is(accepted), count: notMatched},
		{name: "interface wildcard", decls: filterAt(fwd, rejectIf(netfilter.InInterface("veth+"))), want: is(refused), count: matched},
		{name: "negated interface wildcard", decls: filterAt(fwd, rejectIf(netfilter.Not(netfilter.InInterface("veth+")))), want: is(accepted), count: notMatched},
		{name: "any interface", decls: filterAt(fwd, rejectIf(netfilter.OutInterface("+"))), want: is(refused), count: matched},
		{name: "output interface", decls: func(e *env) []decl {
			return []decl{{role: "filter", hook: fwd, rules: []netfilter.Rule{rejectIf(netfilter.OutInterface(e.server.HostVeth))}}}
		}, want: is(refused), count: matched},
		{name: "mark set in mangle, matched in filter", decls: func(*env) []decl {
			return []decl{
				{role: "filter", hook: fwd, rules: []netfilter.Rule{rejectIf(netfilter.Mark(0x100, 0xf00))}},
				{role: "mangle", hook: pre, rules: []netfilter.Rule{{Matches: []netfilter.Match{tcp}, Action: netfilter.SetMaskedMark(0x100, 0xf00)}}},
			}
		}, want: is(refused), count: matched},
		{name: "mark other", decls: func(*env) []decl {
			return []decl{
				{role: "filter", hook: fwd, rules: []netfilter.Rule{rejectIf(netfilter.Mark(0x200, 0xf00))}},
				{role: "mangle", hook: pre, rules: []netfilter.Rule{{Matches: []netfilter.Match{tcp}, Action: netfilter.SetMaskedMark(0x100, 0xf00)}}},
			}
		}, want: is(accepted), count: notMatched},
		{name: "whole mark and negated mark", decls: func(*env) []decl {
			return []decl{
				{role: "filter", hook: fwd, rules: []netfilter.Rule{rejectIf(netfilter.Not(netfilter.Mark(0x5, 0xffffffff)))}},
				{role: "mangle", hook: pre, rules: []netfilter.Rule{{Action: netfilter.SetMark(0x6)}}},
			}
		}, want: is(refused), count: matched},
		{name: "conntrack new", decls: filterAt(fwd, rejectIf(netfilter.ConntrackState(netfilter.CTStateNew))), want: is(refused), count: matched},
		// The client's SYN passes and its ACK does not: the error it gets
		// back breaks the connection.
		{name: "conntrack established only", decls: filterAt(fwd, rejectIf(netfilter.ConntrackState(netfilter.CTStateEstablished, netfilter.CTStateRelated))), want: is(refused), count: matched},
		{name: "negated conntrack", decls: filterAt(fwd, rejectIf(netfilter.Not(netfilter.ConntrackState(netfilter.CTStateNew)))), want: is(refused), count: matched},
		{name: "conntrack invalid", decls: filterAt(fwd, rejectIf(netfilter.ConntrackState(netfilter.CTStateInvalid))), want: is(accepted), count: noCount},
		{name: "set of addresses", sets: func(e *env) []setDef {
			return []setDef{{role: "filter", name: "np-clients", ipset: "hash:ip", members: []string{e.clientAddr.String()},
				nft: nftables.Set{Name: "np-clients", Key: []nftables.KeyType{nftables.TypeAddr}, Elements: []nftables.Element{nftables.Elem(nftables.Addr(e.clientAddr))}}}}
		}, decls: filterAt(fwd, rejectIf(netfilter.SourceIPSet("np-clients"))), want: is(refused), count: matched},
		{name: "set of addresses other side", sets: func(e *env) []setDef {
			return []setDef{{role: "filter", name: "np-clients", ipset: "hash:ip", members: []string{e.clientAddr.String()},
				nft: nftables.Set{Name: "np-clients", Key: []nftables.KeyType{nftables.TypeAddr}, Elements: []nftables.Element{nftables.Elem(nftables.Addr(e.clientAddr))}}}}
		}, decls: filterAt(fwd, rejectIf(netfilter.DestIPSet("np-clients"))), want: is(accepted), count: notMatched},
		{name: "set of networks", sets: func(e *env) []setDef {
			n := netip.PrefixFrom(e.clientAddr, 16).Masked()
			return []setDef{{role: "filter", name: "np-nets", ipset: "hash:net", members: []string{n.String()},
				nft: nftables.Set{Name: "np-nets", Key: []nftables.KeyType{nftables.TypeAddr}, Interval: true, Elements: []nftables.Element{nftables.Elem(nftables.Prefix(n))}}}}
		}, decls: filterAt(fwd, rejectIf(netfilter.SourceIPSet("np-nets"))), want: is(refused), count: matched},
		{name: "negated set", sets: func(e *env) []setDef {
			return []setDef{{role: "filter", name: "np-clients", ipset: "hash:ip", members: []string{e.clientAddr.String()},
				nft: nftables.Set{Name: "np-clients", Key: []nftables.KeyType{nftables.TypeAddr}, Elements: []nftables.Element{nftables.Elem(nftables.Addr(e.clientAddr))}}}}
		}, decls: filterAt(fwd, rejectIf(netfilter.Not(netfilter.SourceIPSet("np-clients")))), want: is(accepted), count: notMatched},
		{name: "set of address and port", sets: func(e *env) []setDef {
			member := e.serverAddr.String() + ",tcp:" + strconv.Itoa(port)
			return []setDef{{role: "filter", name: "np-svc", ipset: "hash:ip,port", members: []string{member},
				nft: nftables.Set{Name: "np-svc", Key: []nftables.KeyType{nftables.TypeAddr, nftables.TypeProto, nftables.TypePort},
					Elements: []nftables.Element{nftables.Elem(nftables.Addr(e.serverAddr), nftables.Proto(netfilter.ProtoTCP), nftables.Port(port))}}}}
		}, decls: filterAt(fwd, rejectIf(netfilter.IPSet("np-svc", netfilter.Dst, netfilter.Dst))), want: is(refused), count: matched},
		{name: "set of address and port, other port", sets: func(e *env) []setDef {
			member := e.serverAddr.String() + ",tcp:" + strconv.Itoa(port)
			return []setDef{{role: "filter", name: "np-svc", ipset: "hash:ip,port", members: []string{member},
				nft: nftables.Set{Name: "np-svc", Key: []nftables.KeyType{nftables.TypeAddr, nftables.TypeProto, nftables.TypePort},
					Elements: []nftables.Element{nftables.Elem(nftables.Addr(e.serverAddr), nftables.Proto(netfilter.ProtoTCP), nftables.Port(port))}}}}
		}, decls: filterAt(fwd, rejectIf(netfilter.IPSet("np-svc", netfilter.Dst, netfilter.Dst))), probe: tcpOther, want: is(accepted), count: notMatched},
		{name: "destination address type local", decls: filterAt(in, rejectIf(tcp, netfilter.DestAddrType(netfilter.AddrTypeLocal))), probe: tcpInput, want: is(refused), count: matched},
		{name: "destination address type not local", decls: filterAt(in, rejectIf(tcp, netfilter.Not(netfilter.DestAddrType(netfilter.AddrTypeLocal)))), probe: tcpInput, want: is(accepted), count: notMatched},
		// (UNICAST and MULTICAST are refused in IPv6 rules: ip6tables
		// reads them from the address's class, nftables from its route.)
		{name: "address types unicast or multicast", only: ipfamily.IPv4, decls: filterAt(in, rejectIf(tcp, netfilter.DestAddrType(netfilter.AddrTypeUnicast|netfilter.AddrTypeMulticast))), probe: tcpInput, want: is(accepted), count: notMatched},
		{name: "address types local limited to input", decls: filterAt(in, rejectIf(tcp, netfilter.MatchAddrType{Types: netfilter.AddrTypeLocal, Dir: netfilter.Dst, LimitIfaceIn: true})), probe: tcpInput, want: is(accepted), count: notMatched},
		{name: "source address type unicast", only: ipfamily.IPv4, decls: filterAt(fwd, rejectIf(netfilter.SourceAddrType(netfilter.AddrTypeUnicast))), want: is(refused), count: matched},
		{name: "icmp echo request", decls: func(e *env) []decl {
			m := netfilter.ICMPType(8)
			if e.f == ipfamily.IPv6 {
				m = netfilter.ICMPv6Type(128)
			}
			return []decl{{role: "filter", hook: fwd, rules: []netfilter.Rule{rejectIf(m)}}}
		}, probe: pingForward, want: is(failed), count: matched},
		{name: "icmp other type", decls: func(e *env) []decl {
			m := netfilter.ICMPType(13)
			if e.f == ipfamily.IPv6 {
				m = netfilter.ICMPv6Type(130)
			}
			return []decl{{role: "filter", hook: fwd, rules: []netfilter.Rule{rejectIf(m)}}}
		}, probe: pingForward, want: is(accepted), count: notMatched},
		{name: "icmp type and code", decls: func(e *env) []decl {
			m := netfilter.ICMPTypeCode(8, 0)
			if e.f == ipfamily.IPv6 {
				m = netfilter.ICMPv6TypeCode(128, 0)
			}
			return []decl{{role: "filter", hook: fwd, rules: []netfilter.Rule{rejectIf(m)}}}
		}, probe: pingForward, want: is(failed), count: matched},
		{name: "negated icmp type", decls: func(e *env) []decl {
			m := netfilter.ICMPType(8)
			if e.f == ipfamily.IPv6 {
				m = netfilter.ICMPv6Type(128)
			}
			return []decl{{role: "filter", hook: fwd, rules: []netfilter.Rule{rejectIf(netfilter.Not(m))}}}
		}, probe: pingForward, want: is(accepted), count: notMatched},
		{name: "icmp any type", only: ipfamily.IPv4, decls: filterAt(fwd, rejectIf(netfilter.ICMPType(255))), probe: pingForward, want: is(failed), count: matched},
		{name: "accept before reject", decls: filterAt(fwd, netfilter.Rule{Matches: []netfilter.Match{tcp, dport(port)}, Action: netfilter.Accept()}, rejectIf()), want: is(accepted), count: matched},
		{name: "accept before reject, other port", decls: filterAt(fwd, netfilter.Rule{Matches: []netfilter.Match{tcp, dport(port)}, Action: netfilter.Accept()}, rejectIf()), probe: tcpOther, want: is(refused), count: noCount},
		{name: "drop", decls: filterAt(fwd, netfilter.Rule{Matches: []netfilter.Match{tcp}, Action: netfilter.Drop()}), want: is(dropped), count: matched},
		{name: "reject with tcp reset", decls: filterAt(fwd, netfilter.Rule{Matches: []netfilter.Match{tcp}, Action: netfilter.Reject(netfilter.RejectTCPReset)}), want: is(refused), count: matched},
		{name: "reject admin prohibited", decls: filterAt(fwd, netfilter.Rule{Matches: []netfilter.Match{tcp}, Action: netfilter.Reject(netfilter.RejectAdminProhibited)}),
			want: func(e *env) outcome {
				if e.f == ipfamily.IPv6 {
					return unreachable(syscall.EACCES)
				}
				return unreachable(syscall.EHOSTUNREACH)
			}, count: matched},
		{name: "reject host unreachable", only: ipfamily.IPv4, decls: filterAt(fwd, netfilter.Rule{Matches: []netfilter.Match{tcp}, Action: netfilter.Reject(netfilter.RejectHostUnreachable)}),
			want: is(unreachable(syscall.EHOSTUNREACH)), count: matched},
		{name: "reject no route", only: ipfamily.IPv6, decls: filterAt(fwd, netfilter.Rule{Matches: []netfilter.Match{tcp}, Action: netfilter.Reject(netfilter.RejectNoRoute)}),
			want: is(unreachable(syscall.ENETUNREACH)), count: matched},
		{name: "reject at output", decls: filterAt(out, rejectIf(tcp, dport(port))), probe: tcpOutput, want: is(refused), count: matched},
		{name: "jump and return", decls: func(*env) []decl {
			return []decl{{role: "filter", hook: fwd, rules: []netfilter.Rule{{Matches: []netfilter.Match{tcp}, Action: netfilter.Jump("np-a")}, rejectIf()},
				chains: []netfilter.Chain{{Name: "np-a", Rules: []netfilter.Rule{{Matches: []netfilter.Match{tcp, dport(port)}, Action: netfilter.Return()}, {Action: netfilter.Accept()}}}}}}
		}, want: is(refused), count: matched},
		{name: "jump and accept", decls: func(*env) []decl {
			return []decl{{role: "filter", hook: fwd, rules: []netfilter.Rule{{Matches: []netfilter.Match{tcp}, Action: netfilter.Jump("np-a")}, rejectIf()},
				chains: []netfilter.Chain{{Name: "np-a", Rules: []netfilter.Rule{{Matches: []netfilter.Match{tcp, dport(port)}, Action: netfilter.Return()}, {Action: netfilter.Accept()}}}}}}
		}, probe: tcpOther, want: is(accepted), count: matched},
		{name: "goto skips the rest", decls: func(*env) []decl {
			return []decl{{role: "filter", hook: fwd, rules: []netfilter.Rule{{Matches: []netfilter.Match{tcp}, Action: netfilter.Goto("np-b")}, rejectIf()},
				chains: []netfilter.Chain{{Name: "np-b", Rules: []netfilter.Rule{{Action: netfilter.Return()}}}}}}
		}, want: is(accepted), count: matched},
		// A chain that OUTPUT reaches sees packets with no input interface
		// (and one INPUT reaches, none with an output one): "no interface
		// at all" matches none of them either.
		{name: "negated any input interface in a chain from OUTPUT", decls: func(*env) []decl {
			return []decl{{role: "filter", hook: out, rules: []netfilter.Rule{{Matches: []netfilter.Match{tcp}, Action: netfilter.Jump("np-a")}},
				chains: []netfilter.Chain{{Name: "np-a", Rules: []netfilter.Rule{rejectIf(netfilter.Not(netfilter.InInterface("+")))}}}}}
		}, probe: tcpOutput, want: is(accepted), count: matched},
		{name: "negated any output interface in a chain from INPUT", decls: func(*env) []decl {
			return []decl{{role: "filter", hook: in, rules: []netfilter.Rule{{Matches: []netfilter.Match{tcp}, Action: netfilter.Jump("np-a")}},
				chains: []netfilter.Chain{{Name: "np-a", Rules: []netfilter.Rule{rejectIf(netfilter.Not(netfilter.OutInterface("+")))}}}}}
		}, probe: tcpInput, want: is(accepted), count: matched},
		{name: "nested chains", decls: func(*env) []decl {
			return []decl{{role: "filter", hook: fwd, rules: []netfilter.Rule{{Action: netfilter.Jump("np-a")}},
				chains: []netfilter.Chain{
					{Name: "np-a", Rules: []netfilter.Rule{{Matches: []netfilter.Match{tcp}, Action: netfilter.Jump("np-b")}}},
					{Name: "np-b", Rules: []netfilter.Rule{rejectIf(tcp, dport(port))}},
				}}}
		}, want: is(refused), count: matched},
		{name: "log goes on", decls: filterAt(fwd, netfilter.Rule{Matches: []netfilter.Match{tcp}, Action: netfilter.ActionLog{Prefix: "np-test: ", Level: netfilter.LogLevelInfo}}, rejectIf(tcp)), want: is(refused), count: matched},
		{name: "nflog goes on", decls: filterAt(fwd, netfilter.Rule{Matches: []netfilter.Match{tcp}, Action: netfilter.ActionNFLOG{Group: 5, Prefix: "np", Size: 64}}, rejectIf(tcp)), want: is(refused), count: matched},
		{name: "comments do not change the verdict", decls: filterAt(fwd, netfilter.Rule{Matches: []netfilter.Match{tcp}, Action: netfilter.Reject(0), Comments: []string{"a comment", "another"}}), want: is(refused), count: matched},
		{name: "notrack in raw", decls: func(*env) []decl {
			return []decl{
				{role: "filter", hook: fwd, rules: []netfilter.Rule{rejectIf(netfilter.ConntrackState(netfilter.CTStateUntracked))}},
				{role: "raw", hook: pre, rules: []netfilter.Rule{{Matches: []netfilter.Match{tcp, dport(port)}, Action: netfilter.NoTrack()}}},
			}
		}, want: is(refused), count: matched},
		{name: "notrack other port", decls: func(*env) []decl {
			return []decl{
				{role: "filter", hook: fwd, rules: []netfilter.Rule{rejectIf(netfilter.ConntrackState(netfilter.CTStateUntracked))}},
				{role: "raw", hook: pre, rules: []netfilter.Rule{{Matches: []netfilter.Match{tcp, dport(port)}, Action: netfilter.NoTrack()}}},
			}
		}, probe: tcpOther, want: is(accepted), count: notMatched},
		{name: "dnat", decls: func(e *env) []decl {
			return []decl{{role: "nat", hook: pre, rules: []netfilter.Rule{{Matches: []netfilter.Match{netfilter.DestNet(single(e.vip)), tcp, dport(vipPort)},
				Action: netfilter.DNAT(netip.AddrPortFrom(e.serverAddr, port))}}}}
		}, probe: tcpVIP, want: func(e *env) outcome { return seen(e.clientAddr.String()) }, count: matched},
		{name: "dnat conntrack state", decls: func(e *env) []decl {
			return []decl{
				{role: "filter", hook: fwd, rules: []netfilter.Rule{rejectIf(netfilter.ConntrackState(netfilter.CTStateDNAT))}},
				{role: "nat", hook: pre, rules: []netfilter.Rule{{Matches: []netfilter.Match{netfilter.DestNet(single(e.vip)), tcp, dport(vipPort)},
					Action: netfilter.DNAT(netip.AddrPortFrom(e.serverAddr, port))}}},
			}
		}, probe: tcpVIP, want: is(refused), count: matched},
		{name: "masquerade", decls: func(e *env) []decl {
			return []decl{{role: "nat", hook: post, rules: []netfilter.Rule{{Matches: []netfilter.Match{netfilter.OutInterface(e.server.HostVeth)},
				Action: netfilter.ActionMasquerade{RandomFully: true}}}}}
		}, want: func(e *env) outcome { return seen(e.hostAddr.String()) }, count: matched},
		{name: "masquerade to ports", decls: func(e *env) []decl {
			return []decl{{role: "nat", hook: post, rules: []netfilter.Rule{{Matches: []netfilter.Match{tcp, netfilter.OutInterface(e.server.HostVeth)},
				Action: netfilter.ActionMasquerade{ToPorts: netfilter.Ports(20000, 20010)}}}}}
		}, want: func(e *env) outcome { return seen(e.hostAddr.String() + " ports 20000-20010") }, count: matched},
		{name: "snat", decls: func(e *env) []decl {
			to := e.at("192.0.2.7", "2001:db8::7")
			return []decl{{role: "nat", hook: post, rules: []netfilter.Rule{{Matches: []netfilter.Match{netfilter.SourceNet(single(e.clientAddr))}, Action: netfilter.SNAT(to)}}}}
		}, want: func(e *env) outcome { return seen(e.at("192.0.2.7", "2001:db8::7").String()) }, count: matched},
		{name: "verdict map", nftOnly: true, sets: func(e *env) []setDef {
			return []setDef{{role: "filter", name: "np-svc", nft: nftables.Set{Name: "np-svc", Key: []nftables.KeyType{nftables.TypeAddr, nftables.TypeProto, nftables.TypePort}, Verdict: true,
				Elements: []nftables.Element{{Key: []nftables.Value{nftables.Addr(e.serverAddr), nftables.Proto(netfilter.ProtoTCP), nftables.Port(port)}, Verdict: netfilter.Goto("np-rej")}}}}}
		}, decls: func(*env) []decl {
			return []decl{{role: "filter", hook: fwd, rules: []netfilter.Rule{{Action: netfilter.VerdictMap("np-svc", netfilter.Dst, netfilter.Dst)}},
				chains: []netfilter.Chain{{Name: "np-rej", Rules: []netfilter.Rule{rejectIf()}, ForceProgramming: true}}}}
		}, want: is(refused), count: matched},
		{name: "verdict map miss", nftOnly: true, sets: func(e *env) []setDef {
			return []setDef{{role: "filter", name: "np-svc", nft: nftables.Set{Name: "np-svc", Key: []nftables.KeyType{nftables.TypeAddr, nftables.TypeProto, nftables.TypePort}, Verdict: true,
				Elements: []nftables.Element{{Key: []nftables.Value{nftables.Addr(e.serverAddr), nftables.Proto(netfilter.ProtoTCP), nftables.Port(port)}, Verdict: netfilter.Goto("np-rej")}}}}}
		}, decls: func(*env) []decl {
			return []decl{{role: "filter", hook: fwd, rules: []netfilter.Rule{{Action: netfilter.VerdictMap("np-svc", netfilter.Dst, netfilter.Dst)}},
				chains: []netfilter.Chain{{Name: "np-rej", Rules: []netfilter.Rule{rejectIf()}, ForceProgramming: true}}}}
		}, probe: tcpOther, want: is(accepted), count: noCount},
	}
}

// backend makes the tables of one backend in the host namespace.
type backend struct {
	name string
	// table returns the backend's table of role, and a function that reads
	// the packet counts of its InsertRules rules at a hook.
	table    func(t *testing.T, e *env, role string) netfilter.Table
	counts   func(t *testing.T, e *env, tbl netfilter.Table, role string, hook netfilter.Hook) []uint64
	set      func(t *testing.T, e *env, tbl netfilter.Table, s setDef)
	clearSet func(t *testing.T, e *env, tbl netfilter.Table, s setDef)
	isNFT    bool
}

func iptBackend(b iptables.Backend) backend {
	tables := map[string]map[string]*iptables.Table{}
	var mu sync.Mutex
	return backend{
		name: "iptables-" + b.String(),
		table: func(t *testing.T, e *env, role string) netfilter.Table {
			mu.Lock()
			defer mu.Unlock()
			key := fmt.Sprint(e.f)
			if tables[key] == nil {
				tables[key] = map[string]*iptables.Table{}
			}
			if tbl := tables[key][role]; tbl != nil {
				return tbl
			}
			tbl, err := iptables.New(iptables.Options{Table: role, Family: e.f, Backend: b, ChainPrefix: "np-", Kernel: e.k, PostWriteRecheck: []time.Duration{}})
			require.NoError(t, err)
			tables[key][role] = tbl
			return tbl
		},
		counts: func(t *testing.T, e *env, _ netfilter.Table, role string, hook netfilter.Hook) []uint64 {
			out, err := e.k.Runner().Run(context.Background(), nil, b.SaveCommand(e.f), "-c", "-t", role)
			require.NoError(t, err)
			var counts []uint64
			re := regexp.MustCompile(`^\[(\d+):\d+\] -A ` + string(hook) + ` .*--comment "?np:`)
			sc := bufio.NewScanner(bytes.NewReader(out))
			for sc.Scan() {
				if m := re.FindStringSubmatch(sc.Text()); m != nil {
					n, _ := strconv.ParseUint(m[1], 10, 64)
					counts = append(counts, n)
				}
			}
			return counts
		},
		set: func(t *testing.T, e *env, _ netfilter.Table, s setDef) {
			family := "inet"
			if e.f == ipfamily.IPv6 {
				family = "inet6"
			}
			input := fmt.Sprintf("create %s %s family %s\n", s.name, s.ipset, family)
			for _, m := range s.members {
				input += fmt.Sprintf("add %s %s\n", s.name, m)
			}
			_, err := e.k.Runner().Run(context.Background(), strings.NewReader(input), "ipset", "restore")
			require.NoError(t, err)
		},
		clearSet: func(t *testing.T, e *env, _ netfilter.Table, s setDef) {
			_, err := e.k.Runner().Run(context.Background(), nil, "ipset", "destroy", s.name)
			require.NoError(t, err)
		},
	}
}

func nftBackend() backend {
	tables := map[string]map[string]*nftables.Table{}
	var mu sync.Mutex
	return backend{
		name:  "nftables",
		isNFT: true,
		table: func(t *testing.T, e *env, role string) netfilter.Table {
			mu.Lock()
			defer mu.Unlock()
			key := fmt.Sprint(e.f)
			if tables[key] == nil {
				tables[key] = map[string]*nftables.Table{}
			}
			if tbl := tables[key][role]; tbl != nil {
				return tbl
			}
			tbl, err := nftables.New(nftables.Options{Name: "np-" + role, Family: e.f, Role: nftables.Role(role), ChainPrefix: "np-",
				Kernel: e.k, Counters: true, PostWriteRecheck: []time.Duration{}})
			require.NoError(t, err)
			t.Cleanup(func() { tbl.Close() })
			tables[key][role] = tbl
			return tbl
		},
		counts: func(t *testing.T, e *env, tbl netfilter.Table, _ string, hook netfilter.Hook) []uint64 {
			cs, err := tbl.(*nftables.Table).Counters(context.Background())
			require.NoError(t, err)
			var out []uint64
			for _, c := range cs[nftables.BaseChain(hook)] {
				out = append(out, c.Packets)
			}
			return out
		},
		set: func(t *testing.T, _ *env, tbl netfilter.Table, s setDef) {
			require.NoError(t, tbl.(*nftables.Table).SetSets(s.nft))
		},
		clearSet: func(t *testing.T, _ *env, tbl netfilter.Table, s setDef) {
			require.NoError(t, tbl.(*nftables.Table).RemoveSets(s.name))
		},
	}
}

// TestKernelVerdictConformance runs every case of the suite on every
// backend, in both IP families, and checks that each gives the verdict the
// case expects — the same on every backend — and that the rule that
// decides counted the packets (or, for a rule that must not match, none).
func TestKernelVerdictConformance(t *testing.T) {
	kerneltest.RequireCommands(t, "iptables-legacy-save", "iptables-nft-save", "ip6tables-legacy-save", "ipset", "ping")
	backends := []backend{iptBackend(iptables.BackendLegacy), iptBackend(iptables.BackendNFT), nftBackend()}
	results := map[string]map[string]outcome{} // case/family → backend → outcome
	var mu sync.Mutex
	t.Run("backends", func(t *testing.T) {
		for _, b := range backends {
			t.Run(b.name, func(t *testing.T) {
				t.Parallel()
				topo := kerneltest.NewTopology(t, kerneltest.TopologyOptions{Hosts: 1, PodsPerHost: 2})
				host := topo.Hosts[0]
				k, err := kernel.Open(host.NS.Path())
				require.NoError(t, err)
				t.Cleanup(func() { k.Close() })
				startServers(t, host.NS, host.Pods[1].NS)
				for _, f := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
					e := newEnv(topo, k, f)
					for _, c := range cases() {
						if c.only != 0 && c.only != f {
							continue
						}
						got := runCase(t, b, e, c)
						if c.nftOnly && !b.isNFT {
							continue // refused as unsupported, as it must be
						}
						mu.Lock()
						key := c.name + " " + f.String()
						if results[key] == nil {
							results[key] = map[string]outcome{}
						}
						results[key][b.name] = got
						mu.Unlock()
					}
				}
			})
		}
	})
	for key, byBackend := range results {
		var first outcome
		for _, b := range backends {
			got, ok := byBackend[b.name]
			if !ok {
				continue
			}
			if first == "" {
				first = got
			}
			assert.Equal(t, first, got, "%s: %s gives a different verdict from %s", key, b.name, backends[0].name)
		}
	}
}

func newEnv(topo *kerneltest.Topology, k *kernel.Namespace, f ipfamily.Family) *env {
	host := topo.Hosts[0]
	e := &env{f: f, topo: topo, host: host, client: host.Pods[0], server: host.Pods[1], k: k}
	if f == ipfamily.IPv6 {
		e.hostAddr, e.clientAddr, e.serverAddr = host.UnderlayIPv6.Addr(), e.client.IPv6, e.server.IPv6
		e.vip = netip.MustParseAddr("fd00:99::1")
	} else {
		e.hostAddr, e.clientAddr, e.serverAddr = host.UnderlayIPv4.Addr(), e.client.IPv4, e.server.IPv4
		e.vip = netip.MustParseAddr("10.99.0.1")
	}
	return e
}

// runCase declares a case on a backend, probes, checks the outcome and
// the counters, removes what it declared and returns the outcome.
func runCase(t *testing.T, b backend, e *env, c tcase) outcome {
	t.Helper()
	name := fmt.Sprintf("%s/%s/%v", b.name, c.name, e.f)
	ctx := context.Background()
	var sets []setDef
	if c.sets != nil {
		sets = c.sets(e)
	}
	decls := c.decls(e)
	tables := map[string]netfilter.Table{}
	for i, d := range decls {
		tables[d.role] = b.table(t, e, d.role)
		if d.role == "filter" && d.hook == netfilter.HookForward {
			// The server's answers pass: the rules are about what the client
			// sends.
			decls[i].rules = append([]netfilter.Rule{{Matches: []netfilter.Match{netfilter.InInterface(e.server.HostVeth)}, Action: netfilter.Accept()}}, d.rules...)
			decls[i].countAt = 1
		}
	}
	defer func() {
		// Undeclare in the order references allow: the rules at the hooks,
		// the sets they use, then the chains (which map elements may have
		// jumped to); ipsets go once no rule uses them.
		for _, d := range decls {
			require.NoError(t, tables[d.role].InsertRules("test", d.hook, nil), name)
		}
		for _, s := range sets {
			if b.isNFT {
				b.clearSet(t, e, b.table(t, e, s.role), s)
			}
		}
		for _, d := range decls {
			var names []string
			for _, ch := range d.chains {
				names = append(names, ch.Name)
			}
			require.NoError(t, tables[d.role].RemoveChains(names...), name)
		}
		for _, tbl := range tables {
			_, err := tbl.Apply(ctx)
			require.NoError(t, err, name)
		}
		for _, s := range sets {
			if !b.isNFT && s.ipset != "" {
				b.clearSet(t, e, nil, s)
			}
		}
		_, _ = e.k.DeleteConntrack(ctx, e.f, []netip.Addr{e.clientAddr, e.serverAddr, e.hostAddr, e.vip})
	}()
	for _, s := range sets {
		if b.isNFT || s.ipset != "" {
			b.set(t, e, b.table(t, e, s.role), s)
		}
	}
	for _, d := range decls {
		tbl := tables[d.role]
		err := tbl.SetChains(d.chains...)
		if err == nil {
			err = tbl.InsertRules("test", d.hook, d.rules)
		}
		if c.nftOnly && !b.isNFT {
			require.ErrorIs(t, err, netfilter.ErrUnsupported, name)
			return "unsupported"
		}
		require.NoError(t, err, name)
	}
	for _, tbl := range tables {
		_, err := tbl.Apply(ctx)
		require.NoError(t, err, name)
	}
	want := c.want(e)
	for range c.spend {
		assert.Equal(t, refused, doProbe(t, e, c.probe, false), "%s: a probe spending a token", name)
	}
	// The counters are read before and after the probe, and only the
	// probe's packets (the difference) are judged. On a busy machine a
	// stray packet (a late retransmission of an earlier connection) now and
	// then reaches a rule that must not match while the probe runs: such a
	// probe is run again, up to three times; a rule that matches the probe
	// itself matches every time and still fails.
	d := decls[0]
	var got outcome
	for attempt := 1; ; attempt++ {
		var before []uint64
		if c.count != noCount {
			before = b.counts(t, e, tables[d.role], d.role, d.hook)
		}
		got = doProbe(t, e, c.probe, want == dropped)
		if c.count == noCount {
			break
		}
		counts := b.counts(t, e, tables[d.role], d.role, d.hook)
		require.NotEmpty(t, counts, "%s: no counters", name)
		require.Greater(t, len(counts), d.countAt, "%s: counters %v", name, counts)
		require.Equal(t, len(before), len(counts), "%s: counters %v, then %v", name, before, counts)
		probed := counts[d.countAt] - before[d.countAt]
		if c.count == notMatched && probed != 0 && attempt < 3 {
			t.Logf("%s: the rule counted %d packets during probe %d (counters %v, then %v); probing again", name, probed, attempt, before, counts)
			continue
		}
		if c.count == notMatched {
			assert.Zero(t, probed, "%s: the rule must not match (counters %v, then %v)", name, before, counts)
		} else {
			assert.NotZero(t, probed, "%s: the rule that decides counted nothing (counters %v, then %v)", name, before, counts)
		}
		break
	}
	assert.Equal(t, want, got, name)
	return got
}

// doProbe runs a probe and classifies what it saw.
func doProbe(t *testing.T, e *env, p probe, expectDrop bool) outcome {
	t.Helper()
	timeout := 10 * time.Second
	if expectDrop {
		timeout = 1500 * time.Millisecond // a drop looks the same after any wait
	}
	switch p {
	case pingForward:
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if err := e.client.NS.Ping(ctx, e.serverAddr); err != nil {
			require.ErrorIs(t, err, kerneltest.ErrUnreachable)
			return failed
		}
		return accepted
	case udpForward:
		return classify(dialUDP(e.client.NS, netip.AddrPortFrom(e.serverAddr, udpPort), timeout))
	}
	from, to := e.client.NS, netip.AddrPortFrom(e.serverAddr, port)
	switch p {
	case tcpOther:
		to = netip.AddrPortFrom(e.serverAddr, other)
	case tcpInput:
		to = netip.AddrPortFrom(e.hostAddr, port)
	case tcpOutput:
		from = e.host.NS
	case tcpVIP:
		to = netip.AddrPortFrom(e.vip, vipPort)
	}
	src, err := dialTCP(from, to, timeout)
	o := classify(src, err)
	if o != accepted {
		return o
	}
	switch {
	case p == tcpVIP || src.Addr() != e.clientAddr && p != tcpOutput:
		if src.Port() >= 20000 && src.Port() <= 20010 {
			return seen(src.Addr().String() + " ports 20000-20010")
		}
		return seen(src.Addr().String())
	}
	return accepted
}

// classify names what a probe saw: the source the server saw (nil error)
// or the error.
func classify(src netip.AddrPort, err error) outcome {
	var ne net.Error
	switch {
	case err == nil:
		return accepted
	case errors.Is(err, syscall.ECONNREFUSED):
		return refused
	case errors.Is(err, os.ErrDeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return dropped
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return unreachable(errno)
	}
	return outcome("error: " + err.Error())
}

// dialTCP connects from a namespace and returns the source address the
// server saw.
func dialTCP(from *kerneltest.NS, to netip.AddrPort, timeout time.Duration) (netip.AddrPort, error) {
	var conn net.Conn
	err := from.Do(func() (err error) {
		d := net.Dialer{Timeout: timeout}
		conn, err = d.Dial("tcp", to.String())
		return err
	})
	if err != nil {
		return netip.AddrPort{}, err
	}
	// Close with a reset: a closing handshake would leave the client
	// sending (and retransmitting) its FIN and ACKs to this port after the
	// probe, where the next case's rules would count them.
	_ = conn.(*net.TCPConn).SetLinger(0)
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	b, err := io.ReadAll(conn)
	if err != nil {
		return netip.AddrPort{}, err
	}
	return netip.ParseAddrPort(strings.TrimSpace(string(b)))
}

// dialUDP sends a datagram from a namespace and returns the source address
// the server saw.
func dialUDP(from *kerneltest.NS, to netip.AddrPort, timeout time.Duration) (netip.AddrPort, error) {
	var conn net.Conn
	err := from.Do(func() (err error) {
		conn, err = net.Dial("udp", to.String())
		return err
	})
	if err != nil {
		return netip.AddrPort{}, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	if _, err := conn.Write([]byte("hello")); err != nil {
		return netip.AddrPort{}, err
	}
	b := make([]byte, 256)
	n, err := conn.Read(b)
	if err != nil {
		return netip.AddrPort{}, err
	}
	return netip.ParseAddrPort(strings.TrimSpace(string(b[:n])))
}

// startServers starts, in the server pod, TCP servers on port and other and
// a UDP server on udpPort, and in the host a TCP server on port, each
// answering with the source address it saw.
func startServers(t *testing.T, host, server *kerneltest.NS) {
	t.Helper()
	for _, s := range []struct {
		ns    *kerneltest.NS
		ports []int
	}{{server, []int{port, other}}, {host, []int{port}}} {
		for _, p := range s.ports {
			var ln net.Listener
			require.NoError(t, s.ns.Do(func() (err error) {
				ln, err = net.Listen("tcp", fmt.Sprintf("[::]:%d", p))
				return err
			}))
			t.Cleanup(func() { ln.Close() })
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					_, _ = c.Write([]byte(netip.MustParseAddrPort(c.RemoteAddr().String()).String() + "\n"))
					c.Close()
				}
			}()
		}
	}
	var pc net.PacketConn
	require.NoError(t, server.Do(func() (err error) {
		pc, err = net.ListenPacket("udp", fmt.Sprintf("[::]:%d", udpPort))
		return err
	}))
	t.Cleanup(func() { pc.Close() })
	go func() {
		b := make([]byte, 256)
		for {
			_, from, err := pc.ReadFrom(b)
			if err != nil {
				return
			}
			a := netip.MustParseAddrPort(from.String())
			_, _ = pc.WriteTo([]byte(netip.AddrPortFrom(a.Addr().Unmap(), a.Port()).String()+"\n"), from)
		}
	}()
}
