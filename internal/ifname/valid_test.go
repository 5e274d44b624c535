package ifname_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/nodeplane/nodeplane/internal/ifname"
)

func TestValid(t *testing.T) {
	for _, ok := range []string{"eth0", "lo", "a", strings.Repeat("x", ifname.MaxLen), "eth0.100", "veth-1_x", "é"} {
		assert.NoError(t, ifname.Valid(ok), "%q", ok)
	}
	for bad, msg := range map[string]string{
		"":                                   "empty",
		strings.Repeat("x", ifname.MaxLen+1): "longer than 15 bytes",
		".":                                  "not a valid name",
		"..":                                 "not a valid name",
		"eth/0":                              `contains '/'`,
		"eth:0":                              `contains ':'`,
		"eth 0":                              `contains ' '`,
		"eth\t0":                             `contains '\t'`,
		"eth\n0":                             `contains '\n'`,
		"eth\x000":                           `contains '\x00'`,
	} {
		err := ifname.Valid(bad)
		if assert.Error(t, err, "%q", bad) {
			assert.Contains(t, err.Error(), msg)
		}
	}
}

func ExampleValid() {
	fmt.Println(ifname.Valid("eth0"))
	fmt.Println(ifname.Valid("eth/0"))
	// Output:
	// <nil>
	// interface name "eth/0" contains '/'
}
