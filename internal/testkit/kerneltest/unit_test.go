//go:build linux

package kerneltest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeTB records Skip and Fatal instead of ending the goroutine.
type fakeTB struct {
	testing.TB
	skipped, failed bool
	msg             string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Skip(args ...any) {
	f.skipped, f.msg = true, fmt.Sprint(args...)
}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed, f.msg = true, fmt.Sprintf(format, args...)
}

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestRequireKernelDecision(t *testing.T) {
	tests := []struct {
		name        string
		euid        int
		env         map[string]string
		wantSkip    bool
		wantFail    bool
		wantMention string
	}{
		{name: "root runs", euid: 0},
		{name: "root runs under CI", euid: 0, env: map[string]string{"CI": "true"}},
		{name: "non-root skips", euid: 1000, wantSkip: true, wantMention: "effective uid 1000"},
		{name: "non-root with CI=false skips", euid: 1000, env: map[string]string{"CI": "false"}, wantSkip: true, wantMention: "need root"},
		{name: "non-root with CI=true fails", euid: 1000, env: map[string]string{"CI": "true"}, wantFail: true, wantMention: "forbids skipping"},
		{name: "non-root with CI=1 fails", euid: 65534, env: map[string]string{"CI": "1"}, wantFail: true, wantMention: "effective uid 65534"},
		{name: "non-root with NODEPLANE_REQUIRE_KERNEL=1 fails", euid: 1000, env: map[string]string{EnvRequireKernel: "1"}, wantFail: true, wantMention: EnvRequireKernel},
		{name: "non-root with NODEPLANE_REQUIRE_KERNEL=0 skips", euid: 1000, env: map[string]string{EnvRequireKernel: "0"}, wantSkip: true, wantMention: "sudo"},
		{name: "garbage value does not force", euid: 1000, env: map[string]string{"CI": "yes please"}, wantSkip: true, wantMention: "need root"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeTB{}
			requireKernel(f, tt.euid, envOf(tt.env))
			assert.Equal(t, tt.wantSkip, f.skipped, "skipped")
			assert.Equal(t, tt.wantFail, f.failed, "failed")
			if tt.wantMention != "" {
				assert.Contains(t, f.msg, tt.wantMention)
			} else {
				assert.Empty(t, f.msg)
			}
		})
	}
}

func TestTopologyOptionsValidate(t *testing.T) {
	tests := []struct {
		name    string
		opts    TopologyOptions
		wantErr string
	}{
		{name: "bridge 1 host", opts: TopologyOptions{Hosts: 1}},
		{name: "bridge max hosts and pods", opts: TopologyOptions{Hosts: MaxHosts, PodsPerHost: MaxPodsPerHost}},
		{name: "veth 2 hosts ipv6", opts: TopologyOptions{Hosts: 2, Underlay: UnderlayVeth, Stack: IPv6Only}},
		{name: "custom prefix", opts: TopologyOptions{Hosts: 2, PodsPerHost: 3, PodIfacePrefix: "cali"}},
		{name: "zero hosts", opts: TopologyOptions{}, wantErr: "hosts 0 out of range"},
		{name: "negative hosts", opts: TopologyOptions{Hosts: -1}, wantErr: "hosts -1 out of range"},
		{name: "too many hosts", opts: TopologyOptions{Hosts: MaxHosts + 1}, wantErr: "out of range"},
		{name: "veth with 3 hosts", opts: TopologyOptions{Hosts: 3, Underlay: UnderlayVeth}, wantErr: "exactly 2 hosts"},
		{name: "veth with 1 host", opts: TopologyOptions{Hosts: 1, Underlay: UnderlayVeth}, wantErr: "exactly 2 hosts"},
		{name: "negative pods", opts: TopologyOptions{Hosts: 1, PodsPerHost: -2}, wantErr: "pods per host -2"},
		{name: "too many pods", opts: TopologyOptions{Hosts: 1, PodsPerHost: MaxPodsPerHost + 1}, wantErr: "pods per host"},
		{name: "unknown underlay", opts: TopologyOptions{Hosts: 1, Underlay: 9}, wantErr: "unknown underlay Underlay(9)"},
		{name: "unknown stack", opts: TopologyOptions{Hosts: 1, Stack: 7}, wantErr: "unknown stack Stack(7)"},
		{name: "prefix too long", opts: TopologyOptions{Hosts: 1, PodsPerHost: 100, PodIfacePrefix: "abcdefghijklm"}, wantErr: "longer than 15"},
		{name: "prefix with slash", opts: TopologyOptions{Hosts: 1, PodIfacePrefix: "a/b"}, wantErr: "not allowed"},
		{name: "prefix with space", opts: TopologyOptions{Hosts: 1, PodIfacePrefix: "a b"}, wantErr: "not allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.opts.Validate()
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrInvalid)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

func TestAddressPlan(t *testing.T) {
	tests := []struct{ host, pod int }{{1, 1}, {2, 7}, {10, 200}, {MaxHosts, MaxPodsPerHost}}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("host%d-pod%d", tt.host, tt.pod), func(t *testing.T) {
			u4, u6, err := UnderlayPrefixes(tt.host)
			require.NoError(t, err)
			assert.Equal(t, fmt.Sprintf("198.18.0.%d/24", tt.host), u4.String())
			assert.Equal(t, fmt.Sprintf("fd00:198:18::%x/64", tt.host), u6.String())

			c4, c6, err := PodCIDRs(tt.host)
			require.NoError(t, err)
			assert.Equal(t, fmt.Sprintf("10.244.%d.0/24", tt.host), c4.String())
			assert.Equal(t, fmt.Sprintf("fd00:10:244:%x::/64", tt.host), c6.String())

			p4, p6, err := PodAddrs(tt.host, tt.pod)
			require.NoError(t, err)
			assert.Equal(t, fmt.Sprintf("10.244.%d.%d", tt.host, tt.pod), p4.String())
			assert.Equal(t, fmt.Sprintf("fd00:10:244:%x::%x", tt.host, tt.pod), p6.String())
			assert.True(t, c4.Contains(p4), "pod IPv4 in pod CIDR")
			assert.True(t, c6.Contains(p6), "pod IPv6 in pod CIDR")
			assert.True(t, u4.Masked().Contains(u4.Addr()) && u6.Masked().Contains(u6.Addr()))
		})
	}
}

