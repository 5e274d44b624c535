// Package scenarios registers nodeplane's side-by-side benchmark scenarios
// with bench/internal/harness, one file per area (ipsets.go, iptables.go,
// routetable.go, …). Importing it for its side effect makes them available
// to the bench command.
package scenarios
