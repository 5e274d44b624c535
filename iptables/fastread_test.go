//go:build linux

package iptables

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/ipfamily"
)

// TestOurHash checks which comments are hash comments of ours.
func TestOurHash(t *testing.T) {
	p := &saveParser{table: "filter", chainPrefix: "np-", hashPrefix: "np:"}
	h := "Ab3_-0123456789z"
	tests := []struct {
		comment string
		want    string
	}{
		{"np:" + h, h},
		{"np:" + h + "x", ""},
		{"np:" + h[:15], ""},
		{"np:" + h[:15] + "!", ""},
		{"xp:" + h, ""},
		{"", ""},
		{"np:", ""},
	}
	for _, tt := range tests {
		got := p.ourHash([]byte(tt.comment))
		assert.Equal(t, tt.want, string(got), tt.comment)
		assert.Equal(t, tt.want == "", got == nil, tt.comment)
	}
}

// TestFromChains checks the picture built from an in-process read: owned
// and built-in chains, hashes, foreign references, and no texts.
func TestFromChains(t *testing.T) {
	p := &saveParser{table: "filter", chainPrefix: "np-", hashPrefix: "np:"}
	h1, h2 := []byte("AAAAAAAAAAAAAAAA"), []byte("BBBBBBBBBBBBBBBB")
	tests := []struct {
		name  string
		in    []fastChain
		refs  map[string]int
		rules map[string]int
	}{
		{"empty", nil, map[string]int{}, map[string]int{"INPUT": 0, "FORWARD": 0, "OUTPUT": 0}},
		{"ours in a built-in chain", []fastChain{{name: "FORWARD", rules: []fastRule{{hash: h1, target: "np-a"}, {target: "np-a"}}}, {name: "np-a"}},
			map[string]int{"np-a": 1}, map[string]int{"FORWARD": 2, "np-a": 0}},
		{"foreign chains count, ours do not", []fastChain{{name: "KUBE", rules: []fastRule{{target: "np-a"}, {hash: h2, target: "np-a"}, {target: "np-gone"}}}, {name: "np-a", rules: []fastRule{{target: "np-a"}}}},
			map[string]int{"np-a": 1}, map[string]int{"np-a": 1, "FORWARD": 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kt := p.fromChains(tt.in)
			assert.NotContains(t, kt.chains, "KUBE")
			for name, n := range tt.rules {
				require.Contains(t, kt.chains, name)
				assert.Equal(t, n, kt.chains[name].rules(), name)
				assert.Equal(t, tt.refs[name], kt.chains[name].foreignRefs, name)
			}
			for _, name := range tableChains["filter"] {
				kc := kt.chains[name]
				assert.Equal(t, make([]string, kc.rules()), append([]string{}, kc.texts...), "no texts in %s", name)
			}
		})
	}
}

// TestParseEntriesBadInput feeds truncated and random blobs to the legacy
// entry parser: errors, never a panic.
func TestParseEntriesBadInput(t *testing.T) {
	p := &saveParser{table: "filter", chainPrefix: "np-", hashPrefix: "np:"}
	info := make([]byte, xtGetInfoSize)
	binary.NativeEndian.PutUint32(info[32:], 0x1f)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, v := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
		for i := range 2000 {
			blob := make([]byte, rng.IntN(600))
			for j := range blob {
				blob[j] = byte(rng.IntN(256))
			}
			if i%2 == 0 && len(blob) > ip6tEntrySize {
				// Plausible offsets, so that the parser goes deeper.
				to := ip6tTargetOffset
				if v == ipfamily.IPv4 {
					to = iptTargetOffset
				}
				binary.NativeEndian.PutUint16(blob[to:], uint16(rng.IntN(len(blob))))
				binary.NativeEndian.PutUint16(blob[to+2:], uint16(rng.IntN(len(blob)+1)))
			}
			assert.NotPanics(t, func() { _, _ = parseEntries(info, blob, v, p) })
		}
		_, err := parseEntries(info, make([]byte, 10), v, p)
		assert.Error(t, err, "truncated")
	}
}
