// Package scenarios registers nodeplane's side-by-side benchmark scenarios
// with bench/internal/harness, one file per area (ipsets.go, iptables.go,
// routetable.go, …); helpers that several areas share live in common.go
// (Setups that hand state to Run, settling, closing what trials left open,
// figures) and routecommon.go (veths, route peers and floors). Importing it
// for its side effect makes them available to the bench command.
package scenarios
