//go:build linux

package proxy

import (
	"net"
	"net/netip"
	"time"

	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
)

// tcpConnect opens a TCP connection from ns to to within timeout, closes
// it, and returns the dial's error (nil: it connected).
func tcpConnect(ns *kerneltest.NS, to netip.AddrPort, timeout time.Duration) error {
	return ns.Do(func() error {
		c, err := net.DialTimeout("tcp", to.String(), timeout)
		if err == nil {
			_ = c.Close()
		}
		return err
	})
}

// udpAsk sends a datagram from ns to to on a connected socket and reads
// one answer within timeout; it returns the error of the exchange (an
// ICMP port unreachable shows as ECONNREFUSED).
func udpAsk(ns *kerneltest.NS, to netip.AddrPort, timeout time.Duration) error {
	return ns.Do(func() error {
		c, err := net.Dial("udp", to.String())
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(timeout))
		if _, err := c.Write([]byte("q")); err != nil {
			return err
		}
		_, err = c.Read(make([]byte, 8))
		return err
	})
}

// clusterIP is the tests' cluster IP of the family v6 says.
func clusterIP(v6 bool) netip.Addr {
	if v6 {
		return clusterV6
	}
	return clusterV4
}
