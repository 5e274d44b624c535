package iptables

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// errFastRead marks a fast read that could not be done; Apply then falls
// back to iptables-save.
var errFastRead = errors.New("iptables: fast read")

// fastRule is what a fast read needs to know of one rule: its hash (nil
// when it carries none of ours) and the chain or target it jumps to.
type fastRule struct {
	hash   []byte
	target string
}

// fastChain is one chain of a table as a fast read saw it.
type fastChain struct {
	name  string
	rules []fastRule
}

// fromChains builds from the chains of a fast read the same picture the
// iptables-save parser builds, except that the texts of our rules in
// built-in chains are left empty; needTexts reports whether there is such
// a rule (its text must then be found elsewhere).
func (p *saveParser) fromChains(in []fastChain) (kt *kernelTable, needTexts bool) {
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
			}
			if kc != nil && !owned {
				kc.texts = append(kc.texts, "")
				needTexts = needTexts || r.hash != nil
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
	return p.picture(chains, exists), needTexts
}

// ourHash returns the hash of a comment that is exactly one of our hash
// comments (HashPrefix and HashLength hash characters), or nil.
func (p *saveParser) ourHash(comment []byte) []byte {
	if len(comment) != len(p.hashPrefix)+HashLength || !strings.HasPrefix(string(comment), p.hashPrefix) {
		return nil
	}
	h := comment[len(p.hashPrefix):]
	for _, c := range h {
		if !hashChars[c] {
			return nil
		}
	}
	return h
}

// cString returns b up to its first NUL byte.
func cString(b []byte) []byte {
	for i, c := range b {
		if c == 0 {
			return b[:i]
		}
	}
	return b
}

// fastReadTable reads the table in process (see Options.Namespace). It
// returns an error wrapping errFastRead when it cannot, or when one of our
// rules in a built-in chain has a text the Table does not know; the caller
// then reads with iptables-save.
func (t *Table) fastReadTable(ctx context.Context, p *saveParser) (*kernelTable, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	chains, err := fastRead(t.opts.Namespace, t.opts.Backend, t.opts.IPVersion, t.opts.Table, p)
	if err != nil {
		return nil, false, fmt.Errorf("%w: %w", errFastRead, err)
	}
	kt, needTexts := p.fromChains(chains)
	return kt, needTexts, nil
}

// knownTexts fills in the texts of our rules in the built-in chains of kt
// from what the Table knows: the rules declared for that chain now and the
// rules of ours it last saw there. It reports whether every text was found.
func (t *Table) knownTexts(kt *kernelTable) bool {
	for _, name := range tableChains[t.opts.Table] {
		kc := kt.chains[name]
		if kc == nil {
			continue
		}
		var known map[string]string
		for i := range kc.texts {
			h := kc.hash(i)
			if h == "" {
				continue
			}
			if known == nil {
				known = t.textsOf(name)
			}
			text, ok := known[h]
			if !ok {
				return false
			}
			kc.texts[i] = text
		}
	}
	return true
}

// textsOf maps each hash of ours the Table knows in a built-in chain to the
// text of its rule.
func (t *Table) textsOf(chain string) map[string]string {
	m := map[string]string{}
	if t.prevKernel != nil {
		if kc := t.prevKernel.chains[chain]; kc != nil {
			for i, text := range kc.texts {
				if h := kc.hash(i); h != "" && text != "" {
					m[h] = text
				}
			}
		}
	}
	if h := t.hooks[chain]; h != nil {
		for _, l := range []*ruleList{&h.insert, &h.append} {
			if !l.hashed {
				continue
			}
			for j := range l.rules {
				m[l.hash(j)] = l.rules[j].withHash(t.opts.HashPrefix, l.hash(j))
			}
		}
	}
	return m
}
