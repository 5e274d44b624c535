package managertest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/ipsets"
	"github.com/nodeplane/nodeplane/iptables"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
)

// FakeTable returns an iptables-nft Table of the named table ("filter" or
// "nat") and family f on the fake namespace ns, owning the chains that
// start with prefix. It does not read the kernel again after a write (no
// PostWriteRecheck), so the calls a unit test counts are the pass's own.
func FakeTable(t testing.TB, ns *kernelfake.Namespace, table string, f ipfamily.Family, prefix string) *iptables.Table {
	t.Helper()
	tbl, err := iptables.New(iptables.Options{Table: table, Family: f, Backend: iptables.BackendNFT,
		ChainPrefix: prefix, Kernel: ns, PostWriteRecheck: []time.Duration{}})
	require.NoError(t, err)
	return tbl
}

// FakeSets returns the ip sets of family f on the fake namespace ns, named
// with prefix.
func FakeSets(t testing.TB, ns *kernelfake.Namespace, f ipfamily.Family, prefix string) *ipsets.IPSets {
	t.Helper()
	sets, err := ipsets.New(ipsets.Options{Family: f, Prefix: prefix, Kernel: ns})
	require.NoError(t, err)
	return sets
}

// NewManager returns newManager(opts) after mutate (when not nil) has
// changed opts, failing the test on an error: a unit test's Manager, built
// from options that a case may alter.
func NewManager[O, M any](t testing.TB, newManager func(O) (M, error), opts O, mutate func(*O)) M {
	t.Helper()
	if mutate != nil {
		mutate(&opts)
	}
	m, err := newManager(opts)
	require.NoError(t, err)
	return m
}

// UpdatePass passes msgs to m (Update) and runs one Pass of m and drivers.
func UpdatePass(m dataplane.Manager, msgs []any, drivers ...dataplane.Driver) error {
	Update(m, msgs...)
	_, err := Pass(context.Background(), []dataplane.Manager{m}, drivers...)
	return err
}

// Update passes msgs to m's OnUpdate, in order, as the loop would before
// its next pass (see Pass).
func Update(m dataplane.Manager, msgs ...any) {
	for _, msg := range msgs {
		m.OnUpdate(msg)
	}
}
