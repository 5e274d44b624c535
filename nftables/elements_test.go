//go:build linux

package nftables_test

import (
	"context"
	"net/netip"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/kernel/kernelfake/nftablesfake"
	"github.com/nodeplane/nodeplane/netfilter"
	"github.com/nodeplane/nodeplane/nftables"
)

// manyAddrs is a set of n addresses 10.1.x.y and a chain whose rule uses
// it, declared on tbl.
func manyAddrs(t *testing.T, tbl *nftables.Table, n int) {
	t.Helper()
	s := nftables.Set{Name: "many", Key: []nftables.KeyType{nftables.TypeAddr}}
	for i := range n {
		s.Elements = append(s.Elements, nftables.Elem(nftables.Addr(netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}))))
	}
	require.NoError(t, tbl.SetSets(s))
	require.NoError(t, tbl.SetChains(netfilter.Chain{Name: "c", ForceProgramming: true, Rules: []netfilter.Rule{
		{Matches: []netfilter.Match{netfilter.SourceIPSet("many")}, Action: netfilter.Accept()}}}))
}

// Elements past ElementsPerTransaction go in further transactions, which
// the Table encodes while the kernel takes the one before: an element the
// kernel refuses in one of them is left out alone, the transactions after
// it are still written, and Apply returns after all of them.
func TestElementsInSeveralTransactionsRefusedElementIsolated(t *testing.T) {
	ns := nftablesfake.New()
	o := fakeOpts(ns)
	o.ElementsPerTransaction = 1000
	tbl := newTable(t, o)
	manyAddrs(t, tbl, 5500)
	// The kernel refuses the 2500th element it is sent (in the third
	// transaction), and that element again when it comes back.
	seen, bad := 0, ""
	ns.Refuse(func(r nftablesfake.Request) syscall.Errno {
		if r.Op != "newsetelem" {
			return 0
		}
		if seen++; seen == 2500 {
			bad = string(r.Key)
		}
		if string(r.Key) == bad {
			return syscall.E2BIG
		}
		return 0
	})
	before := runtime.NumGoroutine()
	_, err := tbl.Apply(context.Background())
	require.ErrorIs(t, err, dataplane.ErrPartial)
	assert.ErrorIs(t, err, syscall.E2BIG)
	var pe *dataplane.PartialError
	require.ErrorAs(t, err, &pe)
	require.Len(t, pe.Objects(), 1, err.Error())
	assert.Equal(t, nftables.KindElement, pe.Objects()[0].Kind)
	badAddr := netip.AddrFrom4([4]byte([]byte(bad))).String()
	assert.Equal(t, "many "+badAddr, pe.Objects()[0].Name)
	assert.Len(t, ns.Elements(v4, "np", "many"), 5499, "every other element is written")
	assert.NotContains(t, ns.Elements(v4, "np", "many"), badAddr)
	st := tbl.WorkStats()
	assert.Equal(t, 7, st.Transactions, "six, and the refused third again without its element")
	assert.Equal(t, 1, st.TransactionErrors)
	assert.LessOrEqual(t, runtime.NumGoroutine(), before, "no goroutine is left behind")

	// The kernel holds what the Table thinks it holds: read again, there
	// is nothing to write but the element held back until its retry.
	n, err := nftables.PendingAfterRead(tbl)
	require.NoError(t, err)
	assert.Zero(t, n)
}

// A cancelled context stops an Apply between two element transactions:
// the one in flight completes, no further one is sent, Apply returns the
// context's error, and the next Apply writes the rest.
func TestElementsInSeveralTransactionsCancelled(t *testing.T) {
	ns := nftablesfake.New()
	o := fakeOpts(ns)
	o.ElementsPerTransaction = 1000
	tbl := newTable(t, o)
	manyAddrs(t, tbl, 5500)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var seen atomic.Int32
	ns.Refuse(func(r nftablesfake.Request) syscall.Errno {
		if r.Op == "newsetelem" && seen.Add(1) == 2500 {
			cancel() // while the kernel takes the third transaction
		}
		return 0
	})
	_, err := tbl.Apply(ctx)
	require.ErrorIs(t, err, context.Canceled)
	ns.Refuse(nil)
	tx, committed, _, _ := ns.Counts()
	assert.Equal(t, 3, committed, "the transaction in flight completes; none after it")
	assert.Equal(t, 3, tx)
	assert.Len(t, ns.Elements(v4, "np", "many"), 3000)

	apply(t, tbl)
	assert.Len(t, ns.Elements(v4, "np", "many"), 5500)
	assert.Equal(t, 5500, tbl.WorkStats().Elements)
	ns.ResetCounts()
	apply(t, tbl)
	tx, _, _, _ = ns.Counts()
	assert.Zero(t, tx, "in sync")
}
