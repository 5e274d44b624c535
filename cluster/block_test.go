package cluster_test

import (
	"encoding/json"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/ipfamily"
)

func TestBlockValidate(t *testing.T) {
	require.NoError(t, (&cluster.Block{CIDR: netip.MustParsePrefix("10.244.1.0/24"), Node: "n1"}).Validate())
	require.NoError(t, (&cluster.Block{CIDR: netip.MustParsePrefix("fd00:10:244:1::/64"), Node: "n1"}).Validate())

	err := (&cluster.Block{CIDR: netip.MustParsePrefix("10.244.1.7/24"), Node: "n1"}).Validate()
	require.ErrorIs(t, err, cluster.ErrInvalid)
	require.ErrorIs(t, err, ipfamily.ErrHostBits)
	require.EqualError(t, err, "cluster: invalid block 10.244.1.7/24: host bits set (the network is 10.244.1.0/24)")

	err = (&cluster.Block{CIDR: netip.MustParsePrefix("10.244.1.0/24")}).Validate()
	require.EqualError(t, err, "cluster: invalid block 10.244.1.0/24: no node")
	require.ErrorIs(t, (&cluster.Block{Node: "n1"}).Validate(), cluster.ErrInvalid)
	var nilBlock *cluster.Block
	require.ErrorIs(t, nilBlock.Validate(), cluster.ErrInvalid)

	require.NoError(t, (&cluster.BlockRemove{CIDR: netip.MustParsePrefix("10.244.1.0/24")}).Validate())
	require.ErrorIs(t, (&cluster.BlockRemove{}).Validate(), cluster.ErrInvalid)
	require.ErrorIs(t, (&cluster.BlockRemove{CIDR: netip.MustParsePrefix("fd00::1/64")}).Validate(), ipfamily.ErrHostBits)
}

func TestBlockJSON(t *testing.T) {
	b := cluster.Block{CIDR: netip.MustParsePrefix("10.244.1.0/24"), Node: "n1"}
	text, err := json.Marshal(b)
	require.NoError(t, err)
	require.JSONEq(t, `{"cidr":"10.244.1.0/24","node":"n1"}`, string(text))
	var back cluster.Block
	require.NoError(t, json.Unmarshal(text, &back))
	require.Equal(t, b, back)
}
