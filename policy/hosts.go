package policy

import (
	"errors"
	"fmt"
	"slices"

	"github.com/nodeplane/nodeplane/netfilter"
)

// early is a table that sees host endpoints' packets before the filter
// table does: Raw, before connection tracking (untracked tiers), or
// Mangle, before destination NAT (pre-DNAT tiers). Each holds copies of
// the policies its tiers use, the endpoints' chains and a dispatch by
// interface; a deny there drops (REJECT is the filter table's).
type early struct {
	what   string // "untracked" or "pre-DNAT", in errors
	table  netfilter.Table
	render renderer
	// tiers are a host endpoint's tiers this table renders.
	tiers func(HostEndpoint) []TierPolicies
	// chains are a host endpoint's chains here.
	chains func(r *renderer, m *Model, h HostEndpoint) []netfilter.Chain
	// roots are the dispatch chains: root name, endpoint chain kind and
	// whether it dispatches by input interface.
	roots []earlyRoot
	// dispatch are the names of the dispatch chains declared.
	dispatch []string
}

type earlyRoot struct {
	name, kind string
	in         bool
}

// newEarly returns the early tables opts configure.
func newEarly(opts Options, r renderer) []*early {
	r.deny = netfilter.Drop()
	var out []*early
	if opts.Raw != nil {
		out = append(out, &early{what: "untracked", table: opts.Raw, render: r,
			tiers:  func(h HostEndpoint) []TierPolicies { return h.UntrackedTiers },
			chains: (*renderer).untrackedChains,
			roots:  []earlyRoot{{chainToHostRaw, kindToHostUntracked, true}, {chainFromHostRaw, kindFromHostUntracked, false}},
		})
	}
	if opts.Mangle != nil {
		out = append(out, &early{what: "pre-DNAT", table: opts.Mangle, render: r,
			tiers:  func(h HostEndpoint) []TierPolicies { return h.PreDNATTiers },
			chains: (*renderer).preDNATChains,
			roots:  []earlyRoot{{chainToHostPreDNAT, kindToHostPreDNAT, true}},
		})
	}
	return out
}

// uses reports whether a host endpoint's tiers of this table list policy
// id.
func (e *early) uses(m *Model, id string) bool {
	for _, h := range m.HostEndpoints() {
		for _, t := range e.tiers(h) {
			if slices.Contains(t.Ingress, id) || slices.Contains(t.Egress, id) {
				return true
			}
		}
	}
	return false
}

// declarePolicy declares policy id's chains here when a host endpoint's
// tiers use it (exists), and removes them otherwise. A policy the table
// refuses drops every packet it sees (fail closed).
func (e *early) declarePolicy(m *Model, id string, in, out []Rule, exists bool) error {
	chains, _ := e.render.policyChains(id, in, out, false)
	if !exists || !e.uses(m, id) {
		return e.table.RemoveChains(chains[0].Name, chains[1].Name)
	}
	err := e.table.SetChains(chains...)
	if err == nil {
		return nil
	}
	// Refused (a set the table cannot match, say): a chain that drops
	// takes its place, as in the filter table (fail closed).
	for i := range chains {
		chains[i].Rules = []netfilter.Rule{{Action: netfilter.Drop(), Comments: commentOf("policy " + id + " was refused: fail closed")}}
	}
	return errors.Join(fmt.Errorf("policy: %s in the %s table denies all: %w", id, e.what, err), e.table.SetChains(chains...))
}

// removeHost removes the chains of host endpoint h.
func (e *early) removeHost(m *Model, h HostEndpoint) error {
	var names []string
	for _, c := range e.chains(&e.render, m, h) {
		names = append(names, c.Name)
	}
	return e.table.RemoveChains(names...)
}

// declareHost declares h's chains here and the policies its tiers use.
func (e *early) declareHost(m *Model, h HostEndpoint) error {
	var errs []error
	for _, t := range e.tiers(h) {
		for _, pid := range slices.Concat(t.Ingress, t.Egress) {
			if p, ok := m.Policy(pid); ok {
				errs = append(errs, e.declarePolicy(m, pid, p.Ingress, p.Egress, true))
			}
		}
	}
	if err := e.table.SetChains(e.chains(&e.render, m, h)...); err != nil {
		errs = append(errs, fmt.Errorf("policy: host endpoint %s: %s: %w", h.ID, e.what, err))
	}
	return errors.Join(errs...)
}

// declareDispatch declares the dispatch by interface to the host
// endpoints' chains here, and removes the dispatch chains no longer used.
func (e *early) declareDispatch(hosts []string, fallback func(kind string) netfilter.Rule) error {
	var chains []netfilter.Chain
	for _, root := range e.roots {
		chains = append(chains, e.render.dispatch(root.name, root.kind, hosts, root.in, fallback(root.kind))...)
	}
	var names, gone []string
	for _, c := range chains {
		names = append(names, c.Name)
	}
	for _, n := range e.dispatch {
		if !slices.Contains(names, n) {
			gone = append(gone, n)
		}
	}
	if err := e.table.SetChains(chains...); err != nil {
		return fmt.Errorf("policy: %s dispatch: %w", e.what, err)
	}
	e.dispatch = names
	if len(gone) > 0 {
		return e.table.RemoveChains(gone...)
	}
	return nil
}

