package ipsetsfake_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/command"
	"github.com/nodeplane/nodeplane/kernel/kernelfake/ipsetsfake"
	"github.com/nodeplane/nodeplane/netfilter"
)

func restore(t *testing.T, k *ipsetsfake.Kernel, script string, args ...string) error {
	t.Helper()
	_, err := k.Run(context.Background(), strings.NewReader(script), "ipset", append([]string{"restore"}, args...)...)
	return err
}

func stderr(t *testing.T, err error) string {
	t.Helper()
	var ce *command.Error
	require.ErrorAs(t, err, &ce)
	return strings.TrimSpace(string(ce.Stderr))
}

func run(t *testing.T, k *ipsetsfake.Kernel, args ...string) string {
	t.Helper()
	out, err := k.Run(context.Background(), nil, "ipset", args...)
	require.NoError(t, err)
	return string(out)
}

func TestRestoreErrors(t *testing.T) {
	cases := []struct {
		name   string
		script string
		want   string
		exit   int
	}{
		{"duplicate", "create a hash:ip\nadd a 10.0.0.1\nadd a 10.0.0.1\n", "Error in line 3: " + ipsetsfake.MsgAlreadyIn, 1},
		{"missing member", "create a hash:ip\ndel a 10.0.0.1\n", "Error in line 2: " + ipsetsfake.MsgNotIn, 1},
		{"missing set", "add a 10.0.0.1\n", "Error in line 1: " + ipsetsfake.MsgNotExist, 1},
		{"exists", "create a hash:ip\ncreate a hash:ip\n", "Error in line 2: " + ipsetsfake.MsgExists, 1},
		{"exists with other header", "create a hash:ip\ncreate a hash:ip maxelem 5 -exist\n", "Error in line 2: " + ipsetsfake.MsgExists, 1},
		{"wrong family", "create a hash:ip family inet6\nadd a 10.0.0.1\n", "Error in line 2: Syntax error: cannot parse 10.0.0.1: resolving to IPv6 address failed", 1},
		{"slash zero", "create a hash:net\nadd a 0.0.0.0/0\n", "Error in line 2: " + ipsetsfake.MsgBadCIDR, 1},
		{"hash full", "create a hash:ip maxelem 1\nadd a 10.0.0.1\nadd a 10.0.0.2\n", "Error in line 3: " + ipsetsfake.MsgHashFull, 1},
		{"out of range", "create a bitmap:port range 1-10\nadd a 11\n", "Error in line 2: " + ipsetsfake.MsgOutOfRange, 1},
		{"no range", "create a bitmap:port\n", "Error in line 1: Syntax error: Missing mandatory option: range", 1},
		{"swap types", "create a hash:ip\ncreate b hash:net\nswap a b\n", "Error in line 3: " + ipsetsfake.MsgTypeSwap, 1},
		{"swap families", "create a hash:ip\ncreate b hash:ip family inet6\nswap a b\n", "Error in line 3: " + ipsetsfake.MsgTypeSwap, 1},
		{"unknown type", "create a hash:mac\n", "Error in line 1: Syntax error: typename 'hash:mac' is unknown (not emulated by ipsetsfake)", 1},
		{"unknown command", "frobnicate a\n", "Error in line 1: No command specified: unknown argument frobnicate", 2},
		{"wrong arguments", "add a\n", "Error in line 1: Syntax error: wrong number of arguments to add", 2},
		{"long name", "create " + strings.Repeat("n", 32) + " hash:ip\n", "Error in line 1: Syntax error: setname '" + strings.Repeat("n", 32) + "' is longer than 31 characters", 2},
		{"bad option", "create a hash:ip timeout 5\n", "Error in line 1: Syntax error: option timeout is not emulated by ipsetsfake", 2},
		{"null v4", "create a hash:ip\nadd a 0.0.0.0\n", "Error in line 2: " + ipsetsfake.MsgNullElement, 1},
		{"null v6", "create a hash:ip family inet6\nadd a ::\n", "Error in line 2: " + ipsetsfake.MsgNullElement, 1},
		{"null ip,port", "create a hash:ip,port family inet6\nadd a ::,tcp:80\n", "Error in line 2: " + ipsetsfake.MsgInvalidArgument, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k := ipsetsfake.New()
			err := restore(t, k, tc.script)
			require.Error(t, err)
			assert.Equal(t, "ipset "+ipsetsfake.Version+": "+tc.want, stderr(t, err))
			var ce *command.Error
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, tc.exit, ce.ExitCode)
			calls := k.Calls()
			require.Len(t, calls, 1)
			assert.Equal(t, tc.script, calls[0].Stdin)
			assert.Equal(t, err, calls[0].Err)
		})
	}
}

