package idalloc_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/nodeplane/nodeplane/idalloc"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestIDAllocatorBasics(t *testing.T) {
	a := idalloc.NewIDAllocator()
	_, ok := a.Get("web")
	assert.False(t, ok)
	id := a.GetOrAlloc("web")
	assert.NotZero(t, id)
	assert.Equal(t, id, a.GetOrAlloc("web"), "second call returns the same ID")
	got, ok := a.Get("web")
	assert.True(t, ok)
	assert.Equal(t, id, got)
	name, ok := a.Reverse(id)
	assert.True(t, ok)
	assert.Equal(t, "web", name)
	assert.Equal(t, 1, a.Len())

	assert.True(t, a.Release("web"))
	assert.False(t, a.Release("web"))
	_, ok = a.Reverse(id)
	assert.False(t, ok)
	assert.Zero(t, a.Len())
	assert.Equal(t, id, a.GetOrAlloc("web"), "the ID is a function of the name")
}

func TestIDAllocatorReserveWellKnown(t *testing.T) {
	tests := []struct {
		name    string
		resName string
		resID   uint64
		wantErr error
	}{
		{name: "new pair", resName: "fresh", resID: 7},
		{name: "same pair again", resName: "known", resID: 5},
		{name: "zero id", resName: "fresh", resID: 0, wantErr: idalloc.ErrInvalidID},
		{name: "id held by another name", resName: "fresh", resID: 5, wantErr: idalloc.ErrConflict},
		{name: "name holds another id", resName: "known", resID: 6, wantErr: idalloc.ErrConflict},
		{name: "allocated name to other id", resName: "allocated", resID: 9, wantErr: idalloc.ErrConflict},
		{name: "empty name is a name", resName: "", resID: 11},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := idalloc.NewIDAllocator()
			require.NoError(t, a.ReserveWellKnown("known", 5))
			allocated := a.GetOrAlloc("allocated")
			before := a.Len()

			err := a.ReserveWellKnown(tt.resName, tt.resID)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				assert.Equal(t, before, a.Len(), "nothing changed")
				_, ok := a.Get("fresh")
				assert.False(t, ok)
				id, _ := a.Get("known")
				assert.Equal(t, uint64(5), id)
				id, _ = a.Get("allocated")
				assert.Equal(t, allocated, id)
				return
			}
			require.NoError(t, err)
			id, ok := a.Get(tt.resName)
			assert.True(t, ok)
			assert.Equal(t, tt.resID, id)
			name, ok := a.Reverse(tt.resID)
			assert.True(t, ok)
			assert.Equal(t, tt.resName, name)
		})
	}
}

func TestIDAllocatorWellKnownIDIsAvoided(t *testing.T) {
	// Pin another name to the ID "web" would get: "web" must move on.
	probe := idalloc.NewIDAllocator()
	natural := probe.GetOrAlloc("web")

	a := idalloc.NewIDAllocator()
	require.NoError(t, a.ReserveWellKnown("pinned", natural))
	id := a.GetOrAlloc("web")
	assert.NotEqual(t, natural, id)
	assert.NotZero(t, id)
}

func TestIDAllocatorRestartAnyOrderSameIDs(t *testing.T) {
	names := make([]string, 5000)
	for i := range names {
		names[i] = fmt.Sprintf("kube-svc:ns%d/svc%d", i%37, i)
	}
	before := idalloc.NewIDAllocator()
	want := map[string]uint64{}
	for _, n := range names {
		want[n] = before.GetOrAlloc(n)
	}
	for seed := range uint64(3) {
		shuffled := append([]string(nil), names...)
		rand.New(rand.NewPCG(seed, 99)).Shuffle(len(shuffled), func(i, j int) {
			shuffled[i], shuffled[j] = shuffled[j], shuffled[i]
		})
		after := idalloc.NewIDAllocator() // a "restarted" process
		for _, n := range shuffled {
			require.Equal(t, want[n], after.GetOrAlloc(n), "name %q", n)
		}
	}
}

func TestIDAllocatorConcurrentUse(t *testing.T) {
	a := idalloc.NewIDAllocator()
	const workers, names = 8, 200
	results := make([][]uint64, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			results[w] = make([]uint64, names)
			for i := range names {
				n := fmt.Sprintf("set-%d", i)
				results[w][i] = a.GetOrAlloc(n)
				if got, ok := a.Reverse(results[w][i]); !ok || got != n {
					t.Errorf("Reverse(%d) = %q, %v; want %q", results[w][i], got, ok, n)
				}
				_ = a.Len()
			}
		})
	}
	wg.Wait()
	for w := 1; w < workers; w++ {
		assert.Equal(t, results[0], results[w], "worker %d saw different IDs", w)
	}
	assert.Equal(t, names, a.Len())
}
