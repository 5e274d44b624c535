package markbits_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/markbits"
)

func TestEndpointMarksStableDistinctNonZero(t *testing.T) {
	blk, err := markbits.NewBlock(0x00ff0000)
	require.NoError(t, err)
	e, err := markbits.NewEndpointMarks(blk)
	require.NoError(t, err)
	seen := map[uint32]string{}
	for i := range 200 {
		name := fmt.Sprintf("cali%05d", i)
		m, err := e.Mark(name)
		require.NoError(t, err)
		require.NotZero(t, m)
		require.True(t, blk.Contains(m), "mark %#x outside block", m)
		require.NotContains(t, seen, m, "mark %#x given twice", m)
		seen[m] = name
		again, err := e.Mark(name)
		require.NoError(t, err)
		require.Equal(t, m, again)
		owner, ok := e.Iface(m)
		require.True(t, ok)
		require.Equal(t, name, owner)
	}
	require.Equal(t, 200, e.Len())
}

func TestEndpointMarksDeterministicAndReleased(t *testing.T) {
	blk, _ := markbits.NewBlock(0x00000070) // 3 bits: numbers 1…7
	run := func() []uint32 {
		e, err := markbits.NewEndpointMarks(blk)
		require.NoError(t, err)
		var out []uint32
		for i := range 7 {
			m, err := e.Mark(fmt.Sprintf("if%d", i))
			require.NoError(t, err)
			out = append(out, m)
		}
		return out
	}
	first := run()
	require.Equal(t, first, run())

	e, _ := markbits.NewEndpointMarks(blk)
	for i := range 7 {
		_, err := e.Mark(fmt.Sprintf("if%d", i))
		require.NoError(t, err)
	}
	_, err := e.Mark("one-too-many")
	require.ErrorIs(t, err, markbits.ErrBlockFull)
	require.Equal(t, 7, e.Len())

	// A released mark is free again; the others keep theirs.
	e.Release("if3")
	e.Release("never-held")
	_, ok := e.Iface(first[3])
	require.False(t, ok)
	m, err := e.Mark("one-too-many")
	require.NoError(t, err)
	require.Equal(t, first[3], m, "the only free number")
	for i, want := range first {
		if i == 3 {
			continue
		}
		got, err := e.Mark(fmt.Sprintf("if%d", i))
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
}

func TestEndpointMarksBadInput(t *testing.T) {
	_, err := markbits.NewEndpointMarks(markbits.Block{})
	require.ErrorIs(t, err, markbits.ErrEmptyMask)

	one, _ := markbits.NewBlock(0x80000000) // one bit: one usable mark
	e, err := markbits.NewEndpointMarks(one)
	require.NoError(t, err)
	require.Equal(t, one, e.Block())
	_, err = e.Mark("")
	require.ErrorIs(t, err, markbits.ErrInvalidOwner)
	m, err := e.Mark("a")
	require.NoError(t, err)
	require.Equal(t, uint32(0x80000000), m)
	_, err = e.Mark("b")
	require.ErrorIs(t, err, markbits.ErrBlockFull)
}

func TestEndpointMarksConcurrent(t *testing.T) {
	blk, _ := markbits.NewBlock(0x0fff0000)
	e, _ := markbits.NewEndpointMarks(blk)
	var wg sync.WaitGroup
	marks := make([][]uint32, 4)
	for g := range 4 {
		wg.Go(func() {
			for i := range 100 {
				m, err := e.Mark(fmt.Sprintf("if%d", i))
				if err != nil {
					t.Error(err)
					return
				}
				marks[g] = append(marks[g], m)
				if g == 3 && i%2 == 0 {
					e.Release(fmt.Sprintf("other%d", i))
				}
			}
		})
	}
	wg.Wait()
	// Every goroutine saw the same mark for each interface.
	for g := 1; g < 4; g++ {
		require.Equal(t, marks[0], marks[g])
	}
	require.Equal(t, 100, e.Len())
}

func ExampleEndpointMarks() {
	blk, _ := markbits.NewBlock(0x00000300) // 2 bits: marks for 3 interfaces
	e, _ := markbits.NewEndpointMarks(blk)
	for _, name := range []string{"cali1", "cali2", "cali3", "cali4"} {
		m, err := e.Mark(name)
		if err != nil {
			fmt.Println(name, errors.Is(err, markbits.ErrBlockFull))
			continue
		}
		fmt.Printf("%s 0x%03x\n", name, m)
	}
	e.Release("cali2")
	m, _ := e.Mark("cali4")
	fmt.Printf("cali4 0x%03x\n", m)
	// Output:
	// cali1 0x300
	// cali2 0x100
	// cali3 0x200
	// cali4 true
	// cali4 0x100
}