func TestRestoreKeepsLinesBeforeTheFailure(t *testing.T) {
	k := ipsetsfake.New()
	err := restore(t, k, "create a hash:ip\nadd a 10.0.0.1\nadd nope 10.0.0.2\nadd a 10.0.0.3\n")
	require.Error(t, err)
	members, ok := k.Members("a")
	require.True(t, ok)
	assert.Equal(t, []string{"10.0.0.1"}, members)
}

func TestCanonicalMembers(t *testing.T) {
	k := ipsetsfake.New()
	require.NoError(t, restore(t, k, `# comment

create n hash:net family inet
add n 10.0.0.1/32
add n 10.1.2.3/8
create p hash:ip,port
add p 10.0.0.1,80
add p 10.0.0.1,icmp:8/0
create e hash:ip family inet6
add e FD00::0001
add e ::2:0
add e ::ffff:1.2.3.4
create m hash:net family inet6
add m fd00::1/64
add m ::1.2.3.4/120
add m 0:0:0:0:0:0:0:1/128
create z hash:net
add z 0.0.0.0/32
`))
	got, _ := k.Members("n")
	assert.Equal(t, []string{"10.0.0.0/8", "10.0.0.1"}, got, "host bits are masked, as the binary does")
	got, _ = k.Members("m")
	assert.Equal(t, []string{"::1", "::1.2.3.0/120", "fd00::/64"}, got, "IPv4-compatible addresses print as glibc prints them")
	got, _ = k.Members("z")
	assert.Equal(t, []string{"0.0.0.0"}, got, "hash:net takes the unspecified address")
	got, _ = k.Members("p")
	assert.Equal(t, []string{"10.0.0.1,tcp:80", "10.0.0.1,icmp:8/0"}, got, "ICMP entries are kept as written")
	got, _ = k.Members("e")
	assert.Equal(t, []string{"::0.2.0.0", "::ffff:1.2.3.4", "fd00::1"}, got)
	require.Error(t, restore(t, k, "add p 10.0.0.1,tcp:80\n"), "10.0.0.1,80 was TCP")
	require.NoError(t, restore(t, k, "del p 10.0.0.1,icmp:8/0\n"))
}

func TestExistFlag(t *testing.T) {
	k := ipsetsfake.New()
	require.NoError(t, restore(t, k, "create a hash:ip\nadd a 10.0.0.1\n"))
	require.NoError(t, restore(t, k, "create a hash:ip\nadd a 10.0.0.1\ndel a 10.9.9.9\n", "-exist"), "-exist for the whole input")
	require.NoError(t, restore(t, k, "create a hash:ip -exist\nadd a 10.0.0.1 -!\n"), "-exist per line")
	err := restore(t, k, "", "-bogus")
	assert.Contains(t, stderr(t, err), "unknown argument -bogus")
}

