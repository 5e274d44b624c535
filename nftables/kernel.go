package nftables

// Kernel is the network namespace whose nftables a Table programs. A
// *kernel.Namespace (kernel.Open, kernel.OpenCurrent) is one: the Table
// opens its netfilter netlink socket inside the namespace with Do, once,
// and keeps it until Close. An nftablesfake.Namespace is one too, for
// tests: it also implements SocketOpener and serves the Table's netlink
// conversation from memory.
type Kernel interface {
	// Do runs fn on a thread inside the namespace; sockets fn creates stay
	// there.
	Do(fn func() error) error
}

// Socket is a NETLINK_NETFILTER socket as a Table uses it: datagrams of
// netlink messages out, datagrams of netlink messages back. The kernel
// processes a batch of requests before Send returns, so the answers to
// everything sent are queued when Send returns. Implemented by the Table's
// own socket and by nftablesfake; users do not call it.
type Socket interface {
	// Send sends one datagram: one or more netlink messages.
	Send(b []byte) error
	// Receive copies the next datagram queued on the socket into b and
	// returns its length. When block is false and nothing is queued it
	// returns 0 and no error. A datagram longer than b is an error, and so
	// is a receive queue that overflowed (the error wraps
	// syscall.ENOBUFS; the datagrams still queued follow).
	Receive(b []byte, block bool) (int, error)
	// Close releases the socket. A Table calls it once per socket (on
	// Close, after a failure, or when it is collected without Close).
	Close() error
}

// SocketOpener is implemented by a Kernel that gives a Table its
// netfilter socket itself instead of having it opened inside the
// namespace through Do; nftablesfake.Namespace does.
type SocketOpener interface {
	// OpenNFTablesSocket returns a new socket to the namespace's
	// nf_tables.
	OpenNFTablesSocket() (Socket, error)
}
