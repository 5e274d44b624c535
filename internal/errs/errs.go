// Package errs builds errors whose text names each package once while
// errors.Is still matches every sentinel the text speaks of.
//
// A package's sentinels carry its prefix ("routetable: invalid target").
// Wrapping one sentinel in another with two %w verbs repeats the prefix
// ("routetable: invalid target: routetable: invalid interface name"); Also
// lets the text be written once, by hand, and attaches the further
// sentinels without printing them.
package errs

// Also returns an error with err's text that errors.Is and errors.As match
// against err's own tree and against each of also. It returns nil when err
// is nil.
func Also(err error, also ...error) error {
	if err == nil {
		return nil
	}
	return &tagged{err: err, also: also}
}

type tagged struct {
	err  error
	also []error
}

func (e *tagged) Error() string { return e.err.Error() }

func (e *tagged) Unwrap() []error { return append([]error{e.err}, e.also...) }
