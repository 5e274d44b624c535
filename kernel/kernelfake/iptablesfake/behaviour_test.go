package iptablesfake_test

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/command"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/iptables"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/kernel/kernelfake/iptablesfake"
)

// The behaviour table: the same steps and expectations run against the
// fake (TestFakeBehaviour) and against the real binaries in a fresh network
// namespace (TestKernelFakeMatchesKernel), for both backends and both IP
// versions, so the fake is shown to behave like the kernel for what the
// table writer emits.

// step is one restore run (input set), one iptables command (args set) or
// one ipset command (ipset set).
type step struct {
	input   string
	flush   bool // restore without --noflush
	args    []string
	ipset   []string
	wantErr bool
	// line and nftLine, when set, are the input line a failing restore
	// names, with the legacy and the nft binaries (nftLine 0: as line):
	// the table writer leaves out the object that line belongs to.
	line, nftLine int
	// stderr and nftStderr, when set, are the error output of the failing
	// step with the legacy and the nft binaries (nftStderr "": as
	// stderr), where %s stands for the binary's name as it prints it.
	stderr, nftStderr string
}

// behaviourCase is a sequence of steps and the filter table it must leave.
type behaviourCase struct {
	name   string
	steps  []step
	chains []string            // user chains expected, in save order
	rules  map[string][]string // chain → rules as iptables-save prints them
}

// addrs holds the addresses a case uses, per IP version.
type addrs struct {
	host, hostSave, net, netSave, other, otherSave string
}

func addrsFor(v ipfamily.Family) addrs {
	if v == ipfamily.IPv6 {
		return addrs{"2001:db8::1", "2001:db8::1/128", "2001:db8:1::5/48", "2001:db8:1::/48", "2001:db8::2", "2001:db8::2/128"}
	}
	return addrs{"192.0.2.1", "192.0.2.1/32", "10.1.2.3/8", "10.0.0.0/8", "192.0.2.2", "192.0.2.2/32"}
}

func restoreStep(lines ...string) step {
	return step{input: "*filter\n" + strings.Join(lines, "\n") + "\nCOMMIT\n"}
}

func failing(s step) step { s.wantErr = true; return s }

// failingAt is failing, naming the line each backend reports.
func failingAt(s step, line, nftLine int) step {
	s.wantErr, s.line, s.nftLine = true, line, nftLine
	return s
}

// failingWith is failing with the error output of each backend (see
// step.stderr).
func failingWith(s step, stderr, nftStderr string) step {
	s.wantErr, s.stderr, s.nftStderr = true, stderr, nftStderr
	return s
}

// ipsetStep runs ipset with args.
func ipsetStep(args ...string) step { return step{ipset: args} }

// tryHelp is the last line of a parameter problem's error output.
const tryHelp = "Try `%[1]s -h' or '%[1]s --help' for more information.\n"

