//go:build !unix

package sysctls

import "errors"

// errEINVAL matches nothing where there is no EINVAL to meet.
var errEINVAL = errors.New("sysctls: EINVAL")