// declareHost declares the chains of host endpoint id (in Filter, and in
// each early table), removing those of the interface it had before (old)
// when it moved or went (unless another host endpoint holds that
// interface now, as declareWorkload). (A host endpoint with untracked
// tiers but no Raw, or pre-DNAT tiers but no Mangle, never gets here:
// OnUpdate refuses it.)
func (m *Manager) declareHost(id string, old HostEndpoint) error {
	h, ok := m.model.HostEndpoint(id)
	var errs []error
	if _, taken := m.model.hostIf[old.Iface]; old.Iface != "" && (!ok || old.Iface != h.Iface) && !taken {
		var names []string
		for _, c := range m.render.hostChains(m.model, old) {
			names = append(names, c.Name)
		}
		errs = append(errs, m.o.Filter.RemoveChains(names...))
		for _, e := range m.early {
			errs = append(errs, e.removeHost(m.model, old))
		}
		delete(m.renderedHosts, id)
	}
	if !ok {
		delete(m.renderedHosts, id)
		return errors.Join(errs...)
	}
	if err := m.o.Filter.SetChains(m.render.hostChains(m.model, h)...); err != nil {
		delete(m.renderedHosts, id)
		return errors.Join(append(errs, fmt.Errorf("policy: host endpoint %s: %w", id, err))...)
	}
	for _, e := range m.early {
		errs = append(errs, e.declareHost(m.model, h))
	}
	m.renderedHosts[id] = h
	return errors.Join(errs...)
}

// declareEarlyHooks declares each early table's chains at its hooks: the
// host endpoints' dispatch, after loopback and workload interfaces return
// (and, in Mangle, established flows and untracked ones Raw allowed are
// accepted), with a packet allowed there accepted.
func (m *Manager) declareEarlyHooks() error {
	p := m.o.ChainPrefix
	clearMarks := netfilter.Rule{Action: netfilter.ClearMark(m.o.Marks.Accept | m.o.Marks.Pass)}
	accepted := netfilter.Mark(m.o.Marks.Accept, m.o.Marks.Accept)
	allowed := netfilter.Rule{Matches: []netfilter.Match{accepted}, Action: netfilter.Accept(), Comments: []string{"allowed by policy"}}
	root := func(first []netfilter.Rule, in bool, dispatch string, forHost bool) []netfilter.Rule {
		match := func(iface string) []netfilter.Match { return []netfilter.Match{ifaceMatch(iface, in)} }
		rules := append(slices.Clone(first), clearMarks, netfilter.Rule{Matches: match("lo"), Action: netfilter.Return(), Comments: []string{"loopback"}})
		if forHost {
			// Untracked policy is the host's own traffic's: a packet that
			// arrives for another address (forwarded) goes on tracked, to
			// the forwarded stages and the workloads' policy.
			rules = append(rules, netfilter.Rule{Matches: []netfilter.Match{netfilter.MatchAddrType{Types: netfilter.AddrTypeLocal, Dir: netfilter.Dst, Negate: true}},
				Action: netfilter.Return(), Comments: []string{"not for the host: no untracked policy"}})
		}
		for _, wp := range m.o.WorkloadPrefixes {
			rules = append(rules, netfilter.Rule{Matches: match(wp + "+"), Action: netfilter.Return(), Comments: []string{"workloads"}})
		}
		return append(rules, netfilter.Rule{Action: netfilter.Jump(p + dispatch), Comments: []string{"host endpoints"}}, allowed)
	}
	var errs []error
	for _, e := range m.early {
		var chains []netfilter.Chain
		var jumps []netfilter.HookJump
		if e.table == m.o.Raw {
			chains = append([]netfilter.Chain{
				{Name: p + chainRawPre, Rules: root(nil, true, chainToHostRaw, true)},
				{Name: p + chainRawOut, Rules: root(nil, false, chainFromHostRaw, false)},
			}, m.render.rawFailsafeChains(m.o.Failsafes.In, m.o.Failsafes.Out)...)
			jumps = []netfilter.HookJump{{Hook: netfilter.HookPrerouting, Chain: p + chainRawPre}, {Hook: netfilter.HookOutput, Chain: p + chainRawOut}}
		} else {
			first := []netfilter.Rule{{Matches: []netfilter.Match{netfilter.ConntrackState(netfilter.CTStateEstablished, netfilter.CTStateRelated)},
				Action: netfilter.Accept(), Comments: []string{"established and related flows"}}}
			if m.o.Raw != nil {
				first = append(first, m.allowedUntracked())
			}
			chains = []netfilter.Chain{
				{Name: p + chainManglePre, Rules: root(first, true, chainToHostPreDNAT, false)},
				{Name: p + chainMangleFailsafeIn, Rules: failsafeRules(m.o.Failsafes.In, netfilter.Dst)},
			}
			jumps = []netfilter.HookJump{{Hook: netfilter.HookPrerouting, Chain: p + chainManglePre}}
		}
		if err := e.table.SetChains(chains...); err != nil {
			errs = append(errs, err)
			continue
		}
		errs = append(errs, netfilter.DeclareJumps(e.table, netfilter.JumpInsert, m.o.Name, jumps...))
	}
	return errors.Join(errs...)
}

// allowedUntracked accepts what the untracked policy allowed in Raw.
func (m *Manager) allowedUntracked() netfilter.Rule {
	return netfilter.Rule{Matches: []netfilter.Match{netfilter.ConntrackState(netfilter.CTStateUntracked), netfilter.Mark(m.o.Marks.Accept, m.o.Marks.Accept)},
		Action: netfilter.Accept(), Comments: []string{"allowed by untracked policy"}}
}
