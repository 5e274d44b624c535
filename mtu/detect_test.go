package mtu_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/mtu"
)

// nodeLinks is a typical node: two uplinks, loopback, pod veths and the
// devices of agents and runtimes, all up.
func nodeLinks() []mtu.Link {
	return []mtu.Link{
		{Name: "lo", Index: 1, MTU: 65536, Up: true, Type: "device"},
		{Name: "eth0", Index: 2, MTU: 9001, Up: true, Type: "device"},
		{Name: "ens5", Index: 3, MTU: 1500, Up: true, Type: "device"},
		{Name: "vethab12", Index: 4, MTU: 1450, Up: true, Type: "veth"},
		{Name: "cali1234", Index: 5, MTU: 1440, Up: true, Type: "veth"},
		{Name: "vxlan.calico", Index: 6, MTU: 1450, Up: true, Type: "vxlan"},
		{Name: "tunl0", Index: 7, MTU: 1480, Up: true, Type: "ipip"},
		{Name: "wireguard.cali", Index: 8, MTU: 1440, Up: true, Type: "wireguard"},
		{Name: "docker0", Index: 9, MTU: 1500, Up: true, Type: "bridge"},
		{Name: "kube-ipvs0", Index: 10, MTU: 1500, Up: true, Type: "dummy"},
		{Name: "cilium_host", Index: 11, MTU: 1400, Up: true, Type: "veth"},
		{Name: "tailscale0", Index: 12, MTU: 1280, Up: true, Type: "tun"},
		{Name: "np-vxlan", Index: 13, MTU: 1400, Up: true, Type: "vxlan"},
	}
}

func TestDetect(t *testing.T) {
	tests := []struct {
		name      string
		links     []mtu.Link
		opts      mtu.DetectorOptions
		want      mtu.HostMTU
		wantCalls int
	}{
		{
			name:  "default excludes leave the uplinks",
			links: nodeLinks(),
			want:  mtu.HostMTU{MTU: 1500, Interface: "ens5"},
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
			opts:  mtu.DetectorOptions{Include: []string{"^eth", "^docker"}, Exclude: []string{}},
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
			links: []mtu.Link{
				{Name: "eth0", MTU: 1500, Up: true},
				{Name: "eth1", MTU: 1280, Up: false},
			},
			want: mtu.HostMTU{MTU: 1500, Interface: "eth0"},
		},
		{
			name: "down links count with IncludeDown",
			links: []mtu.Link{
				{Name: "eth0", MTU: 1500, Up: true},
				{Name: "eth1", MTU: 1280, Up: false},
			},
			opts: mtu.DetectorOptions{IncludeDown: true},
			want: mtu.HostMTU{MTU: 1280, Interface: "eth1"},
		},
		{
			name: "ties go to the smallest name",
			links: []mtu.Link{
				{Name: "eth2", MTU: 1500, Up: true},
				{Name: "eth0", MTU: 1500, Up: true},
				{Name: "eth1", MTU: 1500, Up: true},
			},
			want: mtu.HostMTU{MTU: 1500, Interface: "eth0"},
		},
		{
			name:  "links with no MTU are ignored",
			links: []mtu.Link{{Name: "eth0", MTU: 0, Up: true}, {Name: "eth1", MTU: -5, Up: true}, {Name: "eth2", MTU: 1500, Up: true}},
			want:  mtu.HostMTU{MTU: 1500, Interface: "eth2"},
		},
		{
			name:  "nothing matches",
			links: nodeLinks(),
			opts:  mtu.DetectorOptions{Include: []string{"^bond"}},
			want:  mtu.HostMTU{MTU: mtu.FallbackMTU, FellBack: true},
		},
		{
			name: "nothing matches, custom fallback",
			opts: mtu.DetectorOptions{Fallback: 1500},
			want: mtu.HostMTU{MTU: 1500, FellBack: true},
		},
		{
			name:  "only excluded links",
			links: []mtu.Link{{Name: "lo", MTU: 65536, Up: true}, {Name: "veth1", MTU: 1500, Up: true}},
			want:  mtu.HostMTU{MTU: mtu.FallbackMTU, FellBack: true},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lister := mtu.NewFakeLister(tc.links...)
			tc.opts.Lister = lister
			d, err := mtu.NewDetector(tc.opts)
			require.NoError(t, err)
			assert.Zero(t, lister.Calls(), "NewDetector does no I/O")
			got, err := d.Detect(context.Background())
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, 1, lister.Calls())

			// The order of the listing does not matter.
			reversed := slices.Clone(tc.links)
			slices.Reverse(reversed)
			lister.SetLinks(reversed...)
			again, err := d.Detect(context.Background())
			require.NoError(t, err)
			assert.Equal(t, got, again)
		})
	}
}

