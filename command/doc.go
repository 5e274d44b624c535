// Package command is the seam between nodeplane's drivers and the few
// binaries they run (iptables-restore, iptables-save, ipset, nft).
//
// Drivers take a Runner in their options instead of calling os/exec
// directly, so that a consumer can run them inside another network
// namespace, add tracing, or substitute a fake kernel in unit tests. Local
// runs binaries in the caller's own namespace; NetNS runs them inside
// another network namespace, given an open descriptor of it. Both report
// failures as *Error, which keeps the exit code and standard error.
//
// The package owns no kernel state; it never runs anything on its own.
package command
