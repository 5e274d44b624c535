package kernel

// NFTablesSocket is a NETLINK_NETFILTER socket to a namespace's nf_tables:
// datagrams of netlink messages out, datagrams of netlink messages back.
// The kernel processes a batch of requests before Send returns, so the
// answers to everything sent are queued when Send returns. A Namespace
// opens one inside its namespace; kernelfake serves the same conversation
// from memory.
type NFTablesSocket interface {
	// Send sends one datagram: one or more netlink messages.
	Send(b []byte) error
	// Receive copies the next datagram queued on the socket into b and
	// returns its length. When block is false and nothing is queued it
	// returns 0 and no error. A datagram longer than b is an error, and so
	// is a receive queue that overflowed (the error wraps
	// syscall.ENOBUFS; the datagrams still queued follow).
	Receive(b []byte, block bool) (int, error)
	// Close releases the socket.
	Close() error
}

// NFTables is the capability of a namespace whose nf_tables a writer
// programs over netlink (package nftables): *Namespace and
// kernelfake.Namespace implement it.
type NFTables interface {
	// OpenNFTablesSocket returns a new socket to the namespace's
	// nf_tables; the caller closes it.
	OpenNFTablesSocket() (NFTablesSocket, error)
}