func TestDetectorMatches(t *testing.T) {
	d, err := mtu.NewDetector(mtu.DetectorOptions{Include: []string{"^eth", "^ens"}, Lister: mtu.NewFakeLister()})
	require.NoError(t, err)
	for _, name := range []string{"eth0", "ens5"} {
		assert.True(t, d.Matches(name), name)
	}
	for _, name := range []string{"lo", "veth0", "wlan0", ""} {
		assert.False(t, d.Matches(name), name)
	}

	all, err := mtu.NewDetector(mtu.DetectorOptions{Lister: mtu.NewFakeLister()})
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
	lister := mtu.NewFakeLister()
	tests := []struct {
		name    string
		opts    mtu.DetectorOptions
		wantErr []error
	}{
		{"no lister", mtu.DetectorOptions{}, []error{mtu.ErrInvalid}},
		{"bad include", mtu.DetectorOptions{Lister: lister, Include: []string{"^eth("}}, []error{mtu.ErrInvalid, mtu.ErrInvalidPattern}},
		{"bad exclude", mtu.DetectorOptions{Lister: lister, Exclude: []string{"^lo$", "[z-a]"}}, []error{mtu.ErrInvalid, mtu.ErrInvalidPattern}},
		{"negative fallback", mtu.DetectorOptions{Lister: lister, Fallback: -1}, []error{mtu.ErrInvalid, mtu.ErrInvalidMTU}},
		{"tiny fallback", mtu.DetectorOptions{Lister: lister, Fallback: mtu.MinMTU - 1}, []error{mtu.ErrInvalid, mtu.ErrInvalidMTU}},
		{"huge fallback", mtu.DetectorOptions{Lister: lister, Fallback: mtu.MaxMTU + 1}, []error{mtu.ErrInvalid, mtu.ErrInvalidMTU}},
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
	assert.Zero(t, lister.Calls())

	_, err := mtu.NewDetector(mtu.DetectorOptions{Lister: lister, Include: []string{"ok", "^eth("}})
	assert.Contains(t, err.Error(), `"^eth("`, "the error names the bad pattern")
}

func TestDetectListerFailure(t *testing.T) {
	lister := mtu.NewFakeLister(mtu.Link{Name: "eth0", MTU: 1500, Up: true})
	d, err := mtu.NewDetector(mtu.DetectorOptions{Lister: lister})
	require.NoError(t, err)

	boom := errors.New("netlink exploded")
	lister.SetError(boom)
	got, err := d.Detect(context.Background())
	require.ErrorIs(t, err, mtu.ErrListLinks)
	require.ErrorIs(t, err, boom)
	assert.Zero(t, got)

	lister.SetError(nil)
	got, err = d.Detect(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 1500, got.MTU)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = d.Detect(ctx)
	require.ErrorIs(t, err, context.Canceled)

	//lint:ignore SA1012 a nil context is documented to mean Background
	got, err = d.Detect(nil)
	require.NoError(t, err)
	assert.Equal(t, 1500, got.MTU)
}

func TestFakeLister(t *testing.T) {
	f := mtu.NewFakeLister(mtu.Link{Name: "eth0", MTU: 1500})
	require.NoError(t, f.SetMTU("eth0", 9000))
	require.NoError(t, f.SetUp("eth0", true))
	require.Error(t, f.SetMTU("eth9", 1))
	require.Error(t, f.SetUp("eth9", true))
	links, err := f.Links(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []mtu.Link{{Name: "eth0", MTU: 9000, Up: true}}, links)
	links[0].MTU = 1 // a copy
	links, err = f.Links(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 9000, links[0].MTU)
	assert.Equal(t, 2, f.Calls())

	var zero mtu.FakeLister
	links, err = zero.Links(context.Background())
	require.NoError(t, err)
	assert.Empty(t, links)
}

func BenchmarkDetect1000Links(b *testing.B) {
	links := make([]mtu.Link, 0, 1000)
	prefixes := []string{"veth", "cali", "eth", "ens", "vxlan", "br-", "tunl", "lxc"}
	for i := range 1000 {
		links = append(links, mtu.Link{
			Name:  fmt.Sprintf("%s%d", prefixes[i%len(prefixes)], i),
			Index: i + 1,
			MTU:   1400 + i%200,
			Up:    i%10 != 0,
		})
	}
	d, err := mtu.NewDetector(mtu.DetectorOptions{Lister: mtu.NewFakeLister(links...)})
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
