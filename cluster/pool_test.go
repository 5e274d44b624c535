package cluster_test

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/ipfamily"
)

func TestPoolValidate(t *testing.T) {
	for _, p := range []cluster.Pool{
		{ID: "v4", CIDR: netip.MustParsePrefix("10.244.0.0/16"), Masquerade: true},
		{ID: "v6", CIDR: netip.MustParsePrefix("fd00:10:244::/48")},
	} {
		require.NoError(t, p.Validate(), p.ID)
	}
	for _, tc := range []struct {
		p    cluster.Pool
		want string
	}{
		{cluster.Pool{CIDR: netip.MustParsePrefix("10.0.0.0/8")}, "cluster: invalid pool: empty ID"},
		{cluster.Pool{ID: "none"}, `cluster: invalid pool "none": no valid CIDR`},
		{cluster.Pool{ID: "host", CIDR: netip.MustParsePrefix("10.244.0.1/16")},
			`cluster: invalid pool "host": 10.244.0.1/16 has host bits set (the network is 10.244.0.0/16)`},
		{cluster.Pool{ID: "host6", CIDR: netip.MustParsePrefix("fd00::1/64")},
			`cluster: invalid pool "host6": fd00::1/64 has host bits set (the network is fd00::/64)`},
	} {
		err := tc.p.Validate()
		require.ErrorIs(t, err, cluster.ErrInvalid)
		require.EqualError(t, err, tc.want)
	}
	err := cluster.Pool{ID: "host", CIDR: netip.MustParsePrefix("10.244.0.1/16")}.Validate()
	require.ErrorIs(t, err, ipfamily.ErrHostBits)

	require.NoError(t, cluster.PoolRemove{ID: "v4"}.Validate())
	err = cluster.PoolRemove{}.Validate()
	require.ErrorIs(t, err, cluster.ErrInvalid)
	require.EqualError(t, err, "cluster: invalid pool remove: empty ID")
}

// Validate checks a message before it is sent: a CIDR with host bits set is
// refused (the masquerade manager would refuse it too, and change nothing).
func ExamplePool_Validate() {
	fmt.Println(cluster.Pool{ID: "pods", CIDR: netip.MustParsePrefix("10.244.0.0/16"), Masquerade: true}.Validate())
	fmt.Println(cluster.Pool{ID: "pods", CIDR: netip.MustParsePrefix("10.244.0.1/16")}.Validate())
	// Output:
	// <nil>
	// cluster: invalid pool "pods": 10.244.0.1/16 has host bits set (the network is 10.244.0.0/16)
}
