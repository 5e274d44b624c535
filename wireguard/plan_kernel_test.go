//go:build linux

package wireguard_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.zx2c4.com/wireguard/wgctrl"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/wireguard"
)

// loggedProvider is a provider whose devices log their writes as
// writeLog does: the device's making, its settings and each peer.
type loggedProvider struct {
	wireguard.Provider
	log *writeLog
}

func (p loggedProvider) Open(ctx context.Context, spec wireguard.DeviceSpec) (wireguard.Device, error) {
	d, err := p.Provider.Open(ctx, spec)
	if err != nil {
		return nil, err
	}
	p.log.note("+ device " + spec.Name)
	return loggedDevice{Device: d, log: p.log}, nil
}

type loggedDevice struct {
	wireguard.Device
	log *writeLog
}

func (d loggedDevice) Configure(ctx context.Context, cfg wireguard.DeviceConfig) error {
	if cfg.PrivateKey != nil || cfg.ListenPort != nil || cfg.FirewallMark != nil {
		d.log.note("~ device " + d.Name())
	}
	for _, p := range cfg.Peers {
		op := "+"
		switch {
		case p.Remove:
			op = "-"
		case p.UpdateOnly:
			op = "~"
		}
		d.log.note(op + " peer " + p.PublicKey.String())
	}
	return d.Device.Configure(ctx, cfg)
}

// TestKernelPlanProperties runs the device driver's plan property against
// the real kernel, IPv4 and IPv6, with the userspace device (this
// kernel's provider when it has no WireGuard module) in a namespace of its
// own: random clusters and random drift made through the device's control
// socket (as `wg set` would) and on its link; Plan writes nothing, Apply
// makes exactly its writes in its order, then Plan is empty, an Apply
// writes nothing and State is in sync.
func TestKernelPlanProperties(t *testing.T) {
	for _, fam := range ipfamily.All {
		t.Run(fam.String(), func(t *testing.T) {
			ns := kerneltest.NewNS(t)
			k, err := kernel.Open(ns.Path())
			require.NoError(t, err)
			t.Cleanup(func() { _ = k.Close() })
			rec := &writeLog{Kernel: k}
			name := uniqueName(t)
			o := wireguard.Options{Family: fam, Kernel: rec, Mode: wireguard.ModeUserspace, InterfaceName: name,
				FirewallMark: kMark, Table: kTable, HostMTU: 1500, KeyFile: filepath.Join(t.TempDir(), "wg.key"),
				NodeName: "self", PeerChunk: 3, EncryptHostTraffic: true, Clock: clock.NewFake(testTime),
				UserspaceProvider: loggedProvider{Provider: wireguard.NewUserspaceProvider(wireguard.UserspaceProviderOptions{Links: k, Doer: k}), log: rec}}
			m, err := wireguard.New(o)
			require.NoError(t, err)
			t.Cleanup(func() { _ = m.Close() })
			wg, err := wgctrl.New()
			require.NoError(t, err)
			t.Cleanup(func() { _ = wg.Close() })
			r := rand.New(rand.NewPCG(uint64(fam), 7))
			w := newPlanWorld(t, r, fam)
			ctx := context.Background()
			for round := range 6 {
				what := fmt.Sprintf("%s, round %d", fam, round)
				if round > 0 {
					w.change(m)
					if round%2 == 0 {
						kernelDrift(t, w, k, wg, name)
						m.QueueResync()
					}
				}
				plan, err := m.Plan(ctx)
				require.NoError(t, err, what)
				require.Empty(t, rec.take(), "%s: Plan wrote", what)
				_, err = m.Apply(ctx)
				require.NoError(t, err, what)
				l, err := k.LinkByName(ctx, name)
				require.NoError(t, err, what)
				require.Equal(t, planLines(t, plan, l.Index), rec.take(), "%s: Apply made other writes than its Plan:\n%v", what, plan)
				t.Logf("%s: %d writes planned and made", what, len(plan.Writes))

				after, err := m.Plan(ctx)
				require.NoError(t, err, what)
				require.True(t, after.Empty(), "%s: %v", what, after)
				_, err = m.Apply(ctx)
				require.NoError(t, err, what)
				require.Empty(t, rec.take(), "%s: an Apply whose Plan is empty wrote", what)
				st, err := m.State(ctx)
				require.NoError(t, err, what)
				assert.True(t, st.InSync(), "%s: %v", what, st)
			}
		})
	}
}

// kernelDrift changes the userspace device behind the Manager's back
// through its control socket, and its link.
func kernelDrift(t *testing.T, w *planWorld, k *kernel.Namespace, wg *wgctrl.Client, name string) {
	d, err := wg.Device(name)
	require.NoError(t, err)
	var cfg wgtypes.Config
	for _, p := range d.Peers {
		switch w.r.IntN(4) {
		case 0:
			cfg.Peers = append(cfg.Peers, wgtypes.PeerConfig{PublicKey: p.PublicKey, Remove: true})
		case 1:
			cfg.Peers = append(cfg.Peers, wgtypes.PeerConfig{PublicKey: p.PublicKey, UpdateOnly: true,
				Endpoint: &net.UDPAddr{IP: w.endpoint().AsSlice(), Port: 4000}})
		}
	}
	foreign := pubKey(t)
	cfg.Peers = append(cfg.Peers, wgtypes.PeerConfig{PublicKey: wgtypes.Key(foreign)})
	port := 4242 + w.r.IntN(100)
	cfg.ListenPort = &port
	require.NoError(t, wg.ConfigureDevice(name, cfg))
	l, err := k.LinkByName(context.Background(), name)
	require.NoError(t, err)
	require.NoError(t, k.SetLinkMTU(context.Background(), l.Index, 1300))
}
