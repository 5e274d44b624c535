//go:build !linux

package nftables

import "github.com/nodeplane/nodeplane/netfilter"

// render fails: rules are encoded with github.com/google/nftables/expr,
// which builds on Linux only. Sets, their elements and the fake work
// everywhere; rules are Linux's.
func (rd *renderer) render(r netfilter.Rule, hashPrefix string, salt int) (rendered, error) {
	return rendered{}, errUnsupportedf("rules are rendered on Linux only")
}
