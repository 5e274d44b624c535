//go:build linux

package proxy

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/dataplane"
)

// An interface without Ethernet headers (a TUN device), named as a host
// interface or matched as a pod's by its prefix, is refused for itself
// alone: one partial error each, naming it, no attachment; the other
// interfaces translate. In both attach modes.
func TestKernelProxyRefusesNonEthernetInterfaces(t *testing.T) {
	attachModes(t, testKernelProxyRefusesNonEthernetInterfaces)
}

func testKernelProxyRefusesNonEthernetInterfaces(t *testing.T, mode AttachMode) {
	r := newProxyRig(t)
	r.attach = mode
	ctx := context.Background()
	h1 := r.topo.Hosts[0]
	tuns := []string{"tun0", "vethtun"}
	for _, name := range tuns {
		for _, args := range [][]string{{"tuntap", "add", "dev", name, "mode", "tun"}, {"link", "set", name, "up"}} {
			out, err := h1.NS.Exec(ctx, "ip", args...)
			require.NoError(t, err, "%s", out)
		}
	}
	o := r.options()
	o.HostInterfaces = append(o.HostInterfaces, "tun0")
	p, err := New(o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Cleanup(ctx) })
	r.feed(t, p)
	p.OnUpdate(cluster.Service{Name: "default/web:http", Port: 80, ClusterIPs: []netip.Addr{clusterV4}, Backends: r.backends(false)})
	require.NoError(t, p.CompleteDeferredWork(ctx))
	_, err = p.Apply(ctx)
	var pe *dataplane.PartialError
	require.ErrorAs(t, err, &pe)
	assert.ErrorIs(t, err, ErrAttach)
	assert.Equal(t, len(tuns), pe.Failed, "%v", err)
	assert.ErrorContains(t, err, "not an Ethernet device")
	st := p.Status()
	for _, name := range tuns {
		assert.ErrorContains(t, err, name)
		assert.NotContains(t, st.Interfaces, name)
		_, serr := os.Stat(filepath.Join(r.pinDir, linksDir, "ingress_"+name))
		assert.True(t, errors.Is(serr, os.ErrNotExist), "%s is not attached: %v", name, serr)
	}
	assert.Contains(t, st.Interfaces, "eth0")
	assert.Contains(t, st.Interfaces, h1.Pods[0].HostVeth)
	assert.Len(t, spread(t, h1.Pods[0].NS, netip.AddrPortFrom(clusterV4, 80), 30), 3)
}
