package iptables

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/netfilter"
)

// rmFuzzBytes hands out fuzz input piece by piece; past the end it gives
// zeros.
type rmFuzzBytes struct{ b []byte }

func (f *rmFuzzBytes) byte() byte {
	if len(f.b) == 0 {
		return 0
	}
	c := f.b[0]
	f.b = f.b[1:]
	return c
}

func (f *rmFuzzBytes) bool() bool               { return f.byte()&1 == 1 }
func (f *rmFuzzBytes) u16() uint16              { return uint16(f.byte())<<8 | uint16(f.byte()) }
func (f *rmFuzzBytes) u32() uint32              { return uint32(f.u16())<<16 | uint32(f.u16()) }
func (f *rmFuzzBytes) dir() netfilter.Direction { return netfilter.Direction(f.byte() % 4) }
func (f *rmFuzzBytes) port() netfilter.PortRange {
	return netfilter.PortRange{First: f.u16(), Last: f.u16()}
}

// str returns a short string of arbitrary bytes (often invalid for the
// field it goes to).
func (f *rmFuzzBytes) str() string {
	n := int(f.byte() % 40)
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteByte(f.byte())
	}
	return b.String()
}

// name returns a plausible name, sometimes with a stray character.
func (f *rmFuzzBytes) name() string {
	const chars = "abcXYZ-_+.019 /\"é"
	n := int(f.byte() % 34)
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteByte(chars[int(f.byte())%len(chars)])
	}
	return b.String()
}

func (f *rmFuzzBytes) addr() netip.Addr {
	switch f.byte() % 4 {
	case 0:
		return netip.AddrFrom4([4]byte{f.byte(), f.byte(), f.byte(), f.byte()})
	case 1:
		var a [16]byte
		for i := range a {
			a[i] = f.byte()
		}
		return netip.AddrFrom16(a)
	case 2:
		return netip.Addr{}
	}
	return netip.MustParseAddr("fe80::1%eth0")
}

func (f *rmFuzzBytes) criterion() netfilter.Match {
	switch f.byte() % 12 {
	case 0:
		return netfilter.MatchNet{Prefix: netip.PrefixFrom(f.addr(), int(f.byte()%140)), Dir: f.dir(), Negate: f.bool()}
	case 1:
		return netfilter.MatchProto{Proto: netfilter.Proto(f.byte()), Negate: f.bool()}
	case 2:
		return netfilter.MatchProto{Proto: []netfilter.Proto{netfilter.ProtoTCP, netfilter.ProtoUDP, netfilter.ProtoSCTP, netfilter.ProtoICMP, netfilter.ProtoICMPv6}[f.byte()%5]}
	case 3:
		ranges := make([]netfilter.PortRange, f.byte()%18)
		for i := range ranges {
			ranges[i] = f.port()
		}
		return netfilter.MatchPorts{Dir: f.dir(), Ranges: ranges, Negate: f.bool()}
	case 4:
		return netfilter.MatchIface{Name: f.name(), Out: f.bool(), Negate: f.bool()}
	case 5:
		return netfilter.MatchMark{Mark: f.u32(), Mask: f.u32(), Negate: f.bool()}
	case 6:
		dims := make([]netfilter.Direction, f.byte()%8)
		for i := range dims {
			dims[i] = f.dir()
		}
		return netfilter.MatchSet{Name: f.name(), Dims: dims, Negate: f.bool()}
	case 7:
		return netfilter.MatchConntrack{States: netfilter.CTState(f.u16()), Negate: f.bool()}
	case 8:
		return netfilter.MatchAddrType{Types: netfilter.AddrType(f.u16()), Dir: f.dir(), Negate: f.bool(), LimitIfaceIn: f.bool(), LimitIfaceOut: f.bool()}
	case 9:
		return netfilter.MatchICMP{Family: ipfamily.Family(f.byte() % 8), Type: f.byte(), Code: f.byte(), HasCode: f.bool(), Negate: f.bool()}
	case 10:
		var p *netfilter.MatchNet
		if f.bool() {
			p = &netfilter.MatchNet{Prefix: netip.PrefixFrom(f.addr(), int(f.byte()%140)), Dir: f.dir()}
		}
		return p
	}
	return nil
}

