//go:build !linux

package nftables

import "errors"

// openSocket fails: nf_tables is Linux's, except for a Kernel that gives
// its own socket (nftablesfake).
func openSocket(k Kernel) (Socket, error) {
	if o, ok := k.(SocketOpener); ok {
		return o.OpenNFTablesSocket()
	}
	return nil, errors.New("nftables needs Linux")
}
