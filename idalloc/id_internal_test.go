package idalloc

import (
	"crypto/sha256"
	"encoding/binary"
	"hash/fnv"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// smallHash maps every (attempt, name) into 0..space-1 so that collisions,
// zero candidates and exhaustion of the hash attempts all happen often.
func smallHash(space uint64) func(uint64, string) uint64 {
	return func(attempt uint64, name string) uint64 {
		h := fnv.New64a()
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], attempt)
		h.Write(b[:])
		h.Write([]byte(name))
		return h.Sum64() % space
	}
}

func TestCandidateMatchesDocumentedFormula(t *testing.T) {
	for _, name := range []string{"", "a", "kube-svc:default/web", string(make([]byte, 300))} {
		for _, attempt := range []uint64{0, 1, 7, 1 << 40} {
			buf := binary.LittleEndian.AppendUint64(nil, attempt)
			sum := sha256.Sum256(append(buf, name...))
			want := binary.LittleEndian.Uint64(sum[:8])
			assert.Equal(t, want, candidate(attempt, name), "attempt %d name %q", attempt, name)
		}
	}
}

func TestIDAllocatorCollisionRetry(t *testing.T) {
	// A scripted hash: every name's attempt 0 is 42, attempt 1 is 0 (never
	// allowed), attempt n≥2 is 100+n+len(name).
	scripted := func(attempt uint64, name string) uint64 {
		switch attempt {
		case 0:
			return 42
		case 1:
			return 0
		}
		return 100 + attempt + uint64(len(name))
	}
	a := NewIDAllocator()
	a.hash = scripted

	assert.Equal(t, uint64(42), a.GetOrAlloc("a"))
	assert.Equal(t, uint64(103), a.GetOrAlloc("b"), "collision on 42, skip 0, take attempt 2")
	assert.Equal(t, uint64(104), a.GetOrAlloc("cc"), "42 taken, 0 skipped, attempt 2 = 104")
	assert.Equal(t, uint64(105), a.GetOrAlloc("d"), "attempts give 42 (a), 0, 103 (b), 104 (cc), then 105")

	// Releasing "a" frees 42 for the next name.
	require.True(t, a.Release("a"))
	assert.Equal(t, uint64(42), a.GetOrAlloc("e"))
	// Existing names keep their IDs.
	assert.Equal(t, uint64(103), a.GetOrAlloc("b"))
}

func TestIDAllocatorCollisionMakesOrderMatter(t *testing.T) {
	// Two names that collide on attempt 0: whichever registers first keeps
	// the attempt-0 ID. This is the documented exception to order
	// independence.
	h := func(attempt uint64, _ string) uint64 { return 1 + attempt*1000 }
	first := NewIDAllocator()
	first.hash = h
	second := NewIDAllocator()
	second.hash = h
	x1, y1 := first.GetOrAlloc("x"), first.GetOrAlloc("y")
	y2, x2 := second.GetOrAlloc("y"), second.GetOrAlloc("x")
	assert.Equal(t, x1, y2)
	assert.Equal(t, y1, x2)
	assert.NotEqual(t, x1, x2)
}

func TestIDAllocatorDegenerateHashFallsBackToProbing(t *testing.T) {
	a := NewIDAllocator()
	a.hash = func(uint64, string) uint64 { return 0 }
	seen := map[uint64]bool{}
	for i := range 5 {
		id := a.GetOrAlloc(strconv.Itoa(i))
		require.NotZero(t, id)
		require.False(t, seen[id], "id %d handed out twice", id)
		seen[id] = true
	}
	assert.Equal(t, 5, a.Len())

	// A hash pinned to a taken ID probes upwards, wrapping past 2^64-1 and
	// skipping 0.
	b := NewIDAllocator()
	b.hash = func(uint64, string) uint64 { return ^uint64(0) }
	assert.Equal(t, ^uint64(0), b.GetOrAlloc("p"))
	assert.Equal(t, uint64(1), b.GetOrAlloc("q"))
	assert.Equal(t, uint64(2), b.GetOrAlloc("r"))
}

// idModel is the reference for the IDAllocator: two maps and the same
// candidate function, written as plainly as possible.
type idModel struct {
	hash   func(uint64, string) uint64
	byName map[string]uint64
	byID   map[uint64]string
}

