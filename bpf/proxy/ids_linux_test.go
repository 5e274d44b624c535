package proxy

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/idalloc"
)

// Service IDs are handed out in turn within the allocator's ranges,
// wrapping past the last: an ID given back is not given again while
// another is free, and a full allocator says so.
func TestServiceIDsInTurn(t *testing.T) {
	ids, err := idalloc.NewIndexAllocator(idalloc.IndexOptions{Ranges: []idalloc.Range{{Min: 5, Max: 6}, {Min: 9, Max: 9}}, NoDefaultExclusions: true})
	require.NoError(t, err)
	k := &kstate{ids: ids}
	var got []uint32
	for range 3 {
		id, err := k.grabID()
		require.NoError(t, err)
		got = append(got, id)
	}
	require.Equal(t, []uint32{5, 6, 9}, got)
	_, err = k.grabID()
	require.ErrorIs(t, err, idalloc.ErrExhausted)
	require.NoError(t, ids.Release(6))
	require.NoError(t, ids.Release(5))
	id, err := k.grabID()
	require.NoError(t, err)
	require.Equal(t, uint32(5), id, "past the last range, back to the first")
	id, err = k.grabID()
	require.NoError(t, err)
	require.Equal(t, uint32(6), id)

	k.lastID = 7 // between ranges, as a saved ID of wider ranges may be
	require.NoError(t, ids.Release(9))
	id, err = k.grabID()
	require.NoError(t, err)
	require.Equal(t, uint32(9), id)
}
