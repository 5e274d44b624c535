package ifname_test

import (
	"errors"
	"fmt"

	"github.com/nodeplane/nodeplane/internal/ifname"
)

var errInvalid = errors.New("example: invalid options")

// A filter that keeps the host's uplinks but not a secondary one, and a
// caller wrapping a bad pattern with its own sentinel error.
func Example() {
	f, err := ifname.NewFilter([]string{`^eth`, `^ens`}, []string{`^eth1$`})
	if err != nil {
		panic(err)
	}
	for _, name := range []string{"eth0", "ens3", "eth1", "veth0", "lo"} {
		fmt.Println(name, f.Matches(name))
	}

	_, err = ifname.Compile("Include", []string{`^eth(`})
	err = fmt.Errorf("%w: %w", errInvalid, err)
	fmt.Println(err)
	fmt.Println(errors.Is(err, errInvalid))
	// Output:
	// eth0 true
	// ens3 true
	// eth1 false
	// veth0 false
	// lo false
	// example: invalid options: Include pattern "^eth(": error parsing regexp: missing closing ): `^eth(`
	// true
}
