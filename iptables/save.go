package iptables

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strings"
)

// kernelChain is what a Table knows about one chain in the kernel: the
// hash of each rule, and for built-in chains the text of our rules.
type kernelChain struct {
	// hashes holds HashLength bytes per rule, in order: the rule's hash,
	// or HashLength zero bytes for a rule without our hash comment. A
	// string, so that after a write it can share the desired chain's.
	hashes string
	// texts is kept for built-in chains only: per rule, the arguments of
	// our rules as iptables-save printed them (after "-A CHAIN "), used to
	// delete them by full text; "" for foreign rules.
	texts []string
	// foreignRefs counts rules outside our control (in foreign chains, or
	// foreign rules of built-in chains) that jump to this owned chain.
	foreignRefs int
}

// rules returns the number of rules in the chain.
func (c *kernelChain) rules() int { return len(c.hashes) / HashLength }

// hash returns the hash of rule i, "" for a foreign rule.
func (c *kernelChain) hash(i int) string {
	h := c.hashes[i*HashLength : (i+1)*HashLength]
	if h[0] == 0 {
		return ""
	}
	return string(h)
}

// kernelTable is a table as the Table read it: every owned chain and every
// built-in chain, keyed by name.
type kernelTable struct {
	chains map[string]*kernelChain
}

var zeroHash [HashLength]byte

// maxSaveLine bounds one line of iptables-save output.
const maxSaveLine = 1 << 20

// saveParser extracts from iptables-save output what a Table needs.
type saveParser struct {
	table       string
	chainPrefix string
	hashPrefix  string
}

// parsedChain accumulates one chain while parsing.
type parsedChain struct {
	kernelChain
	hashes []byte
}

// parse reads iptables-save output and returns the owned and built-in
// chains of p.table. It looks only at chain declarations, rule chains and
// hash comments; rules are never parsed semantically.
func (p *saveParser) parse(r io.Reader) (*kernelTable, error) {
	chains := map[string]*parsedChain{}
	for _, c := range tableChains[p.table] {
		chains[c] = &parsedChain{}
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), maxSaveLine)
	inTable := false
	var refs []string // owned chains jumped to by foreign rules
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		switch line[0] {
		case '#':
			if bytes.Contains(line, []byte("is incompatible, use 'nft' tool")) {
				return nil, fmt.Errorf("%w: %s", ErrIncompatible, line)
			}
			continue
		case '*':
			inTable = string(line[1:]) == p.table
			continue
		case ':':
			if !inTable {
				continue
			}
			name := line[1:]
			if i := bytes.IndexByte(name, ' '); i >= 0 {
				name = name[:i]
			}
			if p.owned(name) {
				if _, ok := chains[string(name)]; !ok {
					chains[string(name)] = &parsedChain{}
				}
			}
			continue
		case '-':
		default:
			if bytes.Equal(line, []byte("COMMIT")) {
				inTable = false
			}
			continue
		}
		if !inTable || !bytes.HasPrefix(line, []byte("-A ")) {
			continue
		}
		name, args := line[3:], []byte(nil)
		if sp := bytes.IndexByte(name, ' '); sp >= 0 {
			name, args = name[:sp], name[sp+1:]
		} // else a rule without arguments (no match, no target): it still counts

		owned := p.owned(name)
		kc := chains[string(name)] // no allocation: map lookup with a converted key
		if kc == nil && owned {
			kc = &parsedChain{}
			chains[string(name)] = kc
		}
		hash := p.findHash(args)
		if kc != nil {
			if hash != nil {
				kc.hashes = append(kc.hashes, hash...)
			} else {
				kc.hashes = append(kc.hashes, zeroHash[:]...)
			}
		}
		if kc != nil && !owned { // a built-in chain
			text := ""
			if hash != nil {
				text = string(args)
			}
			kc.texts = append(kc.texts, text)
		}
		if !owned && hash == nil && bytes.Contains(args, []byte(p.chainPrefix)) {
			if t := jumpTarget(args); t != nil && p.owned(t) {
				refs = append(refs, string(t))
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: parsing iptables-save output: %w", ErrSave, err)
	}
	for _, r := range refs {
		if kc := chains[r]; kc != nil {
			kc.foreignRefs++
		}
	}
	kt := &kernelTable{chains: make(map[string]*kernelChain, len(chains))}
	for name, pc := range chains {
		kc := pc.kernelChain
		kc.hashes = string(pc.hashes)
		kt.chains[name] = &kc
	}
	return kt, nil
}

// owned reports whether a chain name carries the prefix.
func (p *saveParser) owned(name []byte) bool {
	// Options validation keeps the prefix off every built-in chain name.
	return bytes.HasPrefix(name, []byte(p.chainPrefix))
}

// findHash returns the hash of the first comment of args that is one of our
// hash comments (--comment "<prefix><16 chars>" or unquoted), or nil.
func (p *saveParser) findHash(args []byte) []byte {
	const opt = "--comment "
	for {
		i := bytes.Index(args, []byte(opt))
		if i < 0 {
			return nil
		}
		args = args[i+len(opt):]
		v := args
		quoted := len(v) > 0 && v[0] == '"'
		if quoted {
			v = v[1:]
		}
		if !bytes.HasPrefix(v, []byte(p.hashPrefix)) {
			continue
		}
		v = v[len(p.hashPrefix):]
		if len(v) < HashLength {
			continue
		}
		h := v[:HashLength]
		ok := true
		for _, c := range h {
			if !hashChars[c] {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		end := v[HashLength:]
		switch {
		case quoted && len(end) > 0 && end[0] == '"':
		case !quoted && (len(end) == 0 || end[0] == ' '):
		default:
			continue
		}
		return h
	}
}

// jumpTarget returns the chain named by the -j or -g option of rule
// arguments in iptables-save form, or nil.
func jumpTarget(args []byte) []byte {
	for _, opt := range []string{"-j ", "-g "} {
		i := bytes.Index(args, []byte(" "+opt))
		switch {
		case i >= 0:
			i += 1 + len(opt)
		case bytes.HasPrefix(args, []byte(opt)):
			i = len(opt)
		default:
			continue
		}
		t := args[i:]
		if j := bytes.IndexByte(t, ' '); j >= 0 {
			t = t[:j]
		}
		return t
	}
	return nil
}

// countRules counts the rule lines of iptables-save output and reports
// whether it declares one of the given chains (for backend detection).
func countRules(out []byte, hints []string) (rules int, hint string) {
	for line := range bytes.Lines(out) {
		line = bytes.TrimSuffix(line, []byte{'\n'})
		switch {
		case bytes.HasPrefix(line, []byte("-A ")):
			rules++
		case len(line) > 0 && line[0] == ':' && hint == "":
			name := string(line[1:])
			if i := strings.IndexByte(name, ' '); i >= 0 {
				name = name[:i]
			}
			for _, h := range hints {
				if name == h {
					hint = h
				}
			}
		}
	}
	return rules, hint
}
