package nftables

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"slices"
	"syscall"

	"github.com/nodeplane/nodeplane/internal/nfnl"
	"github.com/nodeplane/nodeplane/kernel"
)

// kstate is the Table's picture of its table in the kernel.
type kstate struct {
	table bool
	flags uint32
	// chains and sets are the table's, by name (anonymous sets left out).
	chains map[string]*kchain
	sets   map[string]*kset
	// gen is the ruleset generation the picture is of, when genOK.
	gen   uint32
	genOK bool
}

// kchain is a chain in the kernel.
type kchain struct {
	hook   *nfnl.Hook
	typ    string
	policy uint32
	rules  []krule
	// handles: every rule's handle is known (rules written since the last
	// read have none until the chain is read again).
	handles bool
}

// krule is a rule in the kernel: its handle (0: unknown) and our hash ("":
// not ours).
type krule struct {
	handle uint64
	hash   string
}

// kset is a set in the kernel.
type kset struct {
	nl    nfnl.Set
	elems map[string]string
}

func newKstate() *kstate {
	return &kstate{chains: map[string]*kchain{}, sets: map[string]*kset{}}
}

// readAttempts bounds the reads of a table that concurrent changes keep
// interrupting.
const readAttempts = 5

// read reads the table: its chains, rules (handles and hashes), sets and
// elements, consistently (the ruleset generation is the same before and
// after).
func (t *Table) read(s kernel.NFTablesSocket) (*kstate, error) {
	start := t.opts.Clock.Now()
	var k *kstate
	var err error
	for range readAttempts {
		k, err = t.readOnce(s)
		if !errors.Is(err, errInterrupted) {
			break
		}
	}
	elapsed := t.opts.Clock.Since(start)
	t.statsMu.Lock()
	t.stats.Reads++
	t.stats.ReadTime += elapsed
	if err != nil {
		t.stats.ReadErrors++
	}
	t.statsMu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("%w: table %s %s: %w", ErrRead, familyName(t.opts.Family), t.opts.Name, err)
	}
	if n := k.foreignRules(); n > 0 {
		return nil, fmt.Errorf("%w: %w: table %s %s holds %d rules and none carries the hash prefix %q: it is another program's; choose another Options.Name",
			ErrRead, ErrForeignTable, familyName(t.opts.Family), t.opts.Name, n, t.opts.HashPrefix)
	}
	return k, nil
}

// foreignRules returns how many rules the table holds when not one of them
// is ours, else 0: a table of ours holds our rules, or none (its chains
// declared empty, or nothing written yet).
func (k *kstate) foreignRules() int {
	n := 0
	for _, c := range k.chains {
		for _, r := range c.rules {
			if r.hash != "" {
				return 0
			}
			n++
		}
	}
	return n
}

