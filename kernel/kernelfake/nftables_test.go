package kernelfake_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/netfilter"
	"github.com/nodeplane/nodeplane/nftables"
)

// TestNFTablesCapability checks that a Namespace is a kernel.NFTables: an
// nftables Table given the Namespace writes its own nf_tables, which
// NFTables shows, and a namespace of the same machine holds none of it.
func TestNFTablesCapability(t *testing.T) {
	ns := kernelfake.New(kernelfake.Options{})
	other := ns.NewNamespace(kernelfake.Options{})
	var k kernel.NFTables = ns
	tbl, err := nftables.New(nftables.Options{Name: "np", Family: ipfamily.IPv6, Role: nftables.Filter, Kernel: k, PostWriteRecheck: []time.Duration{}})
	require.NoError(t, err)
	defer tbl.Close()
	require.NoError(t, tbl.InsertRules("test", netfilter.HookInput, []netfilter.Rule{{Action: netfilter.Accept()}}))
	_, err = tbl.Apply(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"ip6 np"}, ns.NFTables().Tables(0))
	assert.Empty(t, other.NFTables().Tables(0))
}
