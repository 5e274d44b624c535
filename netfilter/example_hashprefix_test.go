package netfilter_test

import (
	"errors"
	"fmt"

	"github.com/nodeplane/nodeplane/netfilter"
)

// A writer given the chain prefix "np-" and no hash prefix recognises its
// rules by comments starting with "np:".
func ExampleHashPrefixFor() {
	fmt.Println(netfilter.HashPrefixFor("np-"), netfilter.HashPrefixFor("cali"))
	// Output: np: cali:
}

// A hash prefix is a rule comment's start: no blanks, no quotes.
func ExampleValidateHashPrefix() {
	fmt.Println(netfilter.ValidateHashPrefix("np:"))
	err := netfilter.ValidateHashPrefix(`np "x"`)
	fmt.Println(errors.Is(err, netfilter.ErrInvalidHashPrefix))
	fmt.Println(err)
	// Output:
	// <nil>
	// true
	// netfilter: invalid hash prefix: "np \"x\"" contains ' ' (want letters, digits and _-:.)
}
