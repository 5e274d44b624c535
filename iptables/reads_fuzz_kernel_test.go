//go:build linux

package iptables

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/ipfamily"
)

// readsFuzzHash is a hash the fuzzed rules copy, as another writer could.
const readsFuzzHash = "np:AAAAAAAAAAAAAAAA"

// readsFuzzComments are hostile comments: our hash comment alone, inside
// longer text, quoted; quotes, backslashes, " -j " and "-g" with an owned
// chain, newlines that make up rules, carriage returns, tabs, unicode,
// invalid UTF-8, control bytes, 255 and 256 characters.
var readsFuzzComments = []string{
	"plain",
	readsFuzzHash,
	"see --comment " + readsFuzzHash + " here",
	`"` + readsFuzzHash + `"`,
	readsFuzzHash + " ",
	" " + readsFuzzHash,
	"-m comment --comment " + readsFuzzHash,
	`q"uo\te's`,
	`\`,
	`\"`,
	`"`,
	`""`,
	"",
	" ",
	"x -j np-a",
	" -j np-b",
	"-j",
	"-g",
	"-j np-a",
	"--comment",
	"-m",
	"é ✓ ünïcode",
	"\xff\xfe not utf-8",
	"\x01\x7f control",
	"tab\there",
	"line\n-A np-a -m comment --comment " + readsFuzzHash + " -j ACCEPT",
	"a\r\nb",
	"end\\",
	"x\nCOMMIT\n*filter\n-A INPUT -j np-a\n",
	strings.Repeat("c", 255),
	strings.Repeat("d", 256),
	strings.Repeat(`"`, 255),
	strings.Repeat("np:", 80) + readsFuzzHash,
}

// FuzzKernelReadsAgree is the differential test of the two reads: rules
// with arbitrary comments go into a table of the kernel (foreign jumps to
// our chains, copies of our hash, rules in our chains and in foreign
// ones), and the iptables-save parser and the in-process read must see
// exactly the same picture (hashes, foreign references, which rules are
// ours), for both backends and both IP families. The seed corpus (every
// hostile comment, for every flavour) runs in the normal suite; run it
// with -fuzz for more. A comment the binaries refuse leaves its rule out:
// both reads see the same kernel anyway.
func FuzzKernelReadsAgree(f *testing.F) {
	kerneltest.RequireCommands(f, "iptables-legacy", "iptables-nft", "ip6tables-legacy", "ip6tables-nft")
	for _, c := range readsFuzzComments {
		for flavour := range uint8(4) {
			f.Add(flavour, c)
		}
	}
	ns := kerneltest.NewNS(f)
	k := OpenKernelForTest(f, ns)
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, flavour uint8, comment string) {
		if strings.IndexByte(comment, 0) >= 0 {
			return // an argument cannot hold a NUL byte
		}
		b := []Backend{BackendLegacy, BackendNFT}[flavour&1]
		v := []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6}[flavour>>1&1]
		cmd := "iptables-" + string(b)
		if v == ipfamily.IPv6 {
			cmd = "ip6tables-" + string(b)
		}
		// Replace the whole table: only our test chains, empty.
		_, err := ns.Run(ctx, strings.NewReader("*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:np-a - [0:0]\n:np-b - [0:0]\n:KUBE-X - [0:0]\nCOMMIT\n"), b.RestoreCommand(v), "-w", "5")
		require.NoError(t, err)
		c := []string{"-m", "comment", "--comment", comment}
		ours := []string{"-m", "comment", "--comment", readsFuzzHash}
		rules := [][]string{
			append(append([]string{"INPUT"}, c...), "-j", "np-a"),
			append(append([]string{"INPUT"}, c...), "-j", "ACCEPT"),
			append(append(append([]string{"KUBE-X"}, c...), ours...), "-j", "np-b"),
			append(append(append([]string{"INPUT"}, ours...), c...), "-j", "ACCEPT"),
			append(append([]string{"np-a"}, c...), "-j", "np-b"),
			append(append([]string{"FORWARD"}, c...), "-g", "np-b"),
			append([]string{"OUTPUT"}, c...),
			append(append(append([]string{"np-b"}, c...), c...), "-j", "RETURN"),
			{"KUBE-X", "-j", "np-a"},
		}
		for _, r := range rules {
			_, _ = ns.Exec(ctx, cmd, append([]string{"-w", "5", "-A"}, r...)...)
		}
		out, err := ns.Exec(ctx, b.SaveCommand(v), "-t", "filter")
		require.NoError(t, err)
		p := &saveParser{table: "filter", chainPrefix: "np-", hashPrefix: "np:", foreign: []string{"KUBE-X", "KUBE-NONE", "INPUT"}}
		want, err := p.parse(bytes.NewReader(out))
		require.NoError(t, err, "save output:\n%s", out)
		got, err := readInProcess(k, b, v, "filter", p)
		require.NoError(t, err)
		require.Equal(t, viewOf(t, want, false), viewOf(t, got, true), "%s %v, comment %q; save output:\n%s", b, v, comment, out)
		require.Equal(t, map[string]bool{"KUBE-X": true, "KUBE-NONE": false, "INPUT": true}, got.exists)
		require.Equal(t, want.exists, got.exists)
		require.Positive(t, want.chains["np-a"].foreignRefs, "the jump from KUBE-X, at least")
	})
}
