package nfcore_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/internal/nfcore"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/netfilter"
)

// TestQuote checks that a model error quoted by a backend names the
// backend once, keeps the model's text and detail, and matches the model's
// sentinels and the extra ones.
func TestQuote(t *testing.T) {
	extra := errors.New("backend: invalid set")
	_, err := netfilter.SetMetadata{Name: "s", Type: netfilter.HashIP, Family: ipfamily.IPv6}.Normalize(ipfamily.IPv4, "np-")
	require.Error(t, err)
	q := nfcore.Quote("ipsets", err, " (while declaring)", extra)
	assert.Equal(t, `ipsets: wrong IP family: set "s" is IPv6, the backend is IPv4 (while declaring)`, q.Error())
	assert.Equal(t, 0, strings.Count(q.Error(), "netfilter: "))
	assert.ErrorIs(t, q, netfilter.ErrWrongFamily)
	assert.ErrorIs(t, q, ipfamily.ErrWrongFamily)
	assert.ErrorIs(t, q, extra)
	assert.NoError(t, nfcore.Quote("ipsets", nil, "detail"))
}
