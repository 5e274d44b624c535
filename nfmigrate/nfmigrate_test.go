package nfmigrate_test

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/command"
	"github.com/nodeplane/nodeplane/internal/textform/textformtest"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/iptables"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/netfilter"
	"github.com/nodeplane/nodeplane/nfmigrate"
	"github.com/nodeplane/nodeplane/nftables"
)

// fakeNS is a kernelfake namespace (it serves the iptables binaries and
// nf_tables) that records the binaries its Runner runs.
type fakeNS struct {
	*kernelfake.Namespace
	ran *[]string // the binaries Runner ran
}

// Runner runs the binaries in the fake, and records their names.
func (f fakeNS) Runner() command.Runner {
	return command.RunnerFunc(func(ctx context.Context, stdin io.Reader, name string, args ...string) ([]byte, error) {
		*f.ran = append(*f.ran, name)
		return f.Namespace.Runner().Run(ctx, stdin, name, args...)
	})
}

func newFake() fakeNS {
	return fakeNS{Namespace: kernelfake.New(kernelfake.Options{}), ran: new([]string)}
}

// foreignIPTables is a chain and a rule of someone else, in the filter
// table of iptables backend b.
const foreignIPTables = `*filter
:KUBE-FORWARD - [0:0]
-A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD
-A FORWARD -i eth9 -m comment --comment "not np:AAAAAAAAAAAAAAAA" -j ACCEPT
COMMIT
`

// populate writes what an agent leaves in every backend: our chains and
// jumps in both iptables backends and families (filter and nat), our
// nftables tables, and foreign rules, chains and a foreign table beside
// them.
func populate(t *testing.T, ns fakeNS) {
	t.Helper()
	ctx := context.Background()
	for _, b := range []iptables.Backend{iptables.BackendLegacy, iptables.BackendNFT} {
		for _, f := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
			_, err := ns.Runner().Run(ctx, strings.NewReader(foreignIPTables), b.RestoreCommand(f), "--noflush")
			require.NoError(t, err)
			for _, table := range []string{"filter", "nat"} {
				ipt, err := iptables.New(iptables.Options{Table: table, Family: f, Backend: b, ChainPrefix: "np-", Kernel: ns, PostWriteRecheck: []time.Duration{}})
				require.NoError(t, err)
				require.NoError(t, ipt.SetChains(netfilter.Chain{Name: "np-c", Rules: []netfilter.Rule{{Action: netfilter.Return()}}}))
				require.NoError(t, ipt.InsertRules("test", netfilter.HookOutput, []netfilter.Rule{{Action: netfilter.Jump("np-c")}}))
				_, err = ipt.Apply(ctx)
				require.NoError(t, err)
			}
		}
	}
	for _, name := range []string{"np", "foreign"} {
		for _, f := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
			tbl, err := nftables.New(nftables.Options{Name: name, Family: f, Role: nftables.Filter, Kernel: ns, PostWriteRecheck: []time.Duration{}})
			require.NoError(t, err)
			require.NoError(t, tbl.InsertRules("test", netfilter.HookInput, []netfilter.Rule{{Action: netfilter.Accept()}}))
			_, err = tbl.Apply(ctx)
			require.NoError(t, err)
			require.NoError(t, tbl.Close())
		}
	}
}

