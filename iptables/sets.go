package iptables

import (
	"bytes"
	"context"
	"fmt"

	"github.com/nodeplane/nodeplane/ipfamily"
)

// A rule that matches an ip set the kernel does not have, or has of the
// other family, is refused by iptables when it parses the rule (both
// backends, at the rule's line). A plan checks the sets of the objects it
// writes against the kernel's before it runs the restore, so that such an
// object is held back alone, without a failed restore.

// kernelSet is what the kernel had of an ip set when the sets were listed.
type kernelSet struct {
	exists bool
	// family is the set's family; zero for a set of none (bitmap:port,
	// list:set), which rules of either family match.
	family ipfamily.Family
}

// refuseSets holds back the objects whose content p writes and whose
// rules match an ip set that the kernel does not have, or has of the other
// family, as refused without a write (see failChecked), and returns their
// names. It lists the kernel's sets when one of those sets is unknown to
// the picture (not listed since the table was read, or matched only since
// the listing); when listing fails it checks nothing until the next read,
// and the restore is the judge.
func (t *Table) refuseSets(ctx context.Context, p *restorePlan, d *decision) []string {
	kt := t.kernel
	if kt.setsUnlisted {
		return nil
	}
	var objs []string
	seen := map[string]bool{}
	unknown := false
	for i, r := range p.runs {
		end := p.lines + 2
		if i+1 < len(p.runs) {
			end = p.runs[i+1].first
		}
		if r.hold != holdContent || end == r.first || seen[r.name] {
			continue
		}
		seen[r.name] = true
		matches := false
		for _, l := range t.lists(r.name) {
			for _, set := range l.sets {
				matches = true
				if _, known := kt.sets[set]; !known {
					unknown = true
				}
			}
		}
		if matches {
			objs = append(objs, r.name)
		}
	}
	if len(objs) == 0 {
		return nil
	}
	if unknown {
		if err := t.listSets(ctx); err != nil {
			kt.setsUnlisted = true
			t.opts.Logger.Warn("cannot list the kernel's ip sets: rules that match sets are written unchecked until the next read", "error", err)
			return nil
		}
	}
	var held []string
	for _, name := range objs {
		if detail := t.unusableSet(name); detail != "" {
			d.holds[name] = holdContent
			t.checked(d, name, ErrRefused, detail)
			held = append(held, name)
		}
	}
	return held
}

// unusableSet says why a rule of the object name cannot match its set as
// the kernel's sets were listed, or "" when every set is fit.
func (t *Table) unusableSet(name string) string {
	for _, l := range t.lists(name) {
		for _, set := range l.sets {
			switch ks := t.kernel.sets[set]; {
			case !ks.exists:
				return "it matches set " + set + ", which the kernel does not have"
			case ks.family != 0 && ks.family != t.opts.Family:
				return fmt.Sprintf("it matches set %s, which is %v", set, ks.family)
			}
		}
	}
	return ""
}

// lists returns the rule lists of the object name: an owned chain's, or
// the two groups of our rules in a built-in chain.
func (t *Table) lists(name string) []*ruleList {
	if d := t.desired[name]; d != nil {
		return []*ruleList{&d.ruleList}
	}
	if h := t.hooks[name]; h != nil {
		return []*ruleList{&h.insert, &h.append}
	}
	return nil
}

// listSets lists the kernel's ip sets (`ipset list -t`, through the
// Kernel's runner, so in its namespace) and records in the picture what
// it has of every set our declared rules match.
func (t *Table) listSets(ctx context.Context) error {
	out, err := t.runner.Run(ctx, nil, "ipset", "list", "-t")
	if err != nil {
		return fmt.Errorf("ipset list -t: %w", err)
	}
	listed := parseSetList(out)
	sets := map[string]kernelSet{}
	add := func(l *ruleList) {
		for _, set := range l.sets {
			sets[set] = listed[set]
		}
	}
	for _, d := range t.desired {
		add(&d.ruleList)
	}
	for _, h := range t.hooks {
		add(&h.insert)
		add(&h.append)
	}
	t.kernel.sets = sets
	return nil
}

// parseSetList returns the sets of `ipset list -t` output by name. The
// family is the header's "family inet" or "family inet6"; a bitmap:ip or
// bitmap:ip,mac set, whose header names none, is IPv4; any other set
// without one (bitmap:port, list:set) has none.
func parseSetList(out []byte) map[string]kernelSet {
	sets := map[string]kernelSet{}
	var name string
	for line := range bytes.Lines(out) {
		line = bytes.TrimRight(line, "\r\n")
		switch {
		case bytes.HasPrefix(line, []byte("Name: ")):
			name = string(line[len("Name: "):])
			sets[name] = kernelSet{exists: true}
		case bytes.HasPrefix(line, []byte("Type: ")):
			if bytes.HasPrefix(line[len("Type: "):], []byte("bitmap:ip")) {
				sets[name] = kernelSet{exists: true, family: ipfamily.IPv4}
			}
		case bytes.HasPrefix(line, []byte("Header: ")):
			f := bytes.Fields(line[len("Header: "):])
			for i := 0; i+1 < len(f); i++ {
				if string(f[i]) != "family" {
					continue
				}
				switch string(f[i+1]) {
				case "inet":
					sets[name] = kernelSet{exists: true, family: ipfamily.IPv4}
				case "inet6":
					sets[name] = kernelSet{exists: true, family: ipfamily.IPv6}
				}
			}
		}
	}
	return sets
}