func TestAddressPlanRejectsOutOfRange(t *testing.T) {
	tests := []struct{ host, pod int }{{0, 1}, {-1, 1}, {MaxHosts + 1, 1}, {1, 0}, {1, -5}, {1, MaxPodsPerHost + 1}}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("host%d-pod%d", tt.host, tt.pod), func(t *testing.T) {
			p4, p6, err := PodAddrs(tt.host, tt.pod)
			require.ErrorIs(t, err, ErrInvalid)
			assert.False(t, p4.IsValid() || p6.IsValid(), "no address on error")
			if tt.pod == 1 {
				u4, u6, err := UnderlayPrefixes(tt.host)
				require.ErrorIs(t, err, ErrInvalid)
				assert.False(t, u4.IsValid() || u6.IsValid())
				c4, c6, err := PodCIDRs(tt.host)
				require.ErrorIs(t, err, ErrInvalid)
				assert.False(t, c4.IsValid() || c6.IsValid())
			}
		})
	}
}

func TestSysctlPath(t *testing.T) {
	tests := []struct {
		key, want string
	}{
		{key: "net.ipv4.ip_forward", want: "/proc/sys/net/ipv4/ip_forward"},
		{key: "net/ipv6/conf/eth0.100/forwarding", want: "/proc/sys/net/ipv6/conf/eth0.100/forwarding"},
		{key: "/net/ipv4/ip_forward/", want: "/proc/sys/net/ipv4/ip_forward"},
		{key: "kernel.hostname"},
		{key: "vm/swappiness"},
		{key: "net"},
		{key: ""},
		{key: "net/../kernel/hostname"},
		{key: "net/ipv4//ip_forward"},
		{key: "net..ipv4"},
		{key: "net/./ipv4"},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			got, err := sysctlPath(tt.key)
			if tt.want == "" {
				require.ErrorIs(t, err, ErrInvalid)
				assert.Empty(t, got)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestPingUnreachable(t *testing.T) {
	tests := []struct {
		name   string
		code   int
		stderr string
		want   bool
	}{
		{name: "no reply", code: 1, want: true},
		{name: "network unreachable", code: 2, stderr: "ping: connect: Network is unreachable", want: true},
		{name: "no route", code: 2, stderr: "ping: connect: No route to host", want: true},
		{name: "local firewall", code: 2, stderr: "ping: sendmsg: Operation not permitted", want: true},
		{name: "bad usage", code: 2, stderr: "ping: invalid argument: 'x'"},
		{name: "socket permission", code: 2, stderr: "ping: socket: Operation not permitted"},
		{name: "killed", code: -1},
		{name: "success", code: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, pingUnreachable(tt.code, []byte(tt.stderr)))
		})
	}
}

func TestTCPUnreachable(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{name: "refused", err: fmt.Errorf("dial: %w", syscall.ECONNREFUSED), want: true},
		{name: "no route", err: fmt.Errorf("dial: %w", syscall.EHOSTUNREACH), want: true},
		{name: "network unreachable", err: syscall.ENETUNREACH, want: true},
		{name: "deadline", err: fmt.Errorf("dial: %w", context.DeadlineExceeded), want: true},
		{name: "peer closed", err: fmt.Errorf("read: %w", io.ErrUnexpectedEOF), want: true},
		{name: "other error", err: errors.New("echo mismatch")},
		{name: "closed namespace", err: ErrClosed},
		{name: "canceled", err: context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tcpUnreachable(tt.err))
		})
	}
}

