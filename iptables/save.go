package iptables

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strings"

	"github.com/nodeplane/nodeplane/internal/nfcore"
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

// holdsOurs reports whether the chain has a rule with our hash comment.
func (c *kernelChain) holdsOurs() bool {
	for i := range c.rules() {
		if c.hash(i) != "" {
			return true
		}
	}
	return false
}

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
	// exists says, for each chain of saveParser.foreign, whether the
	// table has it.
	exists map[string]bool
	// sets says, for each ip set our rules matched when the kernel's sets
	// were last listed since the read (Table.refuseSets), what the kernel
	// had of it; nil until listed. setsUnlisted says that listing failed:
	// sets are not checked until the next read.
	sets         map[string]kernelSet
	setsUnlisted bool
}

var zeroHash [HashLength]byte

// maxSaveLine bounds one line of iptables-save output.
const maxSaveLine = 1 << 20

// saveParser extracts from iptables-save output what a Table needs.
type saveParser struct {
	table       string
	chainPrefix string
	hashPrefix  string
	// foreign are chains neither owned nor built-in whose existence the
	// read reports (kernelTable.exists): those our rules jump to.
	foreign []string
}

// parsedChain accumulates one chain while parsing.
type parsedChain struct {
	kernelChain
	hashes []byte
}

// parse reads iptables-save output and returns the owned and built-in
// chains of p.table. It looks only at chain declarations, the chain of each
// rule, its hash comment and its jump target; rules are never parsed
// semantically. A rule is split into arguments as iptables-restore splits
// its input (see nextArg), and one whose quoted argument holds a newline
// (a comment can) goes on over the next lines.
func (p *saveParser) parse(r io.Reader) (*kernelTable, error) {
	chains := map[string]*parsedChain{}
	for _, c := range tableChains[p.table] {
		chains[c] = &parsedChain{}
	}
	exists := p.existence()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), maxSaveLine)
	sc.Split(scanLines)
	inTable := false
	var refs []string // owned chains jumped to by foreign rules
	var cont []byte   // a rule whose quoted argument goes on on the next line
	for sc.Scan() {
		line := sc.Bytes()
		if cont != nil {
			cont = append(append(cont, '\n'), line...)
			if len(cont) > maxSaveLine {
				return nil, fmt.Errorf("%w: parsing iptables-save output: a rule longer than %d bytes", ErrSave, maxSaveLine)
			}
			if ref, open := p.rule(chains, cont); !open {
				refs = appendRef(refs, ref)
				cont = nil
			}
			continue
		}
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
			} else if _, ok := exists[string(name)]; ok {
				exists[string(name)] = true
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
		ref, open := p.rule(chains, line)
		if open {
			cont = append([]byte(nil), line...)
			continue
		}
		refs = appendRef(refs, ref)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: parsing iptables-save output: %w", ErrSave, err)
	}
	if cont != nil {
		return nil, fmt.Errorf("%w: parsing iptables-save output: a quote left open at the end", ErrSave)
	}
	for _, r := range refs {
		if kc := chains[r]; kc != nil {
			kc.foreignRefs++
		}
	}
	return p.picture(chains, exists), nil
}

// existence returns the map of kernelTable.exists, every chain missing
// until a read finds it.
func (p *saveParser) existence() map[string]bool {
	exists := make(map[string]bool, len(p.foreign))
	for _, name := range p.foreign {
		exists[name] = false
	}
	return exists
}

// picture builds the kernel picture from the parsed chains.
func (p *saveParser) picture(chains map[string]*parsedChain, exists map[string]bool) *kernelTable {
	kt := &kernelTable{chains: make(map[string]*kernelChain, len(chains)), exists: exists}
	for name, pc := range chains {
		kc := pc.kernelChain
		kc.hashes = string(pc.hashes)
		kt.chains[name] = &kc
	}
	return kt
}

// owned reports whether a chain name carries the prefix.
func (p *saveParser) owned(name []byte) bool {
	// Options validation keeps the prefix off every built-in chain name.
	return bytes.HasPrefix(name, []byte(p.chainPrefix))
}

// appendRef appends ref, the owned chain a foreign rule jumps to, when
// there is one.
func appendRef(refs []string, ref []byte) []string {
	if ref == nil {
		return refs
	}
	return append(refs, string(ref))
}

