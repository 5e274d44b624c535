package proxy

import (
	"fmt"
	"sync"
	"time"
)

// Default connection tracking timeouts: kube-proxy's conntrack settings
// where it has one (established 24h, close-wait 1h), the kernel's
// otherwise (an unanswered TCP connection 2m, UDP 30s).
const (
	DefaultTCPEstablished = 24 * time.Hour
	DefaultTCPOpening     = 2 * time.Minute
	DefaultTCPClosing     = time.Hour
	DefaultUDP            = 30 * time.Second
	DefaultScanInterval   = time.Second
	DefaultScanBatch      = 4096
)

// ConntrackOptions configure how long the programs' connection entries
// (the map np_ct) live, and the scanner that removes them (Proxy.Run). A
// TCP connection that closed — a RST either way, or the acknowledgement of
// the second FIN — is removed by the programs at once, so a
// churn of short connections leaves nothing behind; the scanner removes
// the rest once idle for longer than their timeout, and the entries of
// backends that left their service. The zero value of each field is its
// default.
type ConntrackOptions struct {
	// TCPEstablished is how long an idle TCP connection both ends opened
	// is kept: DefaultTCPEstablished.
	TCPEstablished time.Duration
	// TCPOpening is how long a TCP connection the backend never answered
	// is kept: DefaultTCPOpening.
	TCPOpening time.Duration
	// TCPClosing is how long an idle TCP connection one end closed (a
	// FIN one way) is kept: DefaultTCPClosing.
	TCPClosing time.Duration
	// UDP is how long an idle UDP flow is kept: DefaultUDP.
	UDP time.Duration
	// ScanInterval is how often the scanner looks at the next ScanBatch
	// entries: DefaultScanInterval.
	ScanInterval time.Duration
	// ScanBatch is how many entries the scanner looks at per interval:
	// DefaultScanBatch. A full pass over N entries takes
	// N/ScanBatch intervals.
	ScanBatch int
}

// withDefaults returns o with its zero fields set to the defaults, or an
// error naming a negative one.
func (o ConntrackOptions) withDefaults() (ConntrackOptions, error) {
	for _, f := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{{"TCPEstablished", &o.TCPEstablished, DefaultTCPEstablished}, {"TCPOpening", &o.TCPOpening, DefaultTCPOpening},
		{"TCPClosing", &o.TCPClosing, DefaultTCPClosing}, {"UDP", &o.UDP, DefaultUDP}, {"ScanInterval", &o.ScanInterval, DefaultScanInterval}} {
		switch {
		case *f.v < 0:
			return o, fmt.Errorf("%w: Conntrack.%s %v is negative", ErrInvalidOptions, f.name, *f.v)
		case *f.v == 0:
			*f.v = f.def
		}
	}
	switch {
	case o.ScanBatch < 0:
		return o, fmt.Errorf("%w: Conntrack.ScanBatch %d is negative", ErrInvalidOptions, o.ScanBatch)
	case o.ScanBatch == 0:
		o.ScanBatch = DefaultScanBatch
	}
	return o, nil
}

// ConntrackStatus is what the connection entries and their scanner look
// like. Each connection takes two entries: one per direction.
type ConntrackStatus struct {
	// Entries is the number of entries the last full pass saw, and
	// Capacity the map's size (Options.Connections).
	Entries, Capacity int
	// Full counts the new connections the programs dropped because the
	// map had no room (they never evict a live connection to make some);
	// Closed the connections they removed as they closed. Both count since
	// the map of counters was made, across restarts of the agent.
	Full, Closed uint64
	// Expired, Stale and Orphans count the entries the scanner removed
	// since the Proxy was made: idle past their timeout, of a backend that
	// left its service (UDP), and reverse entries whose forward entry was
	// gone.
	Expired, Stale, Orphans uint64
	// Passes counts the scanner's full passes over the map; LastPass is
	// how long the last one took, in scanning time (the intervals between
	// batches not counted), and LastPassAt when it ended (zero before the
	// first).
	Passes     uint64
	LastPass   time.Duration
	LastPassAt time.Time
}

// FillLevel is Entries over Capacity, between 0 and 1.
func (s ConntrackStatus) FillLevel() float64 {
	if s.Capacity == 0 {
		return 0
	}
	return float64(s.Entries) / float64(s.Capacity)
}

// ctShared is the scanner's state that Status reads.
type ctShared struct {
	mu sync.Mutex
	st ConntrackStatus
}

func (c *ctShared) get() ConntrackStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.st
}

func (c *ctShared) update(f func(*ConntrackStatus)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f(&c.st)
}

// ServiceCounters are what the programs counted for one service (both
// families): the connections they sent to a backend, the packets and
// bytes they translated both ways (none for a connection translated at
// connect(): see "Connect-time translation" in the package documentation),
// and the connections refused for want of a ready backend. They count
// from the service's first write and survive restarts of the agent (the
// map is pinned); they go with the service. A removed service's
// connections that go on (TCP keeps its backend) count into no service:
// a service's ID (under which the programs count) is not handed out again
// until every other has been, by this agent or the next.
type ServiceCounters struct {
	// Connections counts the connections sent to a backend.
	Connections uint64
	// Packets and Bytes count what was translated, both ways.
	Packets, Bytes uint64
	// Rejects counts the connections refused for want of a ready backend.
	Rejects uint64
}