func behaviourCases(v ipfamily.Family) []behaviourCase {
	a := addrsFor(v)
	reject := "icmp-port-unreachable"
	// A set of the other family, and how iptables names that family.
	otherFamily, otherName := "inet6", "IPv6"
	if v == ipfamily.IPv6 {
		reject = "icmp6-port-unreachable"
		otherFamily, otherName = "inet", "IPv4"
	}
	family := map[ipfamily.Family]string{ipfamily.IPv4: "inet", ipfamily.IPv6: "inet6"}[v]
	base := restoreStep(
		":np-a - [0:0]",
		"-A np-a -s "+a.host+" -j ACCEPT",
		"-A np-a -s "+a.other+" -j ACCEPT",
		"-A np-a -j DROP",
		"-A FORWARD -j np-a",
	)
	return []behaviourCase{
		{
			name:   "declare creates chains and rules",
			steps:  []step{base},
			chains: []string{"np-a"},
			rules: map[string][]string{
				"np-a":    {"-s " + a.hostSave + " -j ACCEPT", "-s " + a.otherSave + " -j ACCEPT", "-j DROP"},
				"FORWARD": {"-j np-a"},
			},
		},
		{
			name:   "declaring an existing chain flushes it",
			steps:  []step{base, restoreStep(":np-a - [0:0]", "-A np-a -j RETURN")},
			chains: []string{"np-a"},
			rules:  map[string][]string{"np-a": {"-j RETURN"}, "FORWARD": {"-j np-a"}},
		},
		{
			name:   "noflush appends to built-in chains again",
			steps:  []step{restoreStep("-A INPUT -j DROP"), restoreStep("-A INPUT -j DROP")},
			chains: nil,
			rules:  map[string][]string{"INPUT": {"-j DROP", "-j DROP"}},
		},
		{
			name:   "a rule without arguments",
			steps:  []step{restoreStep(":np-a - [0:0]", "-A np-a", "-A INPUT -j np-a")},
			chains: []string{"np-a"},
			rules:  map[string][]string{"np-a": {""}, "INPUT": {"-j np-a"}},
		},
		{
			name:   "a built-in chain declaration does not flush it",
			steps:  []step{restoreStep("-A INPUT -j DROP"), restoreStep(":INPUT ACCEPT [0:0]", "-A INPUT -j RETURN")},
			chains: nil,
			rules:  map[string][]string{"INPUT": {"-j DROP", "-j RETURN"}},
		},
		{
			name: "insert, replace and delete by index",
			steps: []step{base, restoreStep(
				"-I np-a 2 -s "+a.net+" -j RETURN",
				"-R np-a 1 -s "+a.host+" -j DROP",
				"-D np-a 4",
				"-I np-a 4 -j ACCEPT",
				"-I FORWARD 1 -j RETURN",
			)},
			chains: []string{"np-a"},
			rules: map[string][]string{
				"np-a":    {"-s " + a.hostSave + " -j DROP", "-s " + a.netSave + " -j RETURN", "-s " + a.otherSave + " -j ACCEPT", "-j ACCEPT"},
				"FORWARD": {"-j RETURN", "-j np-a"},
			},
		},
		{
			name: "delete by full text as iptables-save prints it",
			steps: []step{
				restoreStep(`-A INPUT -s ` + a.host + ` -p tcp -m comment --comment "np:abc" -m tcp --dport 80 -m comment --comment "two words" -j ACCEPT`),
				restoreStep(`-A INPUT -m comment --comment np_x -j ACCEPT`),
				restoreStep(`-D INPUT -s ` + a.hostSave + ` -p tcp -m comment --comment "np:abc" -m tcp --dport 80 -m comment --comment "two words" -j ACCEPT`),
			},
			rules: map[string][]string{"INPUT": {"-m comment --comment np_x -j ACCEPT"}},
		},
		{
			name: "a failing line aborts the whole transaction",
			steps: []step{base, failing(restoreStep(
				":np-b - [0:0]",
				"-A np-b -j ACCEPT",
				"-D np-a 1",
				"-A np-missing -j DROP",
			))},
			chains: []string{"np-a"},
			rules: map[string][]string{
				"np-a":    {"-s " + a.hostSave + " -j ACCEPT", "-s " + a.otherSave + " -j ACCEPT", "-j DROP"},
				"FORWARD": {"-j np-a"},
			},
		},
		{
			name:   "deleting a referenced chain fails",
			steps:  []step{base, failingAt(restoreStep("-F np-a", "-X np-a"), 3, 3)},
			chains: []string{"np-a"},
			rules:  map[string][]string{"np-a": {"-s " + a.hostSave + " -j ACCEPT", "-s " + a.otherSave + " -j ACCEPT", "-j DROP"}, "FORWARD": {"-j np-a"}},
		},
		{
			name:  "deleting a chain after its references in one transaction",
			steps: []step{base, restoreStep("-D FORWARD -j np-a", "-F np-a", "-X np-a")},
			rules: map[string][]string{"FORWARD": nil},
		},
		{
			name:   "deleting a non-empty chain fails",
			steps:  []step{restoreStep(":np-a - [0:0]", "-A np-a -j DROP"), failing(restoreStep("-X np-a"))},
			chains: []string{"np-a"},
			rules:  map[string][]string{"np-a": {"-j DROP"}},
		},
		{
			name: "a jump to a missing chain fails, at its line (legacy) or at COMMIT (nft)",
			steps: []step{
				failingAt(restoreStep("-A FORWARD -j ACCEPT", "-A FORWARD -j np-nope", "-A FORWARD -j DROP"), 3, 5),
				failingAt(restoreStep(":np-a - [0:0]", "-A np-a -g np-nope"), 3, 4),
			},
			rules: map[string][]string{"FORWARD": nil},
		},
		{
			name: "the binaries' words for a jump or goto to a missing chain",
			steps: []step{
				failingWith(restoreStep("-A FORWARD -j np-nope"),
					"%[1]s v1.8.9 (legacy): Couldn't load target `np-nope':No such file or directory\n\nError occurred at line: 2\n"+tryHelp,
					"%[1]s v1.8.9 (nf_tables): Chain 'np-nope' does not exist\nError occurred at line: 3\n"+tryHelp),
				failingWith(restoreStep("-A FORWARD -g np-nope"),
					"%[1]s v1.8.9 (legacy): goto 'np-nope' is not a chain\nError occurred at line: 2\n"+tryHelp,
					"%[1]s v1.8.9 (nf_tables): Chain 'np-nope' does not exist\nError occurred at line: 3\n"+tryHelp),
				failingWith(step{args: []string{"-A", "FORWARD", "-j", "np-nope"}},
					"%[1]s v1.8.9 (legacy): Couldn't load target `np-nope':No such file or directory\n\n"+tryHelp,
					"%[1]s v1.8.9 (nf_tables): Chain 'np-nope' does not exist\n"+tryHelp),
			},
			rules: map[string][]string{"FORWARD": nil},
		},
		{
			name: "a set match needs the set, of the rule's family or of none",
			steps: []step{
				failingWith(restoreStep(":np-a - [0:0]", "-A np-a -m set --match-set np-s src -j ACCEPT", "-A FORWARD -j np-a"),
					"%[1]s v1.8.9 (legacy): Set np-s doesn't exist.\n\nError occurred at line: 3\n"+tryHelp,
					"%[1]s v1.8.9 (nf_tables): Set np-s doesn't exist.\n\nError occurred at line: 3\n"+tryHelp),
				failingWith(step{args: []string{"-A", "INPUT", "-m", "set", "--match-set", "np-s", "src", "-j", "ACCEPT"}},
					"%[1]s v1.8.9 (legacy): Set np-s doesn't exist.\n\n"+tryHelp,
					"%[1]s v1.8.9 (nf_tables): Set np-s doesn't exist.\n\n"+tryHelp),
				ipsetStep("create", "np-other", "hash:net", "family", otherFamily),
				failingWith(restoreStep("-A INPUT -m set ! --match-set np-other dst -j DROP"),
					"%[1]s v1.8.9 (legacy): The protocol family of set np-other is "+otherName+", which is not applicable.\n\nError occurred at line: 2\n"+tryHelp,
					"%[1]s v1.8.9 (nf_tables): The protocol family of set np-other is "+otherName+", which is not applicable.\n\nError occurred at line: 2\n"+tryHelp),
				ipsetStep("create", "np-s", "hash:net", "family", family),
				ipsetStep("create", "np-ports", "bitmap:port", "range", "1-1024"),
				restoreStep(":np-a - [0:0]", "-A np-a -m set --match-set np-s src -j ACCEPT", "-A np-a -m set --match-set np-ports dst -j ACCEPT", "-A FORWARD -j np-a"),
			},
			chains: []string{"np-a"},
			rules: map[string][]string{
				"np-a":    {"-m set --match-set np-s src -j ACCEPT", "-m set --match-set np-ports dst -j ACCEPT"},
				"FORWARD": {"-j np-a"},
				"INPUT":   nil,
			},
		},
		{
			name:   "index out of range fails",
			steps:  []step{base, failing(restoreStep("-R np-a 4 -j DROP")), failing(restoreStep("-D np-a 9")), failing(restoreStep("-I np-a 5 -j DROP"))},
			chains: []string{"np-a"},
			rules:  map[string][]string{"np-a": {"-s " + a.hostSave + " -j ACCEPT", "-s " + a.otherSave + " -j ACCEPT", "-j DROP"}},
		},
		{
			name:   "deleting a rule that is not there fails",
			steps:  []step{base, failingAt(restoreStep("-D np-a -s "+a.net+" -j DROP"), 2, 2)},
			chains: []string{"np-a"},
			rules:  map[string][]string{"np-a": {"-s " + a.hostSave + " -j ACCEPT", "-s " + a.otherSave + " -j ACCEPT", "-j DROP"}},
		},
		{
			name: "rules come back in canonical form",
			steps: []step{restoreStep(
				":np-a - [0:0]",
				":np-c - [0:0]",
				"-A np-c -p tcp --dport 80 -s "+a.net+" -j ACCEPT",
				"-A np-c -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT",
				"-A np-c -m mark --mark 0x10/0xf0 -j MARK --set-mark 0x1",
				"-A np-c ! -i eth+ -o veth1 -p udp ! --sport 53 -j REJECT",
				"-A np-c -p tcp -m multiport --destination-ports 1,2 -m comment --comment \"a b\" -g np-a",
			)},
			chains: []string{"np-a", "np-c"},
			rules: map[string][]string{"np-c": {
				"-s " + a.netSave + " -p tcp -m tcp --dport 80 -j ACCEPT",
				"-m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
				"-m mark --mark 0x10/0xf0 -j MARK --set-xmark 0x1/0xffffffff",
				"! -i eth+ -o veth1 -p udp -m udp ! --sport 53 -j REJECT --reject-with " + reject,
				`-p tcp -m multiport --dports 1,2 -m comment --comment "a b" -g np-a`,
			}},
		},
		{
			name: "check finds a rule by its spec",
			steps: []step{
				base,
				{args: []string{"-C", "np-a", "-s", a.host, "-j", "ACCEPT"}},
				{args: []string{"-C", "np-a", "-s", a.net, "-j", "ACCEPT"}, wantErr: true},
				{args: []string{"-t", "filter", "-D", "np-a", "-s", a.other, "-j", "ACCEPT"}},
			},
			chains: []string{"np-a"},
			rules:  map[string][]string{"np-a": {"-s " + a.hostSave + " -j ACCEPT", "-j DROP"}},
		},
		{
			name:   "without --noflush a table is replaced",
			steps:  []step{base, {input: "*filter\n:np-z - [0:0]\n-A INPUT -j np-z\nCOMMIT\n", flush: true}},
			chains: []string{"np-z"},
			rules:  map[string][]string{"INPUT": {"-j np-z"}, "FORWARD": nil, "np-z": nil},
		},
		{
			name:   "transactions before a failing one stay committed",
			steps:  []step{failing(step{input: "*filter\n-A INPUT -j DROP\nCOMMIT\n*filter\n-A INPUT -j np-nope\nCOMMIT\n"})},
			chains: nil,
			rules:  map[string][]string{"INPUT": {"-j DROP"}},
		},
		{
			name:   "input without COMMIT changes nothing",
			steps:  []step{failing(step{input: "*filter\n-A INPUT -j DROP\n"})},
			chains: nil,
			rules:  map[string][]string{"INPUT": nil},
		},
	}
}