func TestListAndSave(t *testing.T) {
	k := ipsetsfake.New()
	require.NoError(t, restore(t, k, "create b hash:ip family inet maxelem 100\nadd b 10.0.0.2\ncreate a bitmap:port range 1-100\nadd a 80\ncreate c hash:ip counters\nadd c 10.0.0.3\n"))
	assert.Equal(t, "b\na\nc\n", run(t, k, "list", "-name"), "creation order")
	assert.Equal(t, run(t, k, "list", "-n"), run(t, k, "list", "-name"))
	save := run(t, k, "save")
	assert.Equal(t, k.Save(), save)
	assert.Equal(t, `create b hash:ip family inet hashsize 1024 maxelem 100 bucketsize 12 initval 0x5eed0001
add b 10.0.0.2
create a bitmap:port range 1-100
add a 80
create c hash:ip family inet hashsize 1024 maxelem 65536 counters bucketsize 12 initval 0x5eed0003
add c 10.0.0.3 packets 0 bytes 0
`, save)
	assert.Equal(t, "create a bitmap:port range 1-100\nadd a 80\n", run(t, k, "save", "a"))
	assert.Equal(t, run(t, k, "save", "a"), run(t, k, "list", "-o", "save", "a"))
	h, ok := k.Header("a")
	assert.True(t, ok)
	assert.Equal(t, "create a bitmap:port range 1-100", h)

	require.NoError(t, k.SetReferences("b", 2))
	terse := run(t, k, "list", "-t", "b")
	assert.Contains(t, terse, "Name: b\nType: hash:ip\n")
	assert.Contains(t, terse, "References: 2\nNumber of entries: 1\n")
	assert.NotContains(t, terse, "Members:")
	full := run(t, k, "list", "b")
	assert.True(t, strings.HasSuffix(full, "Members:\n10.0.0.2\n"), full)
	assert.Contains(t, run(t, k, "list"), "\n\nName: a\n")

	for _, args := range [][]string{{"save", "nope"}, {"list", "nope"}, {"list", "-t", "nope"}} {
		_, err := k.Run(context.Background(), nil, "ipset", args...)
		assert.Equal(t, "ipset "+ipsetsfake.Version+": "+ipsetsfake.MsgNotExist, stderr(t, err), "%v", args)
	}
	for _, args := range [][]string{{"list", "-o", "xml"}, {"list", "-x"}, {"list", "a", "b"}, {"save", "a", "b"}, {}} {
		_, err := k.Run(context.Background(), nil, "ipset", args...)
		var ce *command.Error
		require.ErrorAs(t, err, &ce, "%v", args)
		assert.Equal(t, 2, ce.ExitCode, "%v", args)
	}
	_, ok = k.Members("nope")
	assert.False(t, ok)
	_, ok = k.Header("nope")
	assert.False(t, ok)
}

func TestReferences(t *testing.T) {
	k := ipsetsfake.New()
	require.NoError(t, restore(t, k, "create a hash:ip\nadd a 10.0.0.1\ncreate t hash:ip maxelem 10\nadd t 10.0.0.2\n"))
	require.NoError(t, k.SetReferences("a", 1))
	assert.Error(t, k.SetReferences("nope", 1))
	assert.Error(t, k.SetReferences("a", -1))

	err := k.Exec("destroy", "a")
	require.Error(t, err)
	assert.Contains(t, err.Error(), ipsetsfake.MsgInUse)
	err = k.Exec("destroy")
	assert.Contains(t, err.Error(), ipsetsfake.MsgInUse, "destroying all fails while one is in use")
	assert.Equal(t, []string{"a", "t"}, k.Names())

	// A swap exchanges contents; the reference stays with the name.
	require.NoError(t, restore(t, k, "swap a t\ndestroy t\n"))
	got, _ := k.Members("a")
	assert.Equal(t, []string{"10.0.0.2"}, got)
	h, _ := k.Header("a")
	assert.Contains(t, h, "maxelem 10")
	assert.Contains(t, run(t, k, "list", "-t", "a"), "References: 1")

	require.NoError(t, k.SetReferences("a", 0))
	require.NoError(t, k.Exec("destroy"))
	assert.Empty(t, k.Names())
}

func TestCommandLine(t *testing.T) {
	k := ipsetsfake.New()
	require.NoError(t, k.Exec("create", "a", "hash:ip", "family", "inet"))
	require.NoError(t, k.Exec("add", "a", "10.0.0.1"))
	require.NoError(t, k.Exec("add", "a", "10.0.0.1", "-exist"))
	assert.ErrorContains(t, k.Exec("add", "a", "10.0.0.1"), ipsetsfake.MsgAlreadyIn)
	require.NoError(t, k.Exec("rename", "a", "b"))
	assert.ErrorContains(t, k.Exec("rename", "a", "c"), ipsetsfake.MsgNotExist)
	require.NoError(t, k.Exec("create", "c", "hash:ip"))
	assert.ErrorContains(t, k.Exec("rename", "b", "c"), ipsetsfake.MsgExists)
	require.NoError(t, k.Exec("flush", "b"))
	got, _ := k.Members("b")
	assert.Empty(t, got)
	require.NoError(t, k.Exec("add", "b", "10.0.0.1"))
	require.NoError(t, k.Exec("flush"))
	got, _ = k.Members("b")
	assert.Empty(t, got)
	assert.ErrorContains(t, k.Exec("flush", "nope"), ipsetsfake.MsgNotExist)
	assert.ErrorContains(t, k.Exec("destroy", "nope"), ipsetsfake.MsgNotExist)
	require.NoError(t, k.Exec("del", "b", "10.0.0.1", "-exist"))
	assert.Error(t, k.Exec("restore"), "restore needs Run")

	_, err := k.Run(context.Background(), nil, "iptables", "-L")
	var ce *command.Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, 127, ce.ExitCode)
	_, err = k.Run(context.Background(), nil, "/usr/sbin/ipset", "list", "-name")
	assert.NoError(t, err, "a path to ipset is fine")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = k.Run(ctx, nil, "ipset", "list")
	assert.ErrorContains(t, err, "context canceled")
	assert.Equal(t, 3, k.CountCalls("rename"))
	k.ResetCalls()
	assert.Zero(t, k.CountCalls(""))
}