// rule records one "-A CHAIN args" line in chains: its hash (or none) in an
// owned or built-in chain, its text in a built-in chain. It returns the
// owned chain the rule jumps to when the rule is foreign (in a foreign
// chain, or without our hash in a built-in chain), and reports a quote left
// open (the rule goes on on the next line; nothing is recorded).
func (p *saveParser) rule(chains map[string]*parsedChain, line []byte) (ref []byte, open bool) {
	name, args := line[3:], []byte(nil)
	if sp := bytes.IndexByte(name, ' '); sp >= 0 {
		name, args = name[:sp], name[sp+1:]
	} // else a rule without arguments (no match, no target): it still counts
	owned := p.owned(name)
	kc := chains[string(name)] // no allocation: map lookup with a converted key
	var hash, target []byte
	// Splitting is needed where the hash is recorded (owned and built-in
	// chains) and can be there ("--comment"), where a jump to an owned
	// chain can be (the prefix), and to find whether a quote is left
	// open. Without a backslash, every double quote opens or closes one:
	// an odd count leaves one open.
	switch quotes := bytes.Count(args, []byte{'"'}); {
	case (kc != nil || owned) && bytes.Contains(args, []byte("--comment")), bytes.Contains(args, []byte(p.chainPrefix)),
		quotes > 0 && bytes.IndexByte(args, '\\') >= 0:
		hash, target, open = p.ruleArgs(args)
	default:
		open = quotes%2 == 1
	}
	if open {
		return nil, true
	}
	if kc == nil && owned {
		kc = &parsedChain{}
		chains[string(name)] = kc
	}
	if kc != nil {
		if hash != nil {
			kc.hashes = append(kc.hashes, hash...)
		} else {
			kc.hashes = append(kc.hashes, zeroHash[:]...)
		}
		if !owned { // a built-in chain
			text := ""
			if hash != nil {
				text = string(args)
			}
			kc.texts = append(kc.texts, text)
		}
	}
	if !owned && hash == nil && target != nil && p.owned(target) {
		return target, false
	}
	return nil, false
}

// ruleArgs splits the arguments of a rule as iptables-restore would and
// returns the hash of its first comment match whose text is exactly one of
// our hash comments (`-m comment --comment TEXT`, TEXT one argument:
// nothing else counts, not a hash inside a longer comment) and the chain
// it jumps or goes to: iptables-save prints the target last, and a jump to
// a chain takes no options, so that is a rule ending with "-j CHAIN" or
// "-g CHAIN" (a "-j" inside a quoted comment is part of one argument).
// open reports a quote left open at the end of args.
func (p *saveParser) ruleArgs(args []byte) (hash, target []byte, open bool) {
	// comment counts how many of the last arguments are "-m", "comment",
	// "--comment", in that order: at 3 this one is a comment's text.
	comment, afterJump := 0, false
	for rest := args; ; {
		a, r, ok, o := nextArg(rest)
		if o {
			return nil, nil, true
		}
		if !ok {
			return hash, target, false
		}
		rest = r
		if comment == 3 && hash == nil {
			hash = p.ourHash(a)
		}
		switch {
		case string(a) == "-m":
			comment = 1
		case comment == 1 && string(a) == "comment", comment == 2 && string(a) == "--comment":
			comment++
		default:
			comment = 0
		}
		target = nil
		if afterJump {
			target = a
		}
		afterJump = string(a) == "-j" || string(a) == "-g"
	}
}

// nextArg returns the first argument of s and what follows it, splitting
// as iptables-restore (and every iptables binary reading a rule from a
// line) does: blanks (space, tab, newline) separate arguments; a double
// quote opens a quoted part, inside which a backslash takes the next byte
// literally, and the closing quote ends the argument; outside quotes a
// backslash is an ordinary byte. That is how iptables-save quotes and
// escapes the text of comments and prefixes (xtables_save_string). arg is
// s's memory unless unescaping had to build it. ok is false when s holds
// no more arguments; open reports a quote still open at the end of s.
func nextArg(s []byte) (arg, rest []byte, ok, open bool) {
	i := 0
	for i < len(s) && argClass[s[i]] == blank {
		i++
	}
	if i == len(s) {
		return nil, nil, false, false
	}
	start := i
	for i < len(s) && argClass[s[i]] == plain {
		i++
	}
	if i == len(s) || s[i] != '"' {
		return s[start:i], s[i:], true, false
	}
	// A quoted argument; in the usual form (nothing before the quote, no
	// backslash inside) it is a slice of s.
	if j := bytes.IndexByte(s[i+1:], '"'); start == i && j >= 0 && bytes.IndexByte(s[i+1:i+1+j], '\\') < 0 {
		return s[i+1 : i+1+j], s[i+2+j:], true, false
	}
	buf := append([]byte(nil), s[start:i]...)
	for i++; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && i+1 < len(s):
			i++
			buf = append(buf, s[i])
		case c == '\\':
			return nil, nil, false, true
		case c == '"':
			return buf, s[i+1:], true, false
		default:
			buf = append(buf, c)
		}
	}
	return nil, nil, false, true
}

// The classes of bytes for nextArg: the blanks that separate arguments,
// the double quote, and every other byte.
const (
	plain = iota
	blank
	quote
)

var argClass = func() (c [256]uint8) {
	c[' '], c['\t'], c['\n'], c['"'] = blank, blank, blank, quote
	return c
}()

// scanLines splits at newlines only: unlike bufio.ScanLines it keeps a
// carriage return, which a quoted comment may hold.
func scanLines(data []byte, atEOF bool) (advance int, token []byte, err error) {
	if i := bytes.IndexByte(data, '\n'); i >= 0 {
		return i + 1, data[:i], nil
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
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

// ourHash returns the hash of a comment that is exactly one of our hash
// comments (HashPrefix and HashLength hash characters, nothing after), or
// nil.
func (p *saveParser) ourHash(comment []byte) []byte {
	if len(comment) != len(p.hashPrefix)+HashLength {
		return nil
	}
	h, _, ok := nfcore.CommentHash(comment, p.hashPrefix)
	if !ok {
		return nil
	}
	return h
}
