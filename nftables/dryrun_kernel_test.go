//go:build linux

package nftables_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/nftables/userdata"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/internal/nfnl"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake/nftablesfake"
)

// loggingKernel records the write requests the Table sends to the real
// nf_tables, as the fake's Refuse hook sees them (requestLog).
type loggingKernel struct {
	kernel.NFTables
	log *requestLog
}

func (k loggingKernel) OpenNFTablesSocket() (kernel.NFTablesSocket, error) {
	s, err := k.NFTables.OpenNFTablesSocket()
	return loggingSocket{s, k.log}, err
}

type loggingSocket struct {
	kernel.NFTablesSocket
	log *requestLog
}

func (s loggingSocket) Send(b []byte) error {
	_ = nfnl.ForEachMsg(b, func(m *nfnl.Msg) error {
		r := nftablesfake.Request{Family: m.Family}
		switch m.Type {
		case nfnl.Type(nfnl.MsgNewTable), nfnl.Type(nfnl.MsgDestroyTable):
			tb, _ := nfnl.ParseTable(m.Data)
			r.Op, r.Table = "newtable", tb.Name
			if m.Type == nfnl.Type(nfnl.MsgDestroyTable) {
				r.Op = "deltable"
			}
		case nfnl.Type(nfnl.MsgNewChain), nfnl.Type(nfnl.MsgDelChain):
			c, _ := nfnl.ParseChain(m.Data)
			r.Op, r.Table, r.Chain = "newchain", c.Table, c.Name
			if m.Type == nfnl.Type(nfnl.MsgDelChain) {
				r.Op = "delchain"
			}
		case nfnl.Type(nfnl.MsgNewRule), nfnl.Type(nfnl.MsgDelRule):
			x, _ := nfnl.ParseRule(m.Data)
			r.Op, r.Table, r.Chain = "delrule", x.Table, x.Chain
			if m.Type == nfnl.Type(nfnl.MsgNewRule) {
				r.Op = "newrule"
				r.Comment, _ = userdata.GetString(x.UserData, userdata.TypeComment)
			}
		case nfnl.Type(nfnl.MsgNewSet), nfnl.Type(nfnl.MsgDelSet):
			x, _ := nfnl.ParseSet(m.Data)
			r.Op, r.Table, r.Set = "newset", x.Table, x.Name
			if m.Type == nfnl.Type(nfnl.MsgDelSet) {
				r.Op = "delset"
			}
		case nfnl.Type(nfnl.MsgNewSetElem), nfnl.Type(nfnl.MsgDelSetElem):
			l, _ := nfnl.ParseElemList(m.Data, nfnl.HdrLen+nfnl.GenLen)
			r.Op, r.Table, r.Set = "newsetelem", l.Table, l.Set
			if m.Type == nfnl.Type(nfnl.MsgDelSetElem) {
				r.Op = "delsetelem"
			}
			return l.ForEachElem(func(*nfnl.Elem) error { s.log.add(r); return nil })
		default:
			return nil // a read, or the batch's frame
		}
		s.log.add(r)
		return nil
	})
	return s.NFTablesSocket.Send(b)
}

// kdrift changes the table behind the Table's back with nft, as another
// writer would (a change that does not apply is left out).
func kdrift(e *kenv, rng *rand.Rand, fam string) {
	ctx := context.Background()
	chain := fmt.Sprintf("np-c%d", rng.IntN(6))
	var args []string
	switch rng.IntN(4) {
	case 0:
		args = []string{"flush", "chain", fam, "np", chain}
	case 1:
		args = []string{"add", "chain", fam, "np", "np-stray"}
	case 2:
		args = []string{"flush", "set", fam, "np", "addrs"}
	default:
		args = []string{"add", "rule", fam, "np", chain, "counter"}
	}
	_, _ = e.ns.Exec(ctx, "nft", args...)
}

// TestKernelPlan runs checkPlan's rounds against the real nf_tables, in
// both families: random declarations (jumps to undeclared chains and
// loops included) and drift made with nft; Plan writes nothing, the Apply
// right after sends exactly the planned requests, and then Plan is empty,
// an Apply writes nothing and State is in sync.
func TestKernelPlan(t *testing.T) {
	ctx := context.Background()
	for _, fam := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
		t.Run(fam.String(), func(t *testing.T) {
			e := newKenv(t)
			g := &planGen{rng: rand.New(rand.NewPCG(uint64(fam), 21)), fam: fam}
			log := &requestLog{table: "np"}
			opts := kopts(e, fam)
			opts.Kernel = loggingKernel{e.k, log}
			opts.ChainPrefix = "np-"
			tbl := newTable(t, opts)
			require.NoError(t, tbl.SetSets(g.sets()...))
			compared := 0
			for round := range 12 {
				for range 1 + g.rng.IntN(3) {
					g.declare(t, tbl)
				}
				if g.rng.IntN(3) == 0 {
					kdrift(e, g.rng, familyName(fam))
					tbl.QueueResync()
				}
				if checkPlan(t, ctx, tbl, nil, log, fmt.Sprintf("round %d", round)) {
					compared++
				}
			}
			require.GreaterOrEqual(t, compared, 6, "rounds whose Apply was refused nothing")
			p, err := tbl.Plan(ctx)
			require.NoError(t, err)
			require.True(t, p.Empty(), "%s", p)
		})
	}
}
