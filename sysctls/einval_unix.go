//go:build unix

package sysctls

import "syscall"

var errEINVAL error = syscall.EINVAL
