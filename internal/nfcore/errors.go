package nfcore

import (
	"errors"
	"strings"

	"github.com/nodeplane/nodeplane/internal/errs"
)

// Quote returns err, an error of package netfilter's rule or set model
// (its text starts with "netfilter: "), under the prefix of the backend
// pkg ("ipsets", "nftables") instead, followed by detail when it is not
// empty: the text names one package once, and errors.Is matches err's
// sentinels and each of also. It returns nil when err is nil.
func Quote(pkg string, err error, detail string, also ...error) error {
	if err == nil {
		return nil
	}
	text := pkg + ": " + strings.TrimPrefix(err.Error(), "netfilter: ") + detail
	return errs.Also(errors.New(text), append([]error{err}, also...)...)
}
