// Package nfcore is the part of the netfilter backends (package iptables
// and package nftables) whose logic is the same in both: what they keep
// about the rules several owners declared at one hook. Each backend
// renders and writes; this package only decides what the backend is asked
// to render.
package nfcore
