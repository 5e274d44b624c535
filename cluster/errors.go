package cluster

import "errors"

// ErrInvalid is wrapped by every error a Validate method returns.
var ErrInvalid = errors.New("cluster: invalid")
