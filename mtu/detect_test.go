package mtu_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/mtu"
)

// nodeLinks is a typical node: two uplinks, loopback, pod veths and the
// devices of agents and runtimes, all up. (In the fake they are all veths:
// the Detector goes by name, state and MTU.)
func nodeLinks() []mtu.TestLink {
	return []mtu.TestLink{
		{Name: "lo", MTU: 65536, Up: true},
		{Name: "eth0", MTU: 9001, Up: true},
		{Name: "ens5", MTU: 1500, Up: true},
		{Name: "vethab12", MTU: 1450, Up: true},
		{Name: "cali1234", MTU: 1440, Up: true},
		{Name: "vxlan.calico", MTU: 1450, Up: true},
		{Name: "tunl0", MTU: 1480, Up: true},
		{Name: "wireguard.cali", MTU: 1440, Up: true},
		{Name: "docker0", MTU: 1500, Up: true},
		{Name: "kube-ipvs0", MTU: 1500, Up: true},
		{Name: "cilium_host", MTU: 1400, Up: true},
		{Name: "tailscale0", MTU: 1280, Up: true},
		{Name: "np-vxlan", MTU: 1400, Up: true},
	}
}

func TestDetect(t *testing.T) {
	defaults := mtu.DetectorOptions{Exclude: mtu.DefaultExclude()}
	tests := []struct {
		name  string
		links []mtu.TestLink
		opts  mtu.DetectorOptions
		want  mtu.HostMTU
	}{
		{
			name:  "default excludes leave the uplinks",
			links: nodeLinks(),
			opts:  defaults,
			want:  mtu.HostMTU{MTU: 1500, Interface: "ens5"},
		},
		{
			name:  "no filter: every link counts, pod veths and tunnels included",
			links: nodeLinks(),
			want:  mtu.HostMTU{MTU: 1280, Interface: "tailscale0"},
		},
		{
			name:  "include narrows",
			links: nodeLinks(),
			opts:  mtu.DetectorOptions{Include: []string{"^eth"}},
			want:  mtu.HostMTU{MTU: 9001, Interface: "eth0"},
		},
		{
			name:  "several includes are alternatives",
			links: nodeLinks(),
			opts:  mtu.DetectorOptions{Include: []string{"^eth", "^docker"}},
			want:  mtu.HostMTU{MTU: 1500, Interface: "docker0"},
		},
		{
			name:  "replaced excludes",
			links: nodeLinks(),
			opts:  mtu.DetectorOptions{Exclude: []string{"^lo$", "^veth", "^cali", "^tailscale"}},
			want:  mtu.HostMTU{MTU: 1400, Interface: "cilium_host"},
		},
		{
			name:  "exclude beats include",
			links: nodeLinks(),
			opts:  mtu.DetectorOptions{Include: []string{"^eth", "^ens"}, Exclude: []string{"^ens"}},
			want:  mtu.HostMTU{MTU: 9001, Interface: "eth0"},
		},
		{
			name:  "empty excludes exclude nothing",
			links: nodeLinks(),
			opts:  mtu.DetectorOptions{Exclude: []string{}},
			want:  mtu.HostMTU{MTU: 1280, Interface: "tailscale0"},
		},
		{
			name:  "extended defaults",
			links: nodeLinks(),
			opts:  mtu.DetectorOptions{Exclude: append(mtu.DefaultExclude(), "^ens")},
			want:  mtu.HostMTU{MTU: 9001, Interface: "eth0"},
		},
		{
			name: "down links are ignored",
			links: []mtu.TestLink{
				{Name: "eth0", MTU: 1500, Up: true},
				{Name: "eth1", MTU: 1280, Up: false},
			},
			want: mtu.HostMTU{MTU: 1500, Interface: "eth0"},
		},
		{
			name: "down links count with IncludeDown",
			links: []mtu.TestLink{
				{Name: "eth0", MTU: 1500, Up: true},
				{Name: "eth1", MTU: 1280, Up: false},
			},
			opts: mtu.DetectorOptions{IncludeDown: true},
			want: mtu.HostMTU{MTU: 1280, Interface: "eth1"},
		},
		{
			name: "ties go to the smallest name",
			links: []mtu.TestLink{
				{Name: "eth2", MTU: 1500, Up: true},
				{Name: "eth0", MTU: 1500, Up: true},
				{Name: "eth1", MTU: 1500, Up: true},
			},
			want: mtu.HostMTU{MTU: 1500, Interface: "eth0"},
		},
		{
			name:  "nothing matches",
			links: nodeLinks(),
			opts:  mtu.DetectorOptions{Include: []string{"^bond"}},
			want:  mtu.HostMTU{MTU: mtu.FallbackMTU, FellBack: true},
		},
		{
			name: "nothing matches, custom fallback",
			opts: mtu.DetectorOptions{Exclude: []string{"^lo$"}, Fallback: 1500},
			want: mtu.HostMTU{MTU: 1500, FellBack: true},
		},
		{
			name:  "only excluded links",
			links: []mtu.TestLink{{Name: "lo", MTU: 65536, Up: true}, {Name: "veth1", MTU: 1500, Up: true}},
			opts:  defaults,
			want:  mtu.HostMTU{MTU: mtu.FallbackMTU, FellBack: true},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ns := mtu.FakeNode(t, tc.links...)
			tc.opts.Kernel = ns
			d, err := mtu.NewDetector(tc.opts)
			require.NoError(t, err)
			assert.Zero(t, ns.Calls(kernelfake.OpLinks), "NewDetector does no I/O")
			got, err := d.Detect(context.Background())
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, 1, ns.Calls(kernelfake.OpLinks))
			assert.Zero(t, ns.Writes(), "the Detector only reads")

			// The order of the links does not matter.
			reversed := slices.Clone(tc.links)
			slices.Reverse(reversed)
			d, err = mtu.NewDetector(mtu.DetectorOptions{Kernel: mtu.FakeNode(t, reversed...), Include: tc.opts.Include,
				Exclude: tc.opts.Exclude, IncludeDown: tc.opts.IncludeDown, Fallback: tc.opts.Fallback})
			require.NoError(t, err)
			again, err := d.Detect(context.Background())
			require.NoError(t, err)
			assert.Equal(t, got, again)
		})
	}
}