// runBehaviour runs one case through runner (the fake or a namespace) with
// the binaries of backend b and version v, and checks its expectations.
func runBehaviour(t *testing.T, runner command.Runner, b iptablesfake.Backend, v ipfamily.Family, tc behaviourCase) {
	t.Helper()
	ctx := context.Background()
	cmd := "iptables-" + string(b)
	if v == ipfamily.IPv6 {
		cmd = "ip6tables-" + string(b)
	}
	for i, s := range tc.steps {
		var err error
		prog := cmd // the name the binary prints
		switch {
		case s.ipset != nil:
			_, err = runner.Run(ctx, nil, "ipset", s.ipset...)
		case s.args != nil:
			_, err = runner.Run(ctx, nil, cmd, append([]string{"-w", "5"}, s.args...)...)
			prog = strings.TrimSuffix(cmd, "-"+string(b))
		default:
			prog = "iptables-restore"
			if v == ipfamily.IPv6 {
				prog = "ip6tables-restore"
			}
			if b == iptablesfake.BackendNFT {
				prog = iptables.Backend(b).RestoreCommand(v)
			}
			args := []string{"-w", "5", "--noflush"}
			if s.flush {
				args = []string{"-w", "5"}
			}
			_, err = runner.Run(ctx, strings.NewReader(s.input), iptables.Backend(b).RestoreCommand(v), args...)
		}
		if s.wantErr {
			require.Error(t, err, "step %d should fail", i+1)
			want := s.line
			if b == iptablesfake.BackendNFT && s.nftLine != 0 {
				want = s.nftLine
			}
			if want != 0 {
				m := failedLineRE.FindStringSubmatch(err.Error())
				require.NotNil(t, m, "step %d: no line in %q", i+1, err)
				assert.Equal(t, strconv.Itoa(want), m[1]+m[2]+m[3], "step %d: the failing line in %q", i+1, err)
			}
			stderr := s.stderr
			if b == iptablesfake.BackendNFT && s.nftStderr != "" {
				stderr = s.nftStderr
			}
			if stderr != "" {
				var ce *command.Error
				require.ErrorAs(t, err, &ce, "step %d", i+1)
				assert.Equal(t, fmt.Sprintf(stderr, prog), string(ce.Stderr), "step %d: the error output", i+1)
				assert.Equal(t, 2, ce.ExitCode, "step %d: a parameter problem", i+1)
			}
		} else {
			require.NoError(t, err, "step %d", i+1)
		}
	}
	out, err := runner.Run(ctx, nil, iptables.Backend(b).SaveCommand(v), "-t", "filter")
	require.NoError(t, err)
	chains, rules := parseDump(string(out))
	assert.Equal(t, append([]string{"INPUT", "FORWARD", "OUTPUT"}, tc.chains...), chains, "chains")
	for chain, want := range tc.rules {
		assert.Equal(t, want, rules[chain], "rules of %s", chain)
	}
}

