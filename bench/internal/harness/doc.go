// Package harness runs nodeplane's side-by-side benchmarks: each scenario
// measures nodeplane ("ours") against the naive way other agents do the
// same job ("peer") and the cheapest hand-written way of doing it ("floor"),
// and reports median ratios.
//
// Every trial of every variant runs in a fresh network namespace that the
// harness creates and removes, so nothing touches the host's firewall,
// routes or links and one trial cannot warm the kernel for the next.
// Trials of the variants are interleaved (ours, peer, floor, ours, …, with
// the order rotated each round) so that drift in the machine's load hits
// all of them alike. For each trial the harness measures wall time and CPU
// time — user plus system of this process and of the child processes it
// waited for (iptables-restore, ipset …) — around the variant's Run only;
// Setup is not measured.
//
// Scenarios are registered by package bench/scenarios and run by the
// command in bench/, a module of its own (go run -C bench . from the
// repository root).
package harness