func TestNot(t *testing.T) {
	harness := errors.New("ping binary missing")
	tests := []struct {
		name     string
		inner    error
		wantErr  bool
		wantSame bool
	}{
		{name: "unreachable passes", inner: fmt.Errorf("%w: no reply", ErrUnreachable)},
		{name: "reachable fails", inner: nil, wantErr: true},
		{name: "harness error passes through", inner: harness, wantErr: true, wantSame: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Not(Check{Name: "probe", Run: func(context.Context) error { return tt.inner }})
			assert.Equal(t, "not probe", c.Name)
			err := c.Run(t.Context())
			if !tt.wantErr {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.NotErrorIs(t, err, ErrUnreachable)
			if tt.wantSame {
				assert.ErrorIs(t, err, harness)
			} else {
				assert.Contains(t, err.Error(), "probe succeeded")
			}
		})
	}
}

func TestEventually(t *testing.T) {
	tests := []struct {
		name      string
		failures  int // attempts that fail before passing; -1 never passes
		wantErr   bool
		minCalls  int
		timeout   time.Duration
		errString string
	}{
		{name: "passes at once", failures: 0, minCalls: 1, timeout: time.Second},
		{name: "passes after retries", failures: 3, minCalls: 4, timeout: 10 * time.Second},
		{name: "never passes", failures: -1, wantErr: true, minCalls: 1, timeout: 150 * time.Millisecond, errString: "attempt failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			c := Check{Name: "counter", Run: func(ctx context.Context) error {
				calls++
				if _, ok := ctx.Deadline(); !ok {
					return errors.New("attempt without deadline")
				}
				if tt.failures < 0 || calls <= tt.failures {
					return errors.New("attempt failed")
				}
				return nil
			}}
			err := eventually(t.Context(), tt.timeout, c)
			if tt.wantErr {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.errString)
			} else {
				require.NoError(t, err)
			}
			assert.GreaterOrEqual(t, calls, tt.minCalls)
			if !tt.wantErr {
				assert.Equal(t, tt.failures+1, calls)
			}
		})
	}
}

func TestLookPath(t *testing.T) {
	tests := []struct {
		name    string
		cmd     string
		wantErr error
	}{
		{name: "in PATH", cmd: "sh"},
		{name: "explicit path", cmd: "/bin/sh"},
		{name: "missing", cmd: "npt-no-such-binary", wantErr: exec.ErrNotFound},
		{name: "empty", cmd: "", wantErr: ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := lookPath(tt.cmd)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.True(t, strings.HasSuffix(p, "/sh"), p)
		})
	}
}

func TestLookPathFallsBackToSbin(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	p, err := lookPath("sh")
	require.NoError(t, err)
	assert.Contains(t, sbinDirs, strings.TrimSuffix(p, "/sh"))
}

func TestEnumStrings(t *testing.T) {
	tests := []struct {
		v    fmt.Stringer
		want string
	}{
		{UnderlayBridge, "bridge"}, {UnderlayVeth, "veth"}, {Underlay(5), "Underlay(5)"},
		{DualStack, "dual"}, {IPv4Only, "ipv4"}, {IPv6Only, "ipv6"}, {Stack(9), "Stack(9)"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, tt.v.String())
	}
	for _, tt := range []struct {
		s        Stack
		v4, v6   bool
		addrsLen int
	}{{DualStack, true, true, 2}, {IPv4Only, true, false, 1}, {IPv6Only, false, true, 1}, {Stack(9), false, false, 0}} {
		assert.Equal(t, tt.v4, tt.s.IPv4(), tt.s)
		assert.Equal(t, tt.v6, tt.s.IPv6(), tt.s)
		p := &Pod{}
		if tt.v4 {
			p.IPv4 = netip.MustParseAddr("10.244.1.1")
		}
		if tt.v6 {
			p.IPv6 = netip.MustParseAddr("fd00:10:244:1::1")
		}
		assert.Len(t, p.Addrs(), tt.addrsLen)
	}
}
