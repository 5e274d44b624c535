// Package nfcore is the part of the netfilter backends (package iptables
// and package nftables) whose logic is the same in both. Each backend
// renders and writes; this package decides what it is asked to render
// and keeps what both keep:
//
//   - HookRules: the rules several owners declared at one hook, in an
//     order that depends only on what is declared.
//   - Reach: the chains to program (those reached through jumps from the
//     backend's roots) and the jumps that cannot be written (to an
//     undeclared chain of ours, or closing a loop).
//   - Recheck: the schedule of post-write rechecks that find another
//     writer's changes.
//   - Rule hashes: how a backend tells its rules from foreign ones by the
//     comment it writes (CommentHash, EncodeHash).
//   - Quote and the error helpers that put a netfilter error under a
//     backend's prefix.
//
// Failed objects are kept on a dataplane.Ledger, as every driver keeps
// them.
package nfcore