func TestDetectorMatches(t *testing.T) {
	d, err := mtu.NewDetector(mtu.DetectorOptions{Include: []string{"^eth", "^ens"}, Kernel: mtu.FakeNode(t)})
	require.NoError(t, err)
	for _, name := range []string{"eth0", "ens5"} {
		assert.True(t, d.Matches(name), name)
	}
	for _, name := range []string{"lo", "veth0", "wlan0", ""} {
		assert.False(t, d.Matches(name), name)
	}

	all, err := mtu.NewDetector(mtu.DetectorOptions{Kernel: mtu.FakeNode(t), Exclude: mtu.DefaultExclude()})
	require.NoError(t, err)
	for _, name := range []string{"eth0", "bond0", "br0", "enp3s0f1", "eth0.100"} {
		assert.True(t, all.Matches(name), name)
	}
	for _, name := range []string{"lo", "veth12", "cali0", "vxlan.calico", "vxlan-v6.calico", "tunl0", "wireguard.cali", "wg0",
		"docker0", "br-0a1b", "cni0", "flannel.1", "cilium_vxlan", "lxc123", "kube-ipvs0", "nodelocaldns", "tailscale0", "np-vx"} {
		assert.False(t, all.Matches(name), name)
	}
}

func TestDefaultExcludeIsACopy(t *testing.T) {
	a := mtu.DefaultExclude()
	require.NotEmpty(t, a)
	assert.Contains(t, a, "^lo$")
	a[0] = "changed"
	assert.NotEqual(t, a[0], mtu.DefaultExclude()[0])
}

func TestNewDetectorErrors(t *testing.T) {
	ns := mtu.FakeNode(t)
	tests := []struct {
		name    string
		opts    mtu.DetectorOptions
		wantErr []error
	}{
		{"no kernel", mtu.DetectorOptions{}, []error{mtu.ErrInvalidOptions}},
		{"nil namespace", mtu.DetectorOptions{Kernel: (*kernelfake.Namespace)(nil)}, []error{mtu.ErrInvalidOptions}},
		{"bad include", mtu.DetectorOptions{Kernel: ns, Include: []string{"^eth("}}, []error{mtu.ErrInvalidOptions, mtu.ErrInvalidPattern}},
		{"bad exclude", mtu.DetectorOptions{Kernel: ns, Exclude: []string{"^lo$", "[z-a]"}}, []error{mtu.ErrInvalidOptions, mtu.ErrInvalidPattern}},
		{"negative fallback", mtu.DetectorOptions{Kernel: ns, Fallback: -1}, []error{mtu.ErrInvalidOptions, mtu.ErrInvalidMTU}},
		{"tiny fallback", mtu.DetectorOptions{Kernel: ns, Fallback: mtu.MinMTU - 1}, []error{mtu.ErrInvalidOptions, mtu.ErrInvalidMTU}},
		{"huge fallback", mtu.DetectorOptions{Kernel: ns, Fallback: mtu.MaxMTU + 1}, []error{mtu.ErrInvalidOptions, mtu.ErrInvalidMTU}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := mtu.NewDetector(tc.opts)
			assert.Nil(t, d)
			for _, want := range tc.wantErr {
				require.ErrorIs(t, err, want)
			}
		})
	}
	assert.Zero(t, ns.Calls(kernelfake.OpLinks))

	_, err := mtu.NewDetector(mtu.DetectorOptions{Kernel: ns, Include: []string{"ok", "^eth("}})
	assert.Contains(t, err.Error(), `"^eth("`, "the error names the bad pattern")
}

func TestDetectListFailure(t *testing.T) {
	ns := mtu.FakeNode(t, mtu.TestLink{Name: "eth0", MTU: 1500, Up: true})
	d, err := mtu.NewDetector(mtu.DetectorOptions{Kernel: ns, Include: []string{"^eth"}})
	require.NoError(t, err)

	boom := errors.New("netlink exploded")
	ns.Fail(kernelfake.OpLinks, 1, boom)
	got, err := d.Detect(context.Background())
	require.ErrorIs(t, err, mtu.ErrListLinks)
	require.ErrorIs(t, err, boom)
	assert.Zero(t, got)

	got, err = d.Detect(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 1500, got.MTU)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = d.Detect(ctx)
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, err, mtu.ErrListLinks)

	//lint:ignore SA1012 a nil context is documented to mean Background
	got, err = d.Detect(nil)
	require.NoError(t, err)
	assert.Equal(t, 1500, got.MTU)
}

func BenchmarkDetect1000Links(b *testing.B) {
	links := make([]mtu.TestLink, 0, 1000)
	prefixes := []string{"veth", "cali", "eth", "ens", "vxlan", "br-", "tunl", "lxc"}
	for i := range 1000 {
		links = append(links, mtu.TestLink{
			Name: fmt.Sprintf("%s%d", prefixes[i%len(prefixes)], i),
			MTU:  1400 + i%200,
			Up:   i%10 != 0,
		})
	}
	d, err := mtu.NewDetector(mtu.DetectorOptions{Kernel: mtu.FakeNode(b, links...), Exclude: mtu.DefaultExclude()})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.Detect(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
