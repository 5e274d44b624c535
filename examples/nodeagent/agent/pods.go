package agent

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/routetable"
)

// ClassLocalPod is the route class of the routes to local pods: the lowest
// of the agent's, so a pod's host route wins over any block route.
const ClassLocalPod routetable.RouteClass = 10

// PodUpdate is a message: a pod of this node, its host-side interface and
// its addresses. A later update for the same Key replaces it.
type PodUpdate struct {
	// Key is "namespace/name".
	Key string
	// Interface is the host side of the pod's veth.
	Interface string
	// IPs are the pod's addresses.
	IPs []netip.Addr
}

// PodRemove is a message: the pod is gone from this node.
type PodRemove struct {
	// Key is "namespace/name".
	Key string
}

// podRoutes is a dataplane.Manager that routes each local pod's addresses to
// its interface (a host route, scope link) through the family's route
// table. The routes of a pod whose interface does not exist yet are held by
// the table and written when it comes up.
type podRoutes struct {
	tables map[ipfamily.Family]*routetable.Table
	pods   map[string]PodUpdate
	// dirty are the interfaces whose routes must be declared again.
	dirty map[string]bool
}

func newPodRoutes(tables map[ipfamily.Family]*routetable.Table) *podRoutes {
	return &podRoutes{tables: tables, pods: map[string]PodUpdate{}, dirty: map[string]bool{}}
}

// Name implements dataplane.Named.
func (p *podRoutes) Name() string { return "pod-routes" }

// OnUpdate implements dataplane.Manager.
func (p *podRoutes) OnUpdate(msg any) {
	switch m := msg.(type) {
	case PodUpdate:
		if old, ok := p.pods[m.Key]; ok {
			p.dirty[old.Interface] = true
		}
		p.pods[m.Key] = m
		p.dirty[m.Interface] = true
	case PodRemove:
		if old, ok := p.pods[m.Key]; ok {
			p.dirty[old.Interface] = true
			delete(p.pods, m.Key)
		}
	}
}

// CompleteDeferredWork implements dataplane.Manager: it declares the routes
// of every interface whose pods changed.
func (p *podRoutes) CompleteDeferredWork(context.Context) error {
	var errs []error
	for iface := range p.dirty {
		for fam, tbl := range p.tables {
			var targets []routetable.Target
			for _, pod := range p.pods {
				if pod.Interface != iface {
					continue
				}
				for _, ip := range pod.IPs {
					if ipfamily.Of(ip) == fam {
						targets = append(targets, routetable.Target{CIDR: netip.PrefixFrom(ip, ip.BitLen())})
					}
				}
			}
			slices.SortFunc(targets, func(a, b routetable.Target) int { return a.CIDR.Addr().Compare(b.CIDR.Addr()) })
			targets = slices.CompactFunc(targets, func(a, b routetable.Target) bool { return a.CIDR == b.CIDR })
			if err := tbl.SetRoutes(ClassLocalPod, iface, targets); err != nil {
				errs = append(errs, fmt.Errorf("pod routes on %s: %w", iface, err))
			}
		}
		delete(p.dirty, iface)
	}
	return errors.Join(errs...)
}
