package nftables

import (
	"context"
	"fmt"

	"github.com/nodeplane/nodeplane/internal/nfnl"
)

// Counter is what one rule's counter counted.
type Counter struct {
	// Packets and Bytes are the packets and bytes the rule matched.
	Packets, Bytes uint64
}

// Counters reads the counters of the Table's rules from the kernel
// (Options.Counters must be set): for each declared chain that is in the
// kernel (a hook's rules are in the chain BaseChain names), one Counter per
// declared rule, in order; a rule not in the kernel counts zero. It reads
// only the rules of the table and writes nothing. A nil ctx is
// context.Background().
func (t *Table) Counters(ctx context.Context) (map[string][]Counter, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.opts.Counters {
		return nil, fmt.Errorf("%w: Counters is off: rules count nothing", ErrInvalidOptions)
	}
	s, err := t.socket()
	if err != nil {
		return nil, err
	}
	index := map[string]map[string]int{}
	out := map[string][]Counter{}
	for name, c := range t.chains {
		idx := make(map[string]int, len(c.rules))
		for i := range c.rules {
			idx[c.rules[i].hash] = i
		}
		index[name] = idx
	}
	err = t.request(s, nfnl.MsgGetRule, nfnl.FlagDump, func(w *nfnl.Writer) { w.Str(nfnl.RuleTable, t.opts.Name) }, func(m *nfnl.Msg) error {
		r, err := nfnl.ParseRule(m.Data)
		if err != nil || r.Table != t.opts.Name {
			return err
		}
		i, ok := index[r.Chain][ruleHashFromUserData(r.UserData, t.opts.HashPrefix)]
		if !ok {
			return nil
		}
		if out[r.Chain] == nil {
			out[r.Chain] = make([]Counter, len(t.chains[r.Chain].rules))
		}
		return nfnl.WalkExprs(r.Exprs, func(name string, data []byte) error {
			if name != "counter" {
				return nil
			}
			p, b, err := nfnl.ParseCounter(data)
			out[r.Chain][i] = Counter{Packets: p, Bytes: b}
			return err
		})
	})
	if err != nil {
		t.dropSocket()
		return nil, fmt.Errorf("%w: counters of table %s %s: %w", ErrRead, familyName(t.opts.Family), t.opts.Name, err)
	}
	return out, nil
}
