package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/nodeplane/nodeplane/internal/managerutil"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/netfilter"
)

// kernelSetName returns the name rules match set id by, and whether the
// set is declared on Sets.
func (m *Manager) kernelSetName(id string) (string, bool) {
	name, ok := m.setNames[id]
	if !ok {
		return "", false
	}
	k, err := m.o.Sets.KernelName(name)
	return k, err == nil
}

// setName returns the name of set id in Sets: the ID when Sets takes it,
// else "h" and a hash of it.
func (m *Manager) setName(id string) (string, bool) {
	if netfilter.ValidSetName(id) {
		if _, err := m.o.Sets.KernelName(id); err == nil && id[0] != '_' {
			return id, true
		}
	}
	sum := sha256.Sum256([]byte(id))
	h := hex.EncodeToString(sum[:])
	for _, n := range []int{20, 14, 10, 6} {
		name := "_" + h[:n]
		if _, err := m.o.Sets.KernelName(name); err == nil {
			return name, true
		}
	}
	return "", false
}

// familyMembers returns the members of the Manager's family.
func (m *Manager) familyMembers(members []netfilter.Member) []netfilter.Member {
	var out []netfilter.Member
	for _, mem := range members {
		switch {
		case mem.Is6() != (m.o.Family == ipfamily.IPv6):
		case mem.Valid() && mem.Port() == 0 && mem.Prefix().IsValid() && mem.Prefix().Bits() == 0:
			out = append(out, netfilter.NetMembers(mem.Prefix())...) // a /0: its halves
		default:
			out = append(out, mem)
		}
	}
	return out
}

func (m *Manager) declareSet(id string, kind SetKind, members []netfilter.Member) {
	if managerutil.IsNil(m.o.Sets) {
		return
	}
	name, ok := m.setName(id)
	if !ok {
		m.model.markRefused(id, true)
		m.invalid.Add(fmt.Errorf("%w %s: no set name fits the set driver", ErrInvalidSet, id))
		return
	}
	typ := netfilter.HashNet
	if kind == SetAddrPorts {
		typ = netfilter.HashIPPort
	}
	if err := m.o.Sets.AddOrReplaceSet(netfilter.SetMetadata{Name: name, Type: typ}, m.familyMembers(members)); err != nil {
		// (A set declared before keeps its name, and its rules the
		// kernel's set.)
		_, declared := m.setNames[id]
		m.model.markRefused(id, !declared)
		m.invalid.Add(fmt.Errorf("policy: set %s: %w", id, err))
		return
	}
	m.model.markRefused(id, false)
	m.setNames[id] = name
}

func (m *Manager) changeMembers(id string, add, remove []netfilter.Member) {
	name, ok := m.setNames[id]
	if !ok {
		return
	}
	if err := m.o.Sets.RemoveMembers(name, m.familyMembers(remove)); err != nil {
		m.invalid.Add(fmt.Errorf("policy: set %s: %w", id, err))
	}
	if err := m.o.Sets.AddMembers(name, m.familyMembers(add)); err != nil {
		m.invalid.Add(fmt.Errorf("policy: set %s: %w", id, err))
	}
}

func (m *Manager) removeSet(id string) {
	name, ok := m.setNames[id]
	if !ok {
		return
	}
	delete(m.setNames, id)
	if err := m.o.Sets.RemoveSet(name); err != nil {
		m.invalid.Add(fmt.Errorf("policy: set %s: %w", id, err))
	}
}
