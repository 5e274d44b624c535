package nftables

import "github.com/nodeplane/nodeplane/kernel"

// openSocket opens a Table's netfilter socket through k (a
// *kernel.Namespace opens it inside its namespace, kernelfake serves it
// from memory), or in the process's namespace when k is nil.
func openSocket(k kernel.NFTables) (kernel.NFTablesSocket, error) {
	if k == nil {
		return kernel.OpenNFTablesSocket()
	}
	return k.OpenNFTablesSocket()
}
