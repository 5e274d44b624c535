//go:build linux

// Package nlutil holds the netlink hygiene behind package kernel's
// netlink-library paths, written once: dumps that survive concurrent
// changes, and event subscriptions that never go silently dead. Drivers
// and monitors reach it through package kernel, not directly.
//
// # Dumps
//
// The kernel marks a dump that raced with a change (NLM_F_DUMP_INTR); the
// netlink library reports it as an error matching netlink.ErrDumpInterrupted,
// with a result that may be inconsistent. LinkList and AddrList repeat such
// a dump a few times (DefaultDumpAttempts) with a short pause and return
// other errors at once, for a *netlink.Handle bound to the caller's
// namespace.
//
// # Subscriptions
//
// A Watcher subscribes to link, address and route events of one namespace
// through one NETLINK_ROUTE socket joined to the groups of every kind asked
// for, so that events of every kind arrive in the order the kernel sent
// them (a route added before its link went down is never seen after the
// link's event). The socket has a large receive buffer (8 MiB by default,
// forced past net.core.rmem_max when the process has CAP_NET_ADMIN). The
// stream carries the raw messages, leaving out the link messages of the
// AF_BRIDGE family, which are about bridge ports (a port leaving its bridge
// sends an RTM_DELLINK that is no deletion). When the subscription ends
// (ENOBUFS because the kernel dropped events, a socket error) the Watcher
// renews it and sends a Resync whose Reason says what happened; when
// subscribing fails it sends an Err event and retries with backoff on the
// injected clock, for as long as its context lives.
//
// The consumer's job is "subscribe, then list, then diff": every Resync
// (including the first) means "list these kinds now and diff against what
// you know". The subscription exists before the Resync is sent, so a change
// made while the consumer lists is not lost; it arrives as an event after
// the Resync. Barrier tells the events older than a listing from the newer
// ones: it asks the kernel for an acknowledgement (NLMSG_NOOP), which the
// kernel queues behind the messages already waiting, and the stream carries
// it as a Barrier event at that place; a consumer that places a barrier
// before it lists must not apply the messages before the barrier on top of
// its listing. Cancelling the context closes the socket and closes the
// channel once all goroutines the Watcher started have ended.
//
// # Limits
//
// nlutil never writes to the kernel and owns no kernel object: it only reads
// (dumps) and listens (multicast subscriptions) in the namespace it is
// given. It never falls back to the process's namespace for a nil handle.
// It is Linux-only.
package nlutil
