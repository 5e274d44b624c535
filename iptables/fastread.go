package iptables

import (
	"context"

	"github.com/nodeplane/nodeplane/kernel"
)

// An in-process read sees, per chain, the hash of each rule and the chain
// it jumps to, as the iptables-save parser does, but not the text of our
// rules in built-in chains: those stay "" in the picture, and a plan that
// must delete one by its text reads the table with iptables-save first
// (restorePlan.needsSave). Whatever the read cannot make sense of (a native
// nftables expression, a malformed answer) makes it fail, and Apply reads
// with iptables-save instead.

// fastRule is what an in-process read needs to know of one rule: its hash
// (nil when it carries none of ours) and the chain or target it jumps to.
type fastRule struct {
	hash   []byte
	target string
}

// fastChain is one chain of a table as an in-process read saw it.
type fastChain struct {
	name  string
	rules []fastRule
}

// inNamespace returns how the in-process read runs in the namespace of k:
// through its Do (a *kernel.Namespace), or on the calling thread for nil
// (the process's namespace). It returns nil when k offers neither (a
// kernelfake.Namespace): every read then runs iptables-save.
func inNamespace(k kernel.Commands) func(func() error) error {
	switch k := k.(type) {
	case nil:
		return func(fn func() error) error { return fn() }
	case interface{ Do(func() error) error }:
		return k.Do
	}
	return nil
}

// read reads the table with p: in process when the Kernel allows it,
// falling back to iptables-save when that fails, else with iptables-save.
// It may run on a goroutine of its own: it touches nothing of the Table
// but the read-only options and the stats.
func (t *Table) read(ctx context.Context, p *saveParser) (*kernelTable, error) {
	if t.inNS != nil {
		var chains []fastChain
		err := t.inNS(func() (err error) {
			chains, err = fastRead(t.opts.Backend, t.opts.Family, t.opts.Table, p)
			return err
		})
		if err == nil {
			return p.fromChains(chains), nil
		}
		t.opts.Logger.Debug("in-process read failed; reading with iptables-save", "error", err)
	}
	return t.save(ctx, p)
}

// fromChains builds from the chains of an in-process read the picture the
// iptables-save parser builds from the same table, but for the texts of
// our rules in built-in chains, left "".
func (p *saveParser) fromChains(in []fastChain) *kernelTable {
	chains := map[string]*parsedChain{}
	for _, c := range tableChains[p.table] {
		chains[c] = &parsedChain{}
	}
	exists := p.existence()
	for _, c := range in {
		if p.owned([]byte(c.name)) {
			if _, ok := chains[c.name]; !ok {
				chains[c.name] = &parsedChain{}
			}
		} else if _, ok := exists[c.name]; ok {
			exists[c.name] = true
		}
	}
	var refs []string
	for _, c := range in {
		owned := p.owned([]byte(c.name))
		kc := chains[c.name]
		for _, r := range c.rules {
			if kc != nil {
				if r.hash != nil {
					kc.hashes = append(kc.hashes, r.hash...)
				} else {
					kc.hashes = append(kc.hashes, zeroHash[:]...)
				}
				if !owned {
					kc.texts = append(kc.texts, "")
				}
			}
			if !owned && r.hash == nil && p.owned([]byte(r.target)) {
				refs = append(refs, r.target)
			}
		}
	}
	for _, r := range refs {
		if kc := chains[r]; kc != nil {
			kc.foreignRefs++
		}
	}
	return p.picture(chains, exists)
}
