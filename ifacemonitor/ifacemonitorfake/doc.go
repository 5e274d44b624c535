//go:build linux

// Package ifacemonitorfake is an in-memory kernel for tests of code that
// reacts to an ifacemonitor.Monitor: a Kernel is an ifacemonitor.Source
// (set it as Options.Source) whose links, addresses and routes a test
// changes as an administrator would, without root and without a network
// namespace.
//
// # What it emulates
//
// Every change updates the state and queues the netlink messages the
// kernel would send, in one step, so a listing always shows the state
// after every event already delivered, as the kernel's does. Each
// subscription starts with a Resync and keeps its own queue; nothing is
// lost unless the test calls Overflow.
//
//   - AddLink creates a link (down, RTM_NEWLINK) with a fresh index, never
//     reused, so a name deleted and created again gets a new one. Names
//     are checked as the kernel does (EINVAL for an empty name, one longer
//     than 15 bytes or with '/', ':' or white space; EEXIST for a taken
//     one); MTUs outside 68–65536 are EINVAL.
//   - SetUp makes a link administratively up with carrier (IFF_UP and
//     IFF_RUNNING), SetDown administratively down; each sends RTM_NEWLINK
//     when something changed. Going down drops the link's IPv6 addresses
//     (RTM_DELADDR, as with the default keep_addr_on_down=0), its IPv6
//     routes (RTM_DELROUTE) and its IPv4 routes, the latter without a
//     message, as the kernel does; IPv4 addresses stay.
//   - SetMTU and Rename send RTM_NEWLINK. Rename of a link that is up
//     fails with EBUSY, as kernels before 6.2 do; AllowLiveRename makes it
//     succeed, as 6.2 and later do.
//   - DeleteLink takes a link that is up down first (as SetDown), then
//     sends RTM_DELADDR for each remaining address and RTM_DELLINK.
//   - AddAddr and DelAddr send RTM_NEWADDR and RTM_DELADDR; a duplicate is
//     EEXIST, a missing address EADDRNOTAVAIL.
//   - AddRoute and DelRoute send RTM_NEWROUTE and RTM_DELROUTE. Routes are
//     keyed by ifacemonitor.RouteKey (EEXIST when the key is taken, ESRCH
//     when it is missing); an output interface that does not exist is
//     ENODEV, one that is down ENETDOWN. Table 0 means main (254), type 0
//     unicast, and an IPv6 metric of 0 becomes 1024, as the kernel stores
//     them.
//
// Not emulated: the loopback link (a new Kernel is empty; add "lo"
// yourself), IPv6 link-local autoconfiguration, the routes the kernel adds
// for addresses, carrier changes without an administrative change, links
// moving between namespaces, and IPv6 being disabled below MTU 1280.
//
// # Failure injection and inspection
//
// Overflow drops every queued, undelivered event of every subscription and
// queues a Resync whose reason wraps ifacemonitor.ErrOverflow, as a
// netlink socket whose receive buffer overflowed (ENOBUFS): the monitor
// then lists everything again and reports only the differences.
// FailNextList makes the next listing fail. Links, Link, Addrs and Routes
// show the state; Lists counts the listings.
//
// Every error wraps the kernel's errno (errors.Is(err, unix.EBUSY)), and a
// failed call changes nothing. The package owns nothing outside the Kernel
// value and touches no kernel state. A Kernel is safe for concurrent use;
// its subscriptions' goroutines end with their contexts.
package ifacemonitorfake