// failedLineRE matches the ways the restore binaries name the failing
// line.
var failedLineRE = regexp.MustCompile(`line (\d+) failed|Error occurred at line: (\d+)|line (\d+): `)

// parseDump returns the chains and rules of iptables-save output.
func parseDump(out string) (chains []string, rules map[string][]string) {
	rules = map[string][]string{}
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(line, ":"):
			chains = append(chains, strings.Fields(line[1:])[0])
		case strings.HasPrefix(line, "-A "):
			chain, spec, _ := strings.Cut(line[3:], " ")
			rules[chain] = append(rules[chain], spec)
		}
	}
	return chains, rules
}

func forEachFlavour(t *testing.T, fn func(t *testing.T, b iptablesfake.Backend, v ipfamily.Family)) {
	for _, b := range []iptablesfake.Backend{iptablesfake.BackendLegacy, iptablesfake.BackendNFT} {
		for _, v := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
			t.Run(fmt.Sprintf("%s-%v", b, v), func(t *testing.T) { fn(t, b, v) })
		}
	}
}

func TestFakeBehaviour(t *testing.T) {
	forEachFlavour(t, func(t *testing.T, b iptablesfake.Backend, v ipfamily.Family) {
		for _, tc := range behaviourCases(v) {
			t.Run(tc.name, func(t *testing.T) {
				// The namespace fake serves the iptables binaries from its
				// iptablesfake.Kernel, which checks sets against its ipset
				// fake.
				runBehaviour(t, kernelfake.New(kernelfake.Options{}).Runner(), b, v, tc)
			})
		}
	})
}
