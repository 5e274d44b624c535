//go:build linux

package scenarios

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/nodeplane/nodeplane/bench/internal/harness"
)

// Helpers shared by the routes (package kernel), routetable and vxlan
// scenarios.

// routeDst is the i-th benchmark destination, 10.x.y.z/32.
func routeDst(i int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 32)
}

// setupVeth creates the veth pair link/peer in the trial's namespace,
// brings both up, waits (at most 5 s) until link has carrier and returns
// link's index.
func setupVeth(env *harness.Env, link, peer string) (int, error) {
	h := env.NS.Handle()
	if err := h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: link}, PeerName: peer}); err != nil {
		return 0, fmt.Errorf("add veth: %w", err)
	}
	for _, name := range []string{peer, link} {
		l, err := h.LinkByName(name)
		if err != nil {
			return 0, err
		}
		if err := h.LinkSetUp(l); err != nil {
			return 0, err
		}
	}
	return waitCarrier(env, link, true)
}

// waitCarrier waits (at most 5 s) until link has carrier (on) or has lost
// it, and returns link's index.
func waitCarrier(env *harness.Env, link string, on bool) (int, error) {
	h := env.NS.Handle()
	deadline := time.Now().Add(5 * time.Second)
	for {
		l, err := h.LinkByName(link)
		if err != nil {
			return 0, err
		}
		if (l.Attrs().Flags&net.FlagRunning != 0) == on {
			return l.Attrs().Index, nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("%s: carrier never became %v", link, on)
		}
		time.Sleep(time.Millisecond)
	}
}

// routeCountCheck returns a check that a reader returned n routes.
func routeCountCheck(n int) func(what string, got int) error {
	return func(what string, got int) error {
		if got != n {
			return fmt.Errorf("%s returned %d routes, want %d", what, got, n)
		}
		return nil
	}
}

// ipRouteShowFloor is the hand-written way to read a table: `ip route show
// table N` (`… dev D` when dev is set, which the kernel filters), output
// captured and its lines counted.
func ipRouteShowFloor(table int, dev string, setup func(context.Context, *harness.Env) error, check func(string, int) error) harness.Variant {
	name, args := "ip route show table N", []string{"route", "show", "table", strconv.Itoa(table)}
	if dev != "" {
		name, args = name+" dev D", append(args, "dev", dev)
	}
	return harness.Variant{
		Name: name, Role: harness.Floor, Setup: setup,
		Run: func(ctx context.Context, env *harness.Env) error {
			out, err := env.NS.Exec(ctx, "ip", args...)
			if err != nil {
				return err
			}
			return check("ip route show", bytes.Count(out, []byte{'\n'}))
		},
	}
}

// routeListPeer reads a table the way most Go agents do: vishvananda/netlink
// RouteListFiltered, which builds the whole list. With dev set it filters
// by that link's index, which the library does in userspace after reading
// the whole table (Felix reads an interface's routes so); the index lookup
// is part of the run.
func routeListPeer(table int, dev string, setup func(context.Context, *harness.Env) error, check func(string, int) error) harness.Variant {
	name := "netlink RouteListFiltered"
	if dev != "" {
		name += " by link"
	}
	return harness.Variant{
		Name: name, Role: harness.Peer, Setup: setup,
		Run: func(_ context.Context, env *harness.Env) error {
			filter, mask := &netlink.Route{Table: table}, netlink.RT_FILTER_TABLE
			if dev != "" {
				l, err := env.NS.Handle().LinkByName(dev)
				if err != nil {
					return err
				}
				filter.LinkIndex, mask = l.Attrs().Index, mask|netlink.RT_FILTER_OIF
			}
			rs, err := env.NS.Handle().RouteListFiltered(netlink.FAMILY_V4, filter, mask)
			if err != nil {
				return err
			}
			return check("RouteListFiltered", len(rs))
		},
	}
}

// routeExecCap is the largest size the one-exec-per-route peer runs at:
// ~6 ms a route, 10 minutes at 100k.
const routeExecCap = 1_000

// routeWrite describes what an initial-programming scenario writes: n
// routeDst /32 device routes (scope link) on link, in table, with proto.
// setup prepares the trial's namespace and returns link's index.
type routeWrite struct {
	n            int
	link         string
	table, proto int
	setup        func(ctx context.Context, env *harness.Env) (int, error)
}

// peers returns the variants ours is compared with when writing routes:
// one vishvananda/netlink RouteReplace per route in process (what Felix
// does), one hand-written `ip -batch` (the floor), and one `ip route
// replace` exec per route up to routeExecCap. The note says which peers ran.
func (w routeWrite) peers() ([]harness.Variant, string) {
	line := func(i int) []string {
		return []string{"route", "replace", routeDst(i).String(), "dev", w.link, "table", strconv.Itoa(w.table),
			"proto", strconv.Itoa(w.proto), "scope", "link"}
	}
	vs := []harness.Variant{
		{
			Name: "netlink RouteReplace per route", Role: harness.Peer,
			Setup: func(ctx context.Context, env *harness.Env) error {
				oif, err := w.setup(ctx, env)
				routes := make([]*netlink.Route, w.n)
				for i := range routes {
					routes[i] = &netlink.Route{
						LinkIndex: oif, Table: w.table, Protocol: netlink.RouteProtocol(w.proto), Scope: netlink.SCOPE_LINK,
						Dst: &net.IPNet{IP: routeDst(i).Addr().AsSlice(), Mask: net.CIDRMask(32, 32)},
					}
				}
				env.State = routes
				return err
			},
			Run: func(_ context.Context, env *harness.Env) error {
				h := env.NS.Handle()
				for _, r := range env.State.([]*netlink.Route) {
					if err := h.RouteReplace(r); err != nil {
						return err
					}
				}
				return nil
			},
		},
		{
			Name: "ip -batch (hand-written)", Role: harness.Floor,
			Setup: func(ctx context.Context, env *harness.Env) error {
				_, err := w.setup(ctx, env)
				var b bytes.Buffer
				for i := range w.n {
					b.WriteString(strings.Join(line(i), " "))
					b.WriteByte('\n')
				}
				env.State = b.Bytes()
				return err
			},
			Run: func(ctx context.Context, env *harness.Env) error {
				_, err := env.NS.ExecInput(ctx, bytes.NewReader(env.State.([]byte)), "ip", "-batch", "-")
				return err
			},
		},
	}
	if w.n > routeExecCap {
		return vs, fmt.Sprintf("peer2 (one `ip route replace` exec per route, ~6 ms each) capped at %d routes: at this size a trial would take minutes", routeExecCap)
	}
	vs = append(vs, harness.Variant{
		Name: "ip route replace per route (exec)", Role: harness.Peer,
		Setup: func(ctx context.Context, env *harness.Env) error {
			_, err := w.setup(ctx, env)
			return err
		},
		Run: func(ctx context.Context, env *harness.Env) error {
			for i := range w.n {
				if _, err := env.NS.Exec(ctx, "ip", line(i)...); err != nil {
					return err
				}
			}
			return nil
		},
	})
	return vs, "peers: netlink RouteReplace per route in process (Felix), and one `ip route replace` exec per route"
}
