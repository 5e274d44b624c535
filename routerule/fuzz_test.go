package routerule_test

import (
	"context"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/routerule"
)

// prefixFrom builds a prefix from fuzz bytes: 4 bytes IPv4, 16 bytes IPv6,
// anything else unset; bits are taken as given (possibly invalid).
func prefixFrom(b []byte, bits uint8) netip.Prefix {
	a, ok := netip.AddrFromSlice(b)
	if !ok {
		return netip.Prefix{}
	}
	return netip.PrefixFrom(a, int(bits))
}

// FuzzRule feeds arbitrary rules through validation, String, SetRule and
// Apply on a fake namespace: nothing may panic, and a rule that SetRule
// accepts must end up in the kernel exactly once, in canonical form, with a
// second Apply doing no I/O.
func FuzzRule(f *testing.F) {
	f.Add(uint32(100), []byte{10, 1, 2, 3}, uint8(16), []byte{}, uint8(0), uint32(0), uint32(0), false, "", "", uint8(0), uint32(100))
	f.Add(uint32(5), []byte{}, uint8(0), make([]byte, 16), uint8(64), uint32(1), uint32(1), true, "eth0", "lo", uint8(1), uint32(9))
	f.Add(uint32(7), []byte{}, uint8(0), []byte{}, uint8(0), uint32(0), uint32(4), false, "a/b", "", uint8(2), uint32(0))
	f.Fuzz(func(t *testing.T, prio uint32, src []byte, srcBits uint8, dst []byte, dstBits uint8,
		mark, mask uint32, invert bool, iif, oif string, kind uint8, arg uint32) {
		rule := routerule.Rule{
			Priority: prio, Src: prefixFrom(src, srcBits), Dst: prefixFrom(dst, dstBits),
			Mark: mark, Mask: mask, Invert: invert, IIF: iif, OIF: oif,
		}
		switch kind % 4 {
		case 0:
			rule.Action = routerule.ActionLookup{Table: arg}
		case 1:
			rule.Action = routerule.ActionGoto{Priority: arg}
		case 2:
			rule.Action = routerule.ActionBlackhole{}
		}
		_ = rule.String()
		verr := rule.Validate()

		fam := routerule.IPv4
		if rule.Src.Addr().Is6() || rule.Dst.Addr().Is6() {
			fam = routerule.IPv6
		}
		k := kernelfake.New(kernelfake.Options{})
		r, err := routerule.New(routerule.Options{Family: fam, Kernel: k, Priorities: []uint32{max(prio, 1)}, Tables: []uint32{max(arg, 1)}})
		require.NoError(t, err)
		if err := r.SetRule(rule); err != nil {
			require.ErrorIs(t, err, routerule.ErrInvalidRule)
			return
		}
		require.NoError(t, verr, "SetRule accepted a rule Validate refuses")
		_, err = r.Apply(context.Background())
		require.NoError(t, err)
		desired := r.Desired()
		require.Len(t, desired, 1)
		var got []string
		rules, err := k.Admin().Rules(context.Background(), fam)
		require.NoError(t, err)
		for _, kr := range rules {
			if kr.Priority == prio && kr.Protocol != kernel.ProtoKernel {
				got = append(got, fmtKernel(kr))
			}
		}
		assert.Equal(t, []string{fmtRule(desired[0])}, got)
		k.ResetCounts()
		_, err = r.Apply(context.Background())
		require.NoError(t, err)
		assert.Zero(t, k.Calls(kernelfake.OpRules)+k.Writes())
	})
}
