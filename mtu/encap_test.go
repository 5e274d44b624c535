package mtu_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/mtu"
)

func TestOverhead(t *testing.T) {
	tests := []struct {
		encap  mtu.Encap
		v4, v6 int
	}{
		{mtu.IPIP, 20, 40},
		{mtu.VXLAN, 50, 70},
		{mtu.WireGuard, 60, 80},
		{mtu.Encap{Name: "geneve", V4: 58, V6: 78}, 58, 78},
	}
	for _, tc := range tests {
		t.Run(tc.encap.String(), func(t *testing.T) {
			assert.Equal(t, tc.v4, tc.encap.Overhead(false))
			assert.Equal(t, tc.v6, tc.encap.Overhead(true))
		})
	}
}

func TestPodMTU(t *testing.T) {
	const host = 1500
	aks := mtu.Encap{Name: "custom", V4: 100, V6: 120}
	tests := []struct {
		name string
		opts mtu.PodMTUOptions
		want int
	}{
		{"no encapsulation", mtu.PodMTUOptions{HostMTU: host}, host},
		{"ipip", mtu.PodMTUOptions{HostMTU: host, Encaps: []mtu.Encap{mtu.IPIP}}, host - mtu.IPIPOverheadV4},
		{"ipip over ipv6", mtu.PodMTUOptions{HostMTU: host, Encaps: []mtu.Encap{mtu.IPIP}, UnderlayIPv6: true}, host - mtu.IPIPOverheadV6},
		{"vxlan", mtu.PodMTUOptions{HostMTU: host, Encaps: []mtu.Encap{mtu.VXLAN}}, host - mtu.VXLANOverheadV4},
		{"vxlan over ipv6", mtu.PodMTUOptions{HostMTU: host, Encaps: []mtu.Encap{mtu.VXLAN}, UnderlayIPv6: true}, host - mtu.VXLANOverheadV6},
		{"wireguard", mtu.PodMTUOptions{HostMTU: host, Encaps: []mtu.Encap{mtu.WireGuard}}, host - mtu.WireGuardOverheadV4},
		{"wireguard over ipv6", mtu.PodMTUOptions{HostMTU: host, Encaps: []mtu.Encap{mtu.WireGuard}, UnderlayIPv6: true}, host - mtu.WireGuardOverheadV6},
		{"ipip+vxlan", mtu.PodMTUOptions{HostMTU: host, Encaps: []mtu.Encap{mtu.IPIP, mtu.VXLAN}}, host - mtu.VXLANOverheadV4},
		{"ipip+wireguard", mtu.PodMTUOptions{HostMTU: host, Encaps: []mtu.Encap{mtu.IPIP, mtu.WireGuard}}, host - mtu.WireGuardOverheadV4},
		{"vxlan+wireguard", mtu.PodMTUOptions{HostMTU: host, Encaps: []mtu.Encap{mtu.WireGuard, mtu.VXLAN}}, host - mtu.WireGuardOverheadV4},
		{"all three", mtu.PodMTUOptions{HostMTU: host, Encaps: []mtu.Encap{mtu.IPIP, mtu.VXLAN, mtu.WireGuard}}, host - mtu.WireGuardOverheadV4},
		{"all three over ipv6", mtu.PodMTUOptions{HostMTU: host, Encaps: []mtu.Encap{mtu.IPIP, mtu.VXLAN, mtu.WireGuard}, UnderlayIPv6: true}, host - mtu.WireGuardOverheadV6},
		{"custom encapsulation", mtu.PodMTUOptions{HostMTU: host, Encaps: []mtu.Encap{mtu.VXLAN, aks}}, host - aks.V4},
		{"extra without encapsulation", mtu.PodMTUOptions{HostMTU: host, Extra: 100}, host - 100},
		{"extra adds to the overhead", mtu.PodMTUOptions{HostMTU: host, Encaps: []mtu.Encap{mtu.WireGuard}, Extra: 100}, host - mtu.WireGuardOverheadV4 - 100},
		{"jumbo frames", mtu.PodMTUOptions{HostMTU: 9001, Encaps: []mtu.Encap{mtu.VXLAN}}, 9001 - mtu.VXLANOverheadV4},
		{"override wins", mtu.PodMTUOptions{HostMTU: host, Encaps: []mtu.Encap{mtu.VXLAN}, Override: 1400}, 1400},
		{"override above host", mtu.PodMTUOptions{HostMTU: host, Override: 9000}, 9000},
		{"override without host", mtu.PodMTUOptions{Override: 1300}, 1300},
		{"ipv6 pods at the minimum", mtu.PodMTUOptions{HostMTU: mtu.MinIPv6MTU + mtu.VXLANOverheadV4, Encaps: []mtu.Encap{mtu.VXLAN}, PodIPv6: true}, mtu.MinIPv6MTU},
		{"ipv4 pods at the minimum", mtu.PodMTUOptions{HostMTU: mtu.MinPodMTUIPv4 + mtu.IPIPOverheadV4, Encaps: []mtu.Encap{mtu.IPIP}}, mtu.MinPodMTUIPv4},
		{"capped at MaxMTU", mtu.PodMTUOptions{HostMTU: 65536}, mtu.MaxMTU},
		{"zero-overhead encapsulation", mtu.PodMTUOptions{HostMTU: host, Encaps: []mtu.Encap{{Name: "none"}}}, host},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := mtu.PodMTU(tc.opts)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestPodMTUErrors(t *testing.T) {
	tests := []struct {
		name    string
		opts    mtu.PodMTUOptions
		wantErr error
		also    error
	}{
		{"missing host MTU", mtu.PodMTUOptions{}, mtu.ErrInvalidOptions, nil},
		{"negative host MTU", mtu.PodMTUOptions{HostMTU: -1}, mtu.ErrInvalidOptions, nil},
		{"negative extra", mtu.PodMTUOptions{HostMTU: 1500, Extra: -1}, mtu.ErrInvalidOptions, nil},
		{"negative override", mtu.PodMTUOptions{HostMTU: 1500, Override: -1}, mtu.ErrInvalidOptions, mtu.ErrInvalidMTU},
		{"override below ipv4 floor", mtu.PodMTUOptions{HostMTU: 1500, Override: mtu.MinPodMTUIPv4 - 1}, mtu.ErrInvalidOptions, mtu.ErrInvalidMTU},
		{"override below ipv6 minimum", mtu.PodMTUOptions{HostMTU: 1500, Override: 1279, PodIPv6: true}, mtu.ErrInvalidOptions, mtu.ErrInvalidMTU},
		{"override above max", mtu.PodMTUOptions{Override: mtu.MaxMTU + 1}, mtu.ErrInvalidOptions, mtu.ErrInvalidMTU},
		{"negative v4 overhead", mtu.PodMTUOptions{HostMTU: 1500, Encaps: []mtu.Encap{{Name: "bad", V4: -1}}}, mtu.ErrInvalidOptions, nil},
		{"negative v6 overhead", mtu.PodMTUOptions{HostMTU: 1500, Encaps: []mtu.Encap{{Name: "bad", V6: -1}}}, mtu.ErrInvalidOptions, nil},
		{"huge overhead", mtu.PodMTUOptions{HostMTU: 1500, Encaps: []mtu.Encap{{Name: "bad", V4: mtu.MaxMTU + 1}}}, mtu.ErrInvalidOptions, nil},
		{"ipv6 pods below 1280", mtu.PodMTUOptions{HostMTU: mtu.MinIPv6MTU + mtu.VXLANOverheadV4 - 1, Encaps: []mtu.Encap{mtu.VXLAN}, PodIPv6: true}, mtu.ErrMTUTooSmall, nil},
		{"ipv6 pods, host below 1280", mtu.PodMTUOptions{HostMTU: 1200, PodIPv6: true}, mtu.ErrMTUTooSmall, nil},
		{"ipv4 pods below floor", mtu.PodMTUOptions{HostMTU: 600, Encaps: []mtu.Encap{mtu.WireGuard}}, mtu.ErrMTUTooSmall, nil},
		{"extra larger than host", mtu.PodMTUOptions{HostMTU: 1500, Extra: 1500}, mtu.ErrMTUTooSmall, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := mtu.PodMTU(tc.opts)
			require.ErrorIs(t, err, tc.wantErr)
			if tc.also != nil {
				require.ErrorIs(t, err, tc.also)
			}
			assert.Zero(t, got)
			if tc.wantErr == mtu.ErrMTUTooSmall {
				assert.NotErrorIs(t, err, mtu.ErrInvalidOptions, "a too-small result is not bad input")
			}
		})
	}
}

func TestPodMTUErrorMessageNamesTheCause(t *testing.T) {
	_, err := mtu.PodMTU(mtu.PodMTUOptions{HostMTU: 1300, Encaps: []mtu.Encap{mtu.IPIP, mtu.WireGuard}, PodIPv6: true})
	require.ErrorIs(t, err, mtu.ErrMTUTooSmall)
	assert.Contains(t, err.Error(), "wireguard")
	assert.Contains(t, err.Error(), "1280")
}