func (m *idModel) alloc(name string) uint64 {
	if id, ok := m.byName[name]; ok {
		return id
	}
	var id uint64
	attempt := uint64(0)
	for ; attempt < maxHashAttempts; attempt++ {
		id = m.hash(attempt, name)
		if _, taken := m.byID[id]; id != 0 && !taken {
			break
		}
	}
	if attempt == maxHashAttempts {
		for {
			id++
			if _, taken := m.byID[id]; id != 0 && !taken {
				break
			}
		}
	}
	m.byName[name] = id
	m.byID[id] = name
	return id
}

func runIDOps(t *testing.T, a *IDAllocator, m *idModel, ops []byte) {
	t.Helper()
	for i := 0; i+2 < len(ops); i += 3 {
		name := "n" + strconv.Itoa(int(ops[i+1]%32))
		id := uint64(ops[i+2] % 16)
		switch ops[i] % 5 {
		case 0, 1:
			require.Equal(t, m.alloc(name), a.GetOrAlloc(name), "GetOrAlloc(%q)", name)
		case 2:
			err := a.ReserveWellKnown(name, id)
			owner, idTaken := m.byID[id]
			old, nameTaken := m.byName[name]
			switch {
			case id == 0:
				require.ErrorIs(t, err, ErrInvalidID)
			case idTaken && owner == name:
				require.NoError(t, err)
			case idTaken || nameTaken && old != id:
				require.ErrorIs(t, err, ErrConflict)
			default:
				require.NoError(t, err)
				m.byName[name] = id
				m.byID[id] = name
			}
		case 3:
			old, had := m.byName[name]
			require.Equal(t, had, a.Release(name), "Release(%q)", name)
			delete(m.byName, name)
			delete(m.byID, old)
		case 4:
			wantID, wantOK := m.byName[name]
			gotID, gotOK := a.Get(name)
			require.Equal(t, wantOK, gotOK)
			require.Equal(t, wantID, gotID)
			wantName, wantOK := m.byID[id]
			gotName, gotOK := a.Reverse(id)
			require.Equal(t, wantOK, gotOK)
			require.Equal(t, wantName, gotName)
		}
		require.Equal(t, len(m.byName), a.Len())
	}
	// Final consistency: a bijection that never uses 0.
	require.Len(t, a.byID, len(a.byName))
	for name, id := range a.byName {
		require.NotZero(t, id)
		require.Equal(t, name, a.byID[id])
	}
}

func TestIDAllocatorMatchesModel(t *testing.T) {
	for _, space := range []uint64{4, 16, 1 << 20} {
		for seed := range uint64(4) {
			r := rand.New(rand.NewPCG(seed, space))
			ops := make([]byte, 3*1500)
			for i := range ops {
				ops[i] = byte(r.UintN(256))
			}
			a := NewIDAllocator()
			a.hash = smallHash(space)
			m := &idModel{hash: a.hash, byName: map[string]uint64{}, byID: map[uint64]string{}}
			runIDOps(t, a, m, ops)
		}
	}
}

func FuzzIDAllocator(f *testing.F) {
	f.Add(uint8(0), []byte{0, 1, 0, 0, 2, 0, 3, 1, 0, 4, 1, 0})
	f.Add(uint8(3), []byte{2, 1, 5, 0, 1, 0, 0, 2, 0, 2, 3, 5, 4, 3, 5})
	f.Add(uint8(2), []byte{2, 4, 0, 2, 4, 4, 2, 5, 4, 3, 4, 0, 0, 5, 0})
	f.Add(uint8(1), []byte{0, 0, 0, 0, 1, 0, 0, 2, 0, 0, 3, 0, 0, 4, 0})
	f.Fuzz(func(t *testing.T, mode uint8, ops []byte) {
		if len(ops) > 6000 {
			return
		}
		a := NewIDAllocator()
		switch mode % 4 {
		case 1:
			a.hash = smallHash(2)
		case 2:
			a.hash = smallHash(8)
		case 3:
			a.hash = func(uint64, string) uint64 { return 0 }
		}
		m := &idModel{hash: a.hash, byName: map[string]uint64{}, byID: map[uint64]string{}}
		runIDOps(t, a, m, ops)
	})
}
