package agent

import (
	"context"
	"log/slog"
	"reflect"
	"time"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/wireguard"
)

// DefaultPublishTimeout bounds each of the agent's Publish calls: a
// datastore that does not answer holds back no other publication.
const DefaultPublishTimeout = 10 * time.Second

// The waits before a failed publication is tried again: the first, doubled
// after each failure up to the last.
const (
	publishRetryMin = time.Second
	publishRetryMax = time.Minute
)

// publisher keeps on the datastore what this node tells the others: the
// MACs of its VXLAN devices (VXLAN overlays) and the public keys of its
// WireGuard devices, one per family. It publishes what the datastore does
// not show on this node: when it learns a key, and whenever the node as
// the datastore shows it changes (a Node deleted and created again,
// annotations removed); a failed publication is tried again with
// backoff, and each call is bounded by a timeout. It needs the datastore
// to list this node: there is nothing to publish on before.
type publisher struct {
	ds   datastore.Datastore
	node string
	// vxlan publishes the VTEP MACs.
	vxlan   bool
	clock   clock.Clock
	timeout time.Duration
	// retryMin and retryMax bound the backoff.
	retryMin, retryMax time.Duration
	log                *slog.Logger
	// onError records a failed publication (for the status).
	onError func(error)
	// keys, keysV6 and nodes hold the latest IPv4 and IPv6 keys and view
	// of this node, each written by one goroutine that never waits.
	keys, keysV6 chan wireguard.PublicKey
	nodes        chan selfNode
}

// selfNode is this node as the datastore shows it; listed is false when it
// does not list it.
type selfNode struct {
	node   datastore.Node
	listed bool
}

func newPublisher(ds datastore.Datastore, node string, vxlan bool, log *slog.Logger, onError func(error)) *publisher {
	return &publisher{ds: ds, node: node, vxlan: vxlan, clock: clock.Real(), timeout: DefaultPublishTimeout,
		retryMin: publishRetryMin, retryMax: publishRetryMax, log: log, onError: onError,
		keys: make(chan wireguard.PublicKey, 1), keysV6: make(chan wireguard.PublicKey, 1), nodes: make(chan selfNode, 1)}
}

// replace puts v in ch, a channel of one, in place of what it holds; only
// one goroutine may call it for ch, and it never waits.
func replace[T any](ch chan T, v T) {
	select {
	case <-ch:
	default:
	}
	ch <- v
}

// key hands the publisher the public key of this node's WireGuard device
// of family f. From that family's WireGuard manager, on the loop's
// goroutine.
func (p *publisher) key(f ipfamily.Family, k wireguard.PublicKey) {
	if f == ipfamily.IPv6 {
		replace(p.keysV6, k)
		return
	}
	replace(p.keys, k)
}

// observe hands the publisher this node as c shows it. From the
// datastore's goroutine.
func (p *publisher) observe(c datastore.Cluster) {
	n, ok := c.Node(p.node)
	replace(p.nodes, selfNode{node: n, listed: ok})
}

// run publishes until ctx ends.
func (p *publisher) run(ctx context.Context) {
	var (
		self       selfNode
		key, keyV6 wireguard.PublicKey
		dirty      bool
		retry      clock.Timer
		retryC     <-chan time.Time
		wait       = p.retryMin
	)
	defer func() {
		if retry != nil {
			retry.Stop()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case k := <-p.keys:
			dirty = dirty || k != key
			key = k
		case k := <-p.keysV6:
			dirty = dirty || k != keyV6
			keyV6 = k
		case n := <-p.nodes:
			dirty = dirty || !reflect.DeepEqual(n, self)
			self = n
		case <-retryC:
			retryC, dirty = nil, true
		}
		if !dirty || retryC != nil {
			continue // nothing new, or a backoff to wait out: its retry publishes what is pending then
		}
		dirty = false
		info, ok := p.pending(self, key, keyV6)
		if !ok {
			wait = p.retryMin
			continue
		}
		if err := p.publish(ctx, info); err != nil {
			if ctx.Err() != nil {
				return
			}
			p.log.Warn("publish failed; retrying", "err", err, "in", wait)
			p.onError(err)
			if retry == nil {
				retry = p.clock.NewTimer(wait)
			} else {
				retry.Reset(wait)
			}
			retryC = retry.C()
			wait = min(2*wait, p.retryMax)
			continue
		}
		wait = p.retryMin
		p.log.Info("published this node's details", "vtepMAC", info.VTEPMAC.String(), "vtepMACv6", info.VTEPMACV6.String(),
			"wireguardKey", !info.WireGuardKey.IsZero(), "wireguardKeyV6", !info.WireGuardKeyV6.IsZero())
	}
}

// pending returns what the datastore does not show on this node yet: the
// VTEP MACs the agent's devices use (with a VXLAN overlay, for the tunnels
// the node has) where the node shows none, and each WireGuard key (key for
// the IPv4 device, keyV6 for the IPv6 one) where the node shows another.
// ok is false when there is nothing to publish, or no node to publish on.
func (p *publisher) pending(s selfNode, key, keyV6 wireguard.PublicKey) (info datastore.NodeInfo, ok bool) {
	if !s.listed {
		return datastore.NodeInfo{}, false
	}
	info.Name = p.node
	if p.vxlan {
		v := nodeOf(s.node)
		if len(s.node.VTEPMAC) == 0 {
			info.VTEPMAC = v.VXLANMACV4.HardwareAddr()
		}
		if len(s.node.VTEPMACV6) == 0 {
			info.VTEPMACV6 = v.VXLANMACV6.HardwareAddr()
		}
	}
	if !key.IsZero() && s.node.WireGuardPublicKey != key.String() {
		info.WireGuardKey = key
	}
	if !keyV6.IsZero() && s.node.WireGuardPublicKeyV6 != keyV6.String() {
		info.WireGuardKeyV6 = keyV6
	}
	return info, len(info.VTEPMAC) > 0 || len(info.VTEPMACV6) > 0 || !info.WireGuardKey.IsZero() || !info.WireGuardKeyV6.IsZero()
}

// publish makes one Publish call, bounded by the timeout.
func (p *publisher) publish(ctx context.Context, info datastore.NodeInfo) error {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	return p.ds.Publish(ctx, info)
}
