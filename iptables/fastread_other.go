//go:build !linux

package iptables

import (
	"errors"

	"github.com/nodeplane/nodeplane/ipfamily"
)

// fastRead is Linux only.
func fastRead(Backend, ipfamily.Family, string, *saveParser) ([]fastChain, error) {
	return nil, errors.New("reading in process needs Linux")
}
