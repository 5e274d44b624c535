package selector

import (
	"fmt"
	"maps"
	"slices"

	"github.com/nodeplane/nodeplane/internal/errs"
	"github.com/nodeplane/nodeplane/netfilter"
	"github.com/nodeplane/nodeplane/policy"
)

// translate turns p into the policy.Policy sent, with selectors replaced
// by set IDs, and lists the sets its rules use (once per use).
func translate(p Policy) (policy.Policy, []*setRef, error) {
	if p.Tier == "" {
		return policy.Policy{}, nil, fmt.Errorf("%w %s: no tier", ErrInvalidPolicy, p.ID)
	}
	if err := (policy.Policy{ID: p.ID}).Validate(); err != nil {
		return policy.Policy{}, nil, fmt.Errorf("%w: %w", ErrInvalidPolicy, err)
	}
	if err := p.AppliesTo.problem(); err != nil {
		return policy.Policy{}, nil, errs.Also(fmt.Errorf("%w %s: applies to: %w", ErrInvalidPolicy, p.ID, err), ErrInvalidSelector)
	}
	var refs []*setRef
	out := policy.Policy{ID: p.ID}
	for _, dir := range []struct {
		name string
		in   []Rule
		out  *[]policy.Rule
	}{{"ingress", p.Ingress, &out.Ingress}, {"egress", p.Egress, &out.Egress}} {
		for i, r := range dir.in {
			pr, rr, err := translateRule(r)
			if err != nil {
				return policy.Policy{}, nil, fmt.Errorf("%w %s: %s rule %d: %w", ErrInvalidPolicy, p.ID, dir.name, i, err)
			}
			*dir.out = append(*dir.out, pr)
			refs = append(refs, rr...)
		}
	}
	return out, refs, nil
}

func translateRule(r Rule) (policy.Rule, []*setRef, error) {
	out := policy.Rule{Action: r.Action, Family: r.Family, Protocol: r.Protocol, NotProtocol: r.NotProtocol,
		ICMP: r.ICMP, NotICMP: r.NotICMP, Name: r.Name}
	var refs []*setRef
	for _, side := range []struct {
		in  Peer
		out *policy.Peer
	}{{r.Src, &out.Src}, {r.Dst, &out.Dst}} {
		in := side.in
		o := policy.Peer{Nets: slices.Clone(in.Nets), NotNets: slices.Clone(in.NotNets),
			Ports: slices.Clone(in.Ports), NotPorts: slices.Clone(in.NotPorts)}
		for _, s := range []struct {
			sel *Selector
			ids *[]string
		}{{in.Selector, &o.Sets}, {in.NotSelector, &o.NotSets}} {
			if s.sel == nil {
				continue
			}
			if err := s.sel.problem(); err != nil {
				return policy.Rule{}, nil, errs.Also(err, ErrInvalidSelector)
			}
			sel := cloneSelector(*s.sel)
			*s.ids = append(*s.ids, SetID(sel))
			refs = append(refs, &setRef{key: sel.String(), sel: sel, nets: true})
		}
		var portSel Selector
		if in.Selector != nil {
			portSel = cloneSelector(*in.Selector)
		}
		for _, s := range []struct {
			names []PortName
			ids   *[]string
		}{{in.NamedPorts, &o.NamedPorts}, {in.NotNamedPorts, &o.NotNamedPorts}} {
			for _, pn := range s.names {
				if err := validPortName(pn.Name, pn.Protocol); err != nil {
					return policy.Rule{}, nil, err
				}
				*s.ids = append(*s.ids, NamedPortSetID(portSel, pn))
				refs = append(refs, &setRef{key: portSel.String(), sel: portSel, port: pn})
			}
		}
		*side.out = o
	}
	if err := out.Validate(); err != nil {
		return policy.Rule{}, nil, err
	}
	return out, refs, nil
}

func validPortName(name string, proto netfilter.Proto) error {
	if name == "" || len(name) > 63 {
		return fmt.Errorf("port name %q must be 1 to 63 bytes", name)
	}
	switch proto {
	case netfilter.ProtoTCP, netfilter.ProtoUDP, netfilter.ProtoSCTP:
		return nil
	}
	return fmt.Errorf("named port %s: protocol %s is not TCP, UDP or SCTP", name, proto)
}

func cloneSelector(s Selector) Selector {
	clone := func(rs []Requirement) []Requirement {
		if rs == nil {
			return nil
		}
		out := make([]Requirement, len(rs))
		for i, r := range rs {
			out[i] = Requirement{Key: r.Key, Op: r.Op, Values: slices.Clone(r.Values)}
		}
		return out
	}
	return Selector{Endpoint: clone(s.Endpoint), Namespace: clone(s.Namespace)}
}

func validEndpoint(e Endpoint) error {
	w := policy.Workload{ID: e.ID, Iface: "placeholder"}
	if e.Local {
		w.Iface = e.Iface
	}
	if err := w.Validate(); err != nil {
		return fmt.Errorf("%w %s: %w", ErrInvalidEndpoint, e.ID, err)
	}
	if err := validLabels(e.Labels); err != nil {
		return fmt.Errorf("%w %s: %w", ErrInvalidEndpoint, e.ID, err)
	}
	for _, a := range e.Addrs {
		if !a.IsValid() || a.Zone() != "" || a.Is4In6() {
			return fmt.Errorf("%w %s: address %v is not a plain IPv4 or IPv6 address", ErrInvalidEndpoint, e.ID, a)
		}
	}
	for _, np := range e.NamedPorts {
		if err := validPortName(np.Name, np.Protocol); err != nil {
			return fmt.Errorf("%w %s: %w", ErrInvalidEndpoint, e.ID, err)
		}
	}
	return nil
}

func sameEndpoint(a, b Endpoint) bool {
	return a.ID == b.ID && a.Namespace == b.Namespace && a.Local == b.Local && a.Iface == b.Iface &&
		maps.Equal(a.Labels, b.Labels) && slices.Equal(a.Addrs, b.Addrs) && slices.Equal(a.NamedPorts, b.NamedPorts)
}

// Validate reports what is wrong with p (SetPolicy refuses it with the
// same error); the error matches ErrInvalidPolicy.
func (p Policy) Validate() error {
	_, _, err := translate(p)
	return err
}

// Validate reports what is wrong with e, apart from an interface another
// local endpoint holds (which only the Index knows); the error matches
// ErrInvalidEndpoint.
func (e Endpoint) Validate() error { return validEndpoint(e) }