func (f *rmFuzzBytes) action() netfilter.Action {
	switch f.byte() % 15 {
	case 0:
		return netfilter.Accept()
	case 1:
		return netfilter.Drop()
	case 2:
		return netfilter.Return()
	case 3:
		return netfilter.Reject(netfilter.RejectWith(f.byte() % 16))
	case 4:
		return netfilter.Jump(f.name())
	case 5:
		return netfilter.Goto(f.name())
	case 6:
		return netfilter.ActionSetMark{Mark: f.u32(), Mask: f.u32()}
	case 7:
		return netfilter.ActionMasquerade{RandomFully: f.bool(), ToPorts: f.port()}
	case 8:
		return netfilter.ActionSNAT{To: f.addr(), RandomFully: f.bool(), Ports: f.port()}
	case 9:
		return netfilter.ActionDNAT{To: f.addr(), Ports: f.port()}
	case 10:
		return netfilter.ActionLog{Prefix: f.str(), Level: netfilter.LogLevel(f.byte() % 12)}
	case 11:
		return netfilter.NoTrack()
	case 12:
		return netfilter.ActionNFLOG{Group: f.u16(), Prefix: f.str(), Size: f.u32()}
	case 13:
		var p *netfilter.ActionGoto
		if f.bool() {
			p = &netfilter.ActionGoto{Chain: f.name()}
		}
		return p
	}
	return nil
}

// rmFuzzRule builds a rule of up to 7 criteria and 2 comments from data.
func rmFuzzRule(data []byte) (netfilter.Rule, ipfamily.Family) {
	f := &rmFuzzBytes{b: data}
	v := ipfamily.Family(f.byte() % 8)
	if f.byte()%4 != 0 {
		v = []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6}[f.byte()%2]
	}
	var r netfilter.Rule
	for n := f.byte() % 8; n > 0; n-- {
		r.Matches = append(r.Matches, f.criterion())
	}
	r.Action = f.action()
	for n := f.byte() % 3; n > 0; n-- {
		r.Comments = append(r.Comments, f.str())
	}
	return r, v
}

func FuzzRuleArgs(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{1, 1, 0, 2, 2, 0, 3, 1, 2, 0, 80, 0, 80, 0})
	f.Add([]byte{1, 1, 1, 3, 0, 1, 10, 0, 0, 1, 24, 1, 9, 1, 8, 9, 3, 1})
	f.Add([]byte("\x01\x01\x00\x05\x05\x00\x00\x00\x01\x00\x00\x00\x03\x06\x04hello\x06\x00\x00\x00\x01\xff\xff\xff\xff"))
	f.Add([]byte("\x00\x03\x01\x06\x12np:abc\x01\x02\x0c\x06\x09\x01\x10\x0a\x07prefix "))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, v := rmFuzzRule(data)
		args, err := RuleArgs(r, v)
		again, err2 := RuleArgs(r, v)
		assert.Equal(t, args, again, "deterministic")
		assert.Equal(t, err, err2, "deterministic")
		if err != nil {
			require.ErrorIs(t, err, netfilter.ErrInvalidRule)
			require.Nil(t, args)
			return
		}
		require.NotEmpty(t, args)
		for _, a := range args {
			require.NotContains(t, a, "\n")
			require.NotContains(t, a, "\"")
		}
		// The action comes last: where it renders alone, the rule ends
		// with that rendering.
		if alone, err := RuleArgs(netfilter.Rule{Action: r.Action}, v); err == nil {
			require.Equal(t, alone, args[len(args)-len(alone):])
		}
		require.NoError(t, r.Validate(v))
	})
}
