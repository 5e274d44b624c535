//go:build !linux

package command

import (
	"fmt"
	"os/exec"
)

// start fails: only Linux has network namespaces.
func (n NetNS) start(*exec.Cmd) error {
	return fmt.Errorf("%w: network namespaces are Linux-only", ErrNetNS)
}

// SameNetNS fails: only Linux has network namespaces.
func SameNetNS(a, b int) (bool, error) {
	return false, fmt.Errorf("%w: network namespaces are Linux-only", ErrNetNS)
}