func TestFailureInjection(t *testing.T) {
	k := ipsetsfake.New()
	k.FailNext(2, "restore", "")
	k.FailNext(1, "save", "Kernel error received: boom")
	for range 2 {
		err := restore(t, k, "create a hash:ip\n")
		assert.Equal(t, "ipset "+ipsetsfake.Version+": "+ipsetsfake.MsgInjected, stderr(t, err))
	}
	assert.Empty(t, k.Names(), "an injected failure changes nothing")
	assert.Empty(t, run(t, k, "list", "-name"), "other commands are not affected")
	_, err := k.Run(context.Background(), nil, "ipset", "save")
	assert.Contains(t, stderr(t, err), "boom")
	require.NoError(t, restore(t, k, "create a hash:ip\n"))

	k.FailLine("10.0.0.2", "Kernel error received: no memory")
	err = restore(t, k, "add a 10.0.0.1\nadd a 10.0.0.2\nadd a 10.0.0.3\n")
	assert.Equal(t, "ipset "+ipsetsfake.Version+": Error in line 2: Kernel error received: no memory", stderr(t, err))
	got, _ := k.Members("a")
	assert.Equal(t, []string{"10.0.0.1"}, got)
	assert.ErrorContains(t, k.Exec("add", "a", "10.0.0.2"), "no memory")

	k.FailNext(1, "", "")
	_, err = k.Run(context.Background(), nil, "ipset", "list")
	assert.Error(t, err, "an empty subcommand matches any")

	k.ClearFailures()
	require.NoError(t, k.Exec("add", "a", "10.0.0.2"))
}

func TestUnsupportedTypes(t *testing.T) {
	k := ipsetsfake.New()
	k.SetUnsupported(netfilter.HashNetNet)
	err := restore(t, k, "create a hash:net,net\n")
	assert.Equal(t, "ipset "+ipsetsfake.Version+": Error in line 1: "+ipsetsfake.MsgUnsupported, stderr(t, err))
	k.SetUnsupported()
	require.NoError(t, restore(t, k, "create a hash:net,net\nadd a 10.0.0.0/8,10.1.0.0/16\n"))
}

func TestReadError(t *testing.T) {
	k := ipsetsfake.New()
	_, err := k.Run(context.Background(), iotestErr{}, "ipset", "restore")
	var ce *command.Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, -1, ce.ExitCode)
}

type iotestErr struct{}

func (iotestErr) Read([]byte) (int, error) { return 0, errors.New("read failed") }

func TestTestCommand(t *testing.T) {
	k := ipsetsfake.New()
	require.NoError(t, restore(t, k, "create a hash:net\nadd a 10.0.0.0/8\n"))
	require.NoError(t, k.Exec("test", "a", "10.0.0.0/8"))
	err := k.Exec("test", "a", "10.0.0.1")
	assert.Equal(t, "10.0.0.1 is NOT in set a.", stderr(t, err), "no version prefix, as the binary prints it")
	var ce *command.Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, 1, ce.ExitCode)
	assert.Equal(t, "ipset "+ipsetsfake.Version+": "+ipsetsfake.MsgNotExist, stderr(t, k.Exec("test", "nope", "10.0.0.1")))
}

// The output of save restores into an empty kernel as the same sets.
func TestSaveRestores(t *testing.T) {
	k := ipsetsfake.New()
	require.NoError(t, restore(t, k, "create a hash:net family inet6 maxelem 7\nadd a fd00::/64\ncreate p bitmap:port range 1-9\nadd p 3\n"))
	saved := k.Save()
	again := ipsetsfake.New()
	require.NoError(t, restore(t, again, saved))
	assert.Equal(t, saved, again.Save())
}

func TestNilContext(t *testing.T) {
	k := ipsetsfake.New()
	//lint:ignore SA1012 a nil context is context.Background()
	_, err := k.Run(nil, nil, "ipset", "list", "-name")
	require.NoError(t, err)
}