func (t *Table) readOnce(s kernel.NFTablesSocket) (*kstate, error) {
	k := newKstate()
	gen0, err := t.genID(s)
	if err != nil {
		return nil, err
	}
	name := t.opts.Name
	err = t.request(s, nfnl.MsgGetTable, 0, func(w *nfnl.Writer) { w.Str(nfnl.TableName, name) }, func(m *nfnl.Msg) error {
		tb, err := nfnl.ParseTable(m.Data)
		k.table, k.flags = true, tb.Flags
		return err
	})
	switch {
	case errors.Is(err, syscall.ENOENT):
		return t.stable(s, k, gen0)
	case err != nil:
		return nil, err
	}
	err = t.request(s, nfnl.MsgGetChain, nfnl.FlagDump, nil, func(m *nfnl.Msg) error {
		c, err := nfnl.ParseChain(m.Data)
		if err != nil || c.Table != name {
			return err
		}
		kc := &kchain{hook: c.Hook, typ: c.Type, handles: true}
		if c.Policy != nil {
			kc.policy = *c.Policy
		}
		k.chains[c.Name] = kc
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("chains: %w", err)
	}
	err = t.request(s, nfnl.MsgGetRule, nfnl.FlagDump, func(w *nfnl.Writer) { w.Str(nfnl.RuleTable, name) }, func(m *nfnl.Msg) error {
		r, err := nfnl.ParseRule(m.Data)
		if err != nil || r.Table != name {
			return err
		}
		kc := k.chains[r.Chain]
		if kc == nil {
			return errInterrupted // a chain created since the chains were read
		}
		kc.rules = append(kc.rules, krule{handle: r.Handle, hash: ruleHashFromUserData(r.UserData, t.opts.HashPrefix)})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("rules: %w", err)
	}
	var sets []nfnl.Set
	err = t.request(s, nfnl.MsgGetSet, nfnl.FlagDump, func(w *nfnl.Writer) { w.Str(nfnl.SetTable, name) }, func(m *nfnl.Msg) error {
		st, err := nfnl.ParseSet(m.Data)
		if err != nil || st.Table != name || st.Flags&nfnl.SetAnonymous != 0 {
			return err
		}
		st.UserData = nil
		sets = append(sets, st)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sets: %w", err)
	}
	for _, st := range sets {
		elems, err := t.readElements(s, &st)
		if err != nil {
			return nil, fmt.Errorf("elements of set %s: %w", st.Name, err)
		}
		k.sets[st.Name] = &kset{nl: st, elems: elems}
	}
	return t.stable(s, k, gen0)
}

// stable returns k if the ruleset generation is still gen0.
func (t *Table) stable(s kernel.NFTablesSocket, k *kstate, gen0 uint32) (*kstate, error) {
	gen1, err := t.genID(s)
	if err != nil {
		return nil, err
	}
	if gen1 != gen0 {
		return nil, errInterrupted
	}
	k.gen, k.genOK = gen0, true
	return k, nil
}

// errRepeated reports a dump of a set's elements that sent some of them
// twice, and so left as many out.
var errRepeated = fmt.Errorf("%w (elements of a set came twice: the kernel resized its hash table during the dump)", errInterrupted)

// readElements reads a set's elements, encoded as the Table encodes
// declared ones.
//
// The kernel sends a large set in several parts, each resuming its walk of
// the set by skipping as many elements as the parts before sent. A hash
// set's walk changes order when the kernel resizes its table, which it
// does in a worker some time after elements were added (on a busy machine,
// long after the transaction): a dump across a resize sends some elements
// twice and leaves as many out, and the ruleset generation does not
// change. Sending every element once tells that none was left out, so a
// dump that repeats one is read again.
func (t *Table) readElements(s kernel.NFTablesSocket, st *nfnl.Set) (map[string]string, error) {
	for attempt := 1; ; attempt++ {
		elems, repeated, err := t.dumpElements(s, st)
		if err != nil || !repeated {
			return elems, err
		}
		if attempt == readAttempts {
			return nil, errRepeated
		}
	}
}

// dumpElements dumps a set's elements once; repeated reports elements sent
// twice (and so others left out).
func (t *Table) dumpElements(s kernel.NFTablesSocket, st *nfnl.Set) (elems map[string]string, repeated bool, err error) {
	klen := int(st.KeyLen)
	interval := st.Flags&nfnl.SetInterval != 0
	concat := len(st.Fields) > 1
	elems = map[string]string{}
	type bound struct {
		key  string
		end  bool
		data string
	}
	var bounds []bound
	sent := 0 // elements sent into elems
	err = t.request(s, nfnl.MsgGetSetElem, nfnl.FlagDump, func(w *nfnl.Writer) {
		w.Str(nfnl.ElemListTable, st.Table)
		w.Str(nfnl.ElemListSet, st.Name)
	}, func(m *nfnl.Msg) error {
		l, err := nfnl.ParseElemList(m.Data, nfnl.HdrLen+nfnl.GenLen)
		if err != nil {
			return err
		}
		return l.ForEachElem(func(e *nfnl.Elem) error {
			data := ""
			switch {
			case e.Verdict != nil:
				data = verdictData(e.Verdict.Code, e.Verdict.Chain)
			case e.Data != nil:
				data = "\x00data" + string(e.Data)
			}
			key := string(e.Key)
			if len(key) != klen {
				key = "\x00bad" + key // not the set's key length: never ours
			}
			switch {
			case !interval:
				elems[key] = data
				sent++
			case concat:
				elems[key+string(e.KeyEnd)] = data
				sent++
			default:
				bounds = append(bounds, bound{key: key, end: e.Flags&nfnl.ElemIntervalEnd != 0, data: data})
			}
			return nil
		})
	})
	if err != nil {
		return nil, false, err
	}
	if sent != len(elems) {
		return nil, true, nil
	}
	// A one-field interval set lists each range as its first key and, unless
	// it runs to the top, the key after its last, flagged as an end.
	slices.SortFunc(bounds, func(a, b bound) int {
		if c := cmp.Compare(a.key, b.key); c != 0 {
			return c
		}
		switch {
		case a.end == b.end:
			return 0
		case a.end:
			return -1
		}
		return 1
	})
	for i := 1; i < len(bounds); i++ {
		if bounds[i].key == bounds[i-1].key && bounds[i].end == bounds[i-1].end {
			return nil, true, nil
		}
	}
	for i := 0; i < len(bounds); i++ {
		b := bounds[i]
		if b.end {
			continue // an end without a start: nothing of ours
		}
		hi := bytes.Repeat([]byte{0xff}, klen)
		if i+1 < len(bounds) && bounds[i+1].end {
			hi = decremented(bounds[i+1].key)
			i++
		}
		elems[b.key+string(hi)] = b.data
	}
	return elems, false, nil
}

// decremented returns s-1 as a big-endian number.
func decremented(s string) []byte {
	b := []byte(s)
	for i := len(b) - 1; i >= 0; i-- {
		b[i]--
		if b[i] != 0xff {
			break
		}
	}
	return b
}

// readChainRules reads one chain's rules again, to learn the handles of
// rules written since the table was read.
func (t *Table) readChainRules(s kernel.NFTablesSocket, name string) ([]krule, error) {
	t.statsMu.Lock()
	t.stats.ChainReads++
	t.statsMu.Unlock()
	var rules []krule
	err := t.request(s, nfnl.MsgGetRule, nfnl.FlagDump, func(w *nfnl.Writer) {
		w.Str(nfnl.RuleTable, t.opts.Name)
		w.Str(nfnl.RuleChain, name)
	}, func(m *nfnl.Msg) error {
		r, err := nfnl.ParseRule(m.Data)
		if err != nil || r.Table != t.opts.Name || r.Chain != name {
			return err
		}
		rules = append(rules, krule{handle: r.Handle, hash: ruleHashFromUserData(r.UserData, t.opts.HashPrefix)})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w: rules of chain %s: %w", ErrRead, name, err)
	}
	return rules, nil
}
