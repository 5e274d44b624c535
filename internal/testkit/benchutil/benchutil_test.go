package benchutil

import (
	"os/exec"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var sink [][]byte

func TestHeapInUseSeesAKeptAllocation(t *testing.T) {
	before := HeapInUse()
	for range 64 {
		sink = append(sink, make([]byte, 64<<10))
	}
	after := HeapInUse()
	runtime.KeepAlive(sink)
	assert.GreaterOrEqual(t, int64(after)-int64(before), int64(4<<20), "4 MiB kept")
	sink = nil
}

func TestCPUCountsSelfAndChildren(t *testing.T) {
	self0, kids0 := CPU()
	for end := time.Now().Add(50 * time.Millisecond); time.Now().Before(end); {
	}
	require.NoError(t, exec.Command("sh", "-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done").Run())
	self1, kids1 := CPU()
	assert.Greater(t, self1, self0, "a busy loop in this process")
	assert.Greater(t, kids1, kids0, "a busy child, waited for")
	assert.GreaterOrEqual(t, TotalCPU(), self1+kids1)
}
