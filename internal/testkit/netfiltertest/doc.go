// Package netfiltertest holds the conformance suite of the rule model of
// package netfilter: each criterion and action of the model, declared
// through netfilter.Table on every backend (package iptables with its
// legacy and nft backends, package nftables), must give the same verdict
// to real packets — TCP connections, UDP datagrams and pings between
// namespaces of an internal/testkit/kerneltest topology, IPv4 and IPv6 — and count
// the packets it matched. The suite is the package's kernel test
// (TestKernelVerdictConformance); the package has no API of its own. Its
// second scenario has managers share one Table's hooks (masquerade and
// floatingips the nat table, serviceloop and a plain owner the filter
// table) on every backend, on the fakes (TestSharedHooks) and on the
// kernel (TestKernelSharedHooks): each one's Apply and removal leaves the
// others' rules in place.
//
// It owns only the namespaces the test creates, and never touches the
// host's firewall.
package netfiltertest
