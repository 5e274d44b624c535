//go:build !linux

package iptables

import (
	"errors"

	"github.com/vishvananda/netns"
)

// fastRead is Linux only.
func fastRead(netns.NsHandle, Backend, IPVersion, string, *saveParser) ([]fastChain, error) {
	return nil, errors.New("reading in process needs Linux")
}
