package ipsetsfake_test

import (
	"errors"
	"testing"

	"github.com/nodeplane/nodeplane/internal/textform/textformtest"
	"github.com/nodeplane/nodeplane/kernel/kernelfake/ipsetsfake"
)

// TestCallJSON: a Call's Err marshals as its text, not {}.
func TestCallJSON(t *testing.T) {
	textformtest.Report(t, ipsetsfake.Call{})
	textformtest.Report(t, ipsetsfake.Call{Args: []string{"restore"}, Stdin: "create np4-a hash:ip\n",
		Err: errors.New("ipset v7.19: Error in line 1: Set cannot be created: set with the same name already exists")})
}
