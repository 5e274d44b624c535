package routetablefake

import "errors"

// ErrInjected is matched (with errors.Is) by the default error of an
// injected fault, which also matches EIO and reads "injected failure
// (input/output error)": a route call's error adds the package and the
// operation once, as the fake's other errors do.
var ErrInjected = errors.New("routetablefake: injected failure")
