package iptables

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/command"
	"github.com/nodeplane/nodeplane/internal/nfcore"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/netfilter"
)

func TestRuleHashDependsOnEverything(t *testing.T) {
	base := ruleHash("np-a", saltNone, 0, "-j ACCEPT")
	require.Len(t, base, HashLength)
	for _, c := range base {
		assert.True(t, nfcore.IsHashChar(byte(c)), "hash %q is base64url", base)
	}
	variants := map[string]string{
		"chain":    ruleHash("np-b", saltNone, 0, "-j ACCEPT"),
		"salt":     ruleHash("np-a", saltInsert, 0, "-j ACCEPT"),
		"position": ruleHash("np-a", saltNone, 1, "-j ACCEPT"),
		"body":     ruleHash("np-a", saltNone, 0, "-j DROP"),
		// The separators keep field boundaries apart.
		"boundary": ruleHash("np-a"+"\x00", saltNone, 0, "-j ACCEPT"),
		"index":    ruleHash("np-a", saltNone, 10, "-j ACCEPT"),
	}
	seen := map[string]string{base: "base"}
	for what, h := range variants {
		if other, dup := seen[h]; dup {
			t.Errorf("changing the %s gives the same hash as %s", what, other)
		}
		seen[h] = what
	}
	assert.Equal(t, base, ruleHash("np-a", saltNone, 0, "-j ACCEPT"), "deterministic")
}

func TestChainHashes(t *testing.T) {
	rules := []renderedRule{{body: "-j ACCEPT"}, {body: "-j ACCEPT"}, {body: "-j DROP"}}
	hs := chainHashes("np-a", saltNone, rules)
	require.Len(t, hs, 3*HashLength)
	h := func(s string, i int) string { return s[i*HashLength : (i+1)*HashLength] }
	for i, r := range rules {
		assert.Equal(t, ruleHash("np-a", saltNone, i, r.body), h(hs, i))
	}
	assert.NotEqual(t, h(hs, 0), h(hs, 1), "equal rules at different positions differ")
	// Changing the first rule changes its hash only.
	other := chainHashes("np-a", saltNone, []renderedRule{{body: "-j RETURN"}, {body: "-j ACCEPT"}, {body: "-j DROP"}})
	assert.NotEqual(t, h(hs, 0), h(other, 0))
	assert.Equal(t, hs[HashLength:], other[HashLength:])
	// Inserting a rule at the top moves, and so changes, every rule.
	shifted := chainHashes("np-a", saltNone, append([]renderedRule{{body: "-j LOG"}}, rules...))
	for i := range rules {
		assert.NotEqual(t, h(hs, i), h(shifted, i+1), "rule %d moved", i)
	}
}

func TestRestoreTokens(t *testing.T) {
	// Tokens are quoted exactly when they hold a blank, a quote or a
	// backslash (or are empty), and split back unchanged.
	tests := []struct {
		args []string
		text string
	}{
		{[]string{"-j", "ACCEPT"}, "-j ACCEPT"},
		{[]string{"--comment", "two words"}, `--comment "two words"`},
		{[]string{"--comment", "tab\there"}, "--comment \"tab\there\""},
		{[]string{`back\slash`}, `"back\\slash"`},
		{[]string{"--comment", `q"b\s'`}, `--comment "q\"b\\s'"`},
		{[]string{"--comment", ""}, `--comment ""`},
		{[]string{"it's", "x"}, `"it's" x`},
		{[]string{"", ""}, `"" ""`},
	}
	for _, tc := range tests {
		var w tokWriter
		for _, a := range tc.args {
			w.tok(a)
		}
		assert.Equal(t, tc.text, string(w.b), "%q", tc.args)
		assert.Equal(t, tc.args, splitTokens(string(w.b)), "%q", tc.args)
	}
	assert.Nil(t, splitTokens(""))
}

