//go:build linux

package maps_test

import (
	"testing"

	"github.com/cilium/ebpf"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/bpf/maps"
	"github.com/nodeplane/nodeplane/internal/testkit/bpftest"
)

// svcKey and backend are a key and a value of the shape a load balancer
// keeps: fixed-size fields, explicit padding.
type svcKey struct {
	Addr  uint32
	Port  uint16
	Proto uint8
	Pad   uint8
}

type backend struct {
	ID     uint32
	Weight uint32
}

var u32Spec = maps.Spec{Name: "np_test", Type: ebpf.Hash, KeySize: 4, ValueSize: 4, MaxEntries: 20000}

// openMap opens spec on a fresh bpffs and closes the map after the test.
func openMap(t testing.TB, spec maps.Spec) (*ebpf.Map, string) {
	t.Helper()
	dir := bpftest.Dir(t)
	m, err := maps.Open(dir, spec)
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	return m, dir
}

// dump reads m key by key, independently of the package.
func dump[K comparable, V any](t testing.TB, m *ebpf.Map) map[K]V {
	t.Helper()
	out := map[K]V{}
	var k K
	var v V
	it := m.Iterate()
	for it.Next(&k, &v) {
		out[k] = v
	}
	require.NoError(t, it.Err())
	return out
}

// seq returns n entries i → i*10+1, keys from first.
func seq(first, n uint32) map[uint32]uint32 {
	out := make(map[uint32]uint32, n)
	for i := first; i < first+n; i++ {
		out[i] = i*10 + 1
	}
	return out
}
