package policy

import (
	"errors"
	"fmt"
	"slices"

	"github.com/nodeplane/nodeplane/netfilter"
)

// untrackedUses reports whether a host endpoint's untracked tiers list
// policy id.
func (m *Manager) untrackedUses(id string) bool {
	for _, h := range m.model.HostEndpoints() {
		for _, t := range h.UntrackedTiers {
			if slices.Contains(t.Ingress, id) || slices.Contains(t.Egress, id) {
				return true
			}
		}
	}
	return false
}

// declareRawPolicy declares policy id's chains in Raw, where a deny drops.
func (m *Manager) declareRawPolicy(id string, in, out []Rule) error {
	chains, _ := m.rawRender.policyChains(id, in, out, false)
	if err := m.o.Raw.SetChains(chains...); err != nil {
		return fmt.Errorf("policy: %s in the raw table: %w", id, err)
	}
	return nil
}

// declareHost declares the chains of host endpoint id (in Filter, and in
// Raw when there is one), removing those of the interface it had before
// (old) when it moved or went. A host endpoint with pre-DNAT tiers is
// refused (not rendered yet), one with untracked tiers without Raw too.
func (m *Manager) declareHost(id string, old HostEndpoint) error {
	h, ok := m.model.HostEndpoint(id)
	var errs []error
	if old.Iface != "" && (!ok || old.Iface != h.Iface) {
		var names []string
		for _, c := range m.render.hostChains(m.model, old) {
			names = append(names, c.Name)
		}
		errs = append(errs, m.o.Filter.RemoveChains(names...))
		if m.o.Raw != nil {
			names = names[:0]
			for _, c := range m.rawRender.untrackedChains(m.model, old) {
				names = append(names, c.Name)
			}
			errs = append(errs, m.o.Raw.RemoveChains(names...))
		}
		delete(m.renderedHosts, id)
	}
	if !ok {
		delete(m.renderedHosts, id)
		return errors.Join(errs...)
	}
	switch {
	case len(h.PreDNATTiers) > 0:
		delete(m.renderedHosts, id)
		return errors.Join(append(errs, fmt.Errorf("%w %s: pre-DNAT tiers are not rendered yet", ErrInvalidEndpoint, id))...)
	case len(h.UntrackedTiers) > 0 && m.o.Raw == nil:
		delete(m.renderedHosts, id)
		return errors.Join(append(errs, fmt.Errorf("%w %s: untracked tiers need Options.Raw", ErrInvalidEndpoint, id))...)
	}
	if err := m.o.Filter.SetChains(m.render.hostChains(m.model, h)...); err != nil {
		delete(m.renderedHosts, id)
		return errors.Join(append(errs, fmt.Errorf("policy: host endpoint %s: %w", id, err))...)
	}
	if m.o.Raw != nil {
		for _, t := range h.UntrackedTiers {
			for _, pid := range slices.Concat(t.Ingress, t.Egress) {
				if p, ok := m.model.Policy(pid); ok {
					errs = append(errs, m.declareRawPolicy(pid, p.Ingress, p.Egress))
				}
			}
		}
		if err := m.o.Raw.SetChains(m.rawRender.untrackedChains(m.model, h)...); err != nil {
			errs = append(errs, fmt.Errorf("policy: host endpoint %s: untracked: %w", id, err))
		}
	}
	m.renderedHosts[id] = h
	return errors.Join(errs...)
}

// declareRawDispatch declares the raw table's dispatch of untracked host
// traffic by interface, and removes its dispatch chains no longer used.
func (m *Manager) declareRawDispatch(hosts []string, fallback func(kind string) netfilter.Rule) error {
	chains := slices.Concat(
		m.rawRender.dispatch(chainToHostRaw, kindToHostUntracked, hosts, true, fallback(kindToHostUntracked)),
		m.rawRender.dispatch(chainFromHostRaw, kindFromHostUntracked, hosts, false, fallback(kindFromHostUntracked)))
	var names, gone []string
	for _, c := range chains {
		names = append(names, c.Name)
	}
	for _, n := range m.rawDispatch {
		if !slices.Contains(names, n) {
			gone = append(gone, n)
		}
	}
	if err := m.o.Raw.SetChains(chains...); err != nil {
		return fmt.Errorf("policy: untracked dispatch: %w", err)
	}
	m.rawDispatch = names
	if len(gone) > 0 {
		return m.o.Raw.RemoveChains(gone...)
	}
	return nil
}