func TestRuleRestoreTextAndCut(t *testing.T) {
	// The restore text of a rule is its arguments, quoted; the header
	// criteria (-s, -d, -i, -o, -p) end at cut, where the Table puts its
	// hash comment.
	tests := []struct {
		rule     netfilter.Rule
		body     string
		withHash string
	}{
		{netfilter.Rule{Action: netfilter.Accept()}, "-j ACCEPT", `-m comment --comment "np:H" -j ACCEPT`},
		{netfilter.Rule{Matches: []netfilter.Match{netfilter.DestPorts(netfilter.Port(80)), netfilter.Protocol(netfilter.ProtoTCP), netfilter.SourceNet(netip.MustParsePrefix("10.0.0.0/8"))}, Action: netfilter.Accept()},
			"-s 10.0.0.0/8 -p tcp -m tcp --dport 80 -j ACCEPT",
			`-s 10.0.0.0/8 -p tcp -m comment --comment "np:H" -m tcp --dport 80 -j ACCEPT`},
		{netfilter.Rule{Matches: []netfilter.Match{netfilter.Not(netfilter.InInterface("eth0"))}, Action: netfilter.Drop()}, "! -i eth0 -j DROP", `! -i eth0 -m comment --comment "np:H" -j DROP`},
		{netfilter.Rule{Action: netfilter.Accept(), Comments: []string{"two words"}},
			`-m comment --comment "two words" -j ACCEPT`,
			`-m comment --comment "np:H" -m comment --comment "two words" -j ACCEPT`},
		{netfilter.Rule{Action: netfilter.ActionLog{Prefix: "it's "}}, `-j LOG --log-prefix "it's "`, `-m comment --comment "np:H" -j LOG --log-prefix "it's "`},
	}
	for _, tc := range tests {
		var st ruleRender
		// Rendered after other text, as in a chain's buffer.
		b, cut, err := appendRestore([]byte("prev"), tc.rule, ipfamily.IPv4, placement{}, &st)
		require.NoError(t, err)
		r := renderedRule{body: string(b[4:]), cut: cut}
		assert.Equal(t, tc.body, r.body)
		assert.Equal(t, tc.withHash, r.withHash("np:", "H"))
		args, err := RuleArgs(tc.rule, ipfamily.IPv4)
		require.NoError(t, err)
		assert.Equal(t, args, splitTokens(r.body), "Args is the restore text split")
	}
	// A rule of header criteria only (possible for a foreign action that
	// renders nothing) gets the comment at its end.
	r := renderedRule{body: "-s 10.0.0.0/8", cut: len("-s 10.0.0.0/8")}
	assert.Equal(t, `-s 10.0.0.0/8 -m comment --comment "np:H"`, r.withHash("np:", "H"))
}

func TestRestoreErrorMessage(t *testing.T) {
	var input strings.Builder
	input.WriteString("*filter\n")
	for i := 2; i <= 20; i++ {
		input.WriteString("-A np-a -j ACCEPT\n")
	}
	input.WriteString("COMMIT\n")
	cause := errors.New("exit status 1")
	err := newRestoreError([]string{"iptables-nft-restore", "--noflush"}, []byte(input.String()), nil, errWithText{cause, "iptables-nft-restore: line 10 failed: Bad rule"})
	var e *command.RestoreError
	require.ErrorAs(t, err, &e)
	assert.Equal(t, 10, e.Line)
	msg := err.Error()
	assert.True(t, strings.HasPrefix(msg, "iptables: restore failed: iptables-nft-restore --noflush (input line 10): "), msg)
	assert.Equal(t, 1, strings.Count(msg, "iptables: "), msg)
	assert.Contains(t, msg, ">    10  -A np-a -j ACCEPT")
	assert.Contains(t, msg, "      7  -A np-a")
	assert.Contains(t, msg, "     13  -A np-a")
	assert.NotContains(t, msg, "      6  ")
	assert.NotContains(t, msg, "     14  ")
	assert.ErrorIs(t, err, ErrRestore)
	assert.ErrorIs(t, err, cause)

	// Without a line number the excerpt is the start of the input.
	err = newRestoreError([]string{"x"}, []byte(input.String()), nil, cause)
	require.ErrorAs(t, err, &e)
	assert.Zero(t, e.Line)
	assert.Contains(t, err.Error(), "      1  *filter")
}

type errWithText struct {
	err  error
	text string
}

func (e errWithText) Error() string { return e.text }
func (e errWithText) Unwrap() error { return e.err }

func TestFailedLine(t *testing.T) {
	tests := map[string]int{
		"iptables-restore: line 3 failed":                                     3,
		"iptables-nft-restore: line 12 failed: Bad rule":                      12,
		"Couldn't load target `x'\n\nError occurred at line: 7\nTry ...":      7,
		"iptables-nft-restore v1.8.9 (nf_tables): \nline 3: CHAIN_DEL failed": 3,
		"something else": 0,
	}
	for out, want := range tests {
		e := command.NewRestoreError([]string{"iptables-restore"}, nil, nil, &command.Error{Stderr: []byte(out), Err: errors.New("exit status 1")}, failedLineRE)
		assert.Equal(t, want, e.Line, out)
	}
}

func TestParseBackend(t *testing.T) {
	for in, want := range map[string]Backend{"legacy": BackendLegacy, " NFT ": BackendNFT} {
		b, err := ParseBackend(in)
		require.NoError(t, err)
		assert.Equal(t, want, b)
	}
	_, err := ParseBackend("auto")
	require.ErrorIs(t, err, ErrInvalidOptions)
	assert.Equal(t, "ip6tables-nft-save", BackendNFT.SaveCommand(ipfamily.IPv6))
	assert.Equal(t, "iptables-legacy-restore", BackendLegacy.RestoreCommand(ipfamily.IPv4))
	assert.Equal(t, "(none)", Backend("").String())
}
