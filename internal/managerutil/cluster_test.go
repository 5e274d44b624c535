package managerutil_test

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/internal/managerutil"
	"github.com/nodeplane/nodeplane/ipfamily"
)

func TestRefused(t *testing.T) {
	cause := cluster.Pool{ID: "pods", CIDR: netip.MustParsePrefix("10.244.0.1/16")}.Validate()
	sentinel := errors.New("pkg: invalid pool")
	err := managerutil.Refused(sentinel, cause)
	require.EqualError(t, err, `pkg: invalid pool: pool "pods": 10.244.0.1/16 has host bits set (the network is 10.244.0.0/16)`)
	require.ErrorIs(t, err, sentinel)
	require.ErrorIs(t, err, cluster.ErrInvalid)
	require.ErrorIs(t, err, ipfamily.ErrHostBits)
}