// iptablesState returns the save output of backend b and family f,
// without comment lines.
func iptablesState(t *testing.T, ns fakeNS, b iptables.Backend, f ipfamily.Family) string {
	t.Helper()
	out, err := ns.Runner().Run(context.Background(), nil, b.SaveCommand(f))
	require.NoError(t, err)
	var keep []string
	for _, l := range strings.Split(string(out), "\n") {
		if !strings.HasPrefix(l, "#") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

// TestRemoveLeftovers switches to each backend in turn and checks that
// ours is gone from every other backend, that the kept backend is left
// byte for byte, and that foreign rules, chains and tables stay.
func TestRemoveLeftovers(t *testing.T) {
	backends := map[nfmigrate.Backend]iptables.Backend{nfmigrate.IPTablesLegacy: iptables.BackendLegacy, nfmigrate.IPTablesNFT: iptables.BackendNFT}
	for _, keep := range []nfmigrate.Backend{nfmigrate.IPTablesLegacy, nfmigrate.IPTablesNFT, nfmigrate.NFTables} {
		t.Run(keep.String(), func(t *testing.T) {
			ns := newFake()
			populate(t, ns)
			kept := map[string]string{}
			for _, b := range backends {
				for _, f := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
					kept[fmt.Sprint(b, f)] = iptablesState(t, ns, b, f)
				}
			}
			nftBefore := ns.NFTables().Tables(0)
			require.NoError(t, nfmigrate.RemoveLeftovers(context.Background(), ns, keep, nfmigrate.Owned{ChainPrefix: "np-", NFTablesTables: []string{"np"}}))
			for nb, b := range backends {
				for _, f := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
					got := iptablesState(t, ns, b, f)
					if nb == keep {
						assert.Equal(t, kept[fmt.Sprint(b, f)], got, "the kept backend is not touched")
						continue
					}
					assert.NotContains(t, got, "np-c", "%s %v", b, f)
					assert.NotRegexp(t, `--comment "?np:[A-Za-z0-9_-]{16}"? -j`, got, "%s %v", b, f)
					assert.Contains(t, got, "-A FORWARD -m comment --comment \"kubernetes forwarding rules\" -j KUBE-FORWARD", "%s %v", b, f)
					assert.Contains(t, got, `--comment "not np:AAAAAAAAAAAAAAAA" -j ACCEPT`, "%s %v", b, f)
				}
			}
			if keep == nfmigrate.NFTables {
				assert.Equal(t, nftBefore, ns.NFTables().Tables(0))
			} else {
				assert.Equal(t, []string{"ip foreign", "ip6 foreign"}, ns.NFTables().Tables(0))
			}
			// Once more: nothing is left, so nothing is written.
			*ns.ran = nil
			_, before, _, _ := ns.NFTables().Counts()
			require.NoError(t, nfmigrate.RemoveLeftovers(context.Background(), ns, keep, nfmigrate.Owned{ChainPrefix: "np-", NFTablesTables: []string{"np"}}))
			for _, name := range *ns.ran {
				assert.NotContains(t, name, "restore", "a second run writes nothing")
			}
			assert.NotEmpty(t, *ns.ran, "the other iptables backends were read")
			_, after, _, _ := ns.NFTables().Counts()
			assert.Equal(t, before, after, "a second run commits nothing")
		})
	}
}

// TestRemoveLeftoversBadInput checks that bad input is an error and that
// nothing is run.
func TestRemoveLeftoversBadInput(t *testing.T) {
	ns := newFake()
	err := nfmigrate.RemoveLeftovers(context.Background(), ns, 0, nfmigrate.Owned{ChainPrefix: "np-"})
	require.ErrorIs(t, err, nfmigrate.ErrInvalidOptions)
	err = nfmigrate.RemoveLeftovers(context.Background(), ns, nfmigrate.NFTables, nfmigrate.Owned{})
	require.ErrorIs(t, err, nfmigrate.ErrInvalidOptions)
	// Prefixes and table names the writers refuse: refused before any
	// backend is touched (they were found table by table, after the
	// others were cleaned).
	for _, o := range []nfmigrate.Owned{
		{ChainPrefix: "PO"}, // would claim POSTROUTING
		{ChainPrefix: "np-", HashPrefix: "bad prefix"},
		{ChainPrefix: "np-", NFTablesTables: []string{"np", "filter"}}, // iptables-nft's
		{ChainPrefix: "np-", NFTablesTables: []string{""}},
		{ChainPrefix: "np-", NFTablesTables: []string{"bad name;"}},
	} {
		err = nfmigrate.RemoveLeftovers(context.Background(), ns, nfmigrate.IPTablesLegacy, o)
		require.ErrorIs(t, err, nfmigrate.ErrInvalidOptions, "%+v", o)
	}
	assert.Empty(t, *ns.ran)
	_, committed, _, dumps := ns.NFTables().Counts()
	assert.Zero(t, committed+dumps)
}

func TestBackendText(t *testing.T) {
	textformtest.Enum(t, ".", map[string]nfmigrate.Backend{
		"IPTablesLegacy": nfmigrate.IPTablesLegacy, "IPTablesNFT": nfmigrate.IPTablesNFT, "NFTables": nfmigrate.NFTables,
	})
}
