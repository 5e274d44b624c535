package fib_test

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/nodeplane/nodeplane/internal/fib"
	"github.com/nodeplane/nodeplane/kernel"
)

func rule(prio uint32, mod func(r *kernel.Rule)) kernel.Rule {
	r := kernel.Rule{Family: kernel.IPv4, Priority: prio, Action: kernel.RuleLookup, Table: 9}
	if mod != nil {
		mod(&r)
	}
	return fib.Stored(r)
}

// A rule blocks its own re-add and its own delete matches it, whatever it
// holds.
func TestRuleMatchesItself(t *testing.T) {
	for name, r := range map[string]kernel.Rule{
		"lookup":    rule(10, nil),
		"goto":      rule(10, func(r *kernel.Rule) { r.Action, r.Table, r.Goto = kernel.RuleGoto, 0, 20 }),
		"blackhole": rule(10, func(r *kernel.Rule) { r.Action, r.Table = kernel.RuleBlackhole, 0 }),
		"mark":      rule(10, func(r *kernel.Rule) { r.Mark = 0x10 }),
		"everything": rule(10, func(r *kernel.Rule) {
			r.Src, r.Dst = netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("10.1.0.0/16")
			r.IIF, r.OIF, r.Invert, r.Protocol, r.TOS, r.Realm, r.TunID = "a", "b", true, 9, 4, 7, 8
			r.IPProto, r.SrcPorts, r.DstPorts = 6, kernel.PortRange{Start: 1, End: 2}, kernel.PortRange{Start: 3, End: 4}
			r.UID = kernel.UIDRange{Start: 5, End: 6, Set: true}
			r.SuppressPrefixLen, r.SuppressIfGroup = kernel.Suppressor{Value: 0, Set: true}, kernel.Suppressor{Value: 2, Set: true}
		}),
	} {
		assert.True(t, fib.Exists(&r, &r), name)
		assert.True(t, fib.DeleteMatches(&r, &r), name)
	}
}

// An unset source, destination, TOS or realm in a request matches any;
// invert and the goto target are never compared.
func TestWildcards(t *testing.T) {
	narrow := rule(5, func(r *kernel.Rule) { r.Src = netip.MustParsePrefix("10.0.0.0/8") })
	wide := rule(5, nil)
	assert.True(t, fib.Exists(&wide, &narrow), "a catch-all request matches the narrower rule")
	assert.False(t, fib.Exists(&narrow, &wide))
	assert.True(t, fib.DeleteMatches(&wide, &narrow))
	assert.False(t, fib.DeleteMatches(&narrow, &wide))
	inverted := narrow
	inverted.Invert = true
	assert.True(t, fib.Exists(&narrow, &inverted), "invert is not compared")
	g1 := rule(5, func(r *kernel.Rule) { r.Action, r.Table, r.Goto = kernel.RuleGoto, 0, 20 })
	g2 := rule(5, func(r *kernel.Rule) { r.Action, r.Table, r.Goto = kernel.RuleGoto, 0, 30 })
	assert.True(t, fib.Exists(&g1, &g2), "the goto target is not compared")
	assert.True(t, fib.DeleteMatches(&g1, &g2))

	// A delete's unset fields match anything; a suppressor set to 0 is a
	// real selector.
	any := kernel.Rule{Family: kernel.IPv4}
	assert.True(t, fib.DeleteMatches(&any, &narrow))
	supp := rule(5, func(r *kernel.Rule) { r.SuppressPrefixLen = kernel.Suppressor{Set: true} })
	assert.False(t, fib.DeleteMatches(&supp, &wide))
	assert.True(t, fib.DeleteMatches(&wide, &supp))
	assert.False(t, fib.Exists(&wide, &supp), "an add compares the suppressors")
	v6 := wide
	v6.Family = kernel.IPv6
	assert.False(t, fib.DeleteMatches(&v6, &wide), "families never match")
}

func TestStored(t *testing.T) {
	r := fib.Stored(kernel.Rule{Mark: 4, Goto: 7, Action: kernel.RuleLookup})
	assert.Equal(t, uint32(0xffffffff), r.Mask, "a mark gets the full mask")
	assert.Zero(t, r.Goto, "only a goto rule has a target")
	r = fib.Stored(kernel.Rule{Mask: 4, Goto: 7, Action: kernel.RuleGoto})
	assert.Equal(t, uint32(4), r.Mask)
	assert.Equal(t, uint32(7), r.Goto)
}

func TestInsertAndDefaults(t *testing.T) {
	list := fib.Defaults(kernel.IPv4)
	assert.Len(t, list, 3)
	assert.Len(t, fib.Defaults(kernel.IPv6), 2)
	assert.Equal(t, uint32(32765), fib.DefaultPriority(list))
	assert.Zero(t, fib.DefaultPriority(list[:1]))
	list = fib.Insert(list, rule(0, func(r *kernel.Rule) { r.Table = 5 }))
	list = fib.Insert(list, rule(100, nil))
	list = fib.Insert(list, rule(40000, nil))
	var prios []uint32
	var tables []uint32
	for _, r := range list {
		prios = append(prios, r.Priority)
		tables = append(tables, r.Table)
	}
	assert.Equal(t, []uint32{0, 0, 100, 32766, 32767, 40000}, prios)
	assert.Equal(t, []uint32{kernel.TableLocal, 5, 9, kernel.TableMain, kernel.TableDefault, 9}, tables, "after the rules of its priority")
}
