// Package routerulefake is an in-memory kernel for routing policy rules
// (`ip rule`), for tests of code that programs rules through
// vishvananda/netlink, such as package routerule.
//
// A *Kernel serves RuleList, RuleAdd and RuleDel with the signatures of
// *netlink.Handle, so it plugs in wherever a handle is taken through an
// interface (routerule.Options.Handle). It behaves like the Linux kernel
// (checked against 6.18), including its surprising parts:
//
//   - rules of one family are one list ordered by priority, and a new rule
//     goes after the existing rules of its priority;
//   - an add fails with EEXIST when a rule with the same attributes exists,
//     where the invert flag and the goto target are not compared and a
//     source, destination or TOS the new rule leaves out matches any (so a
//     catch-all rule cannot be added after a narrower one of the same
//     priority and target);
//   - a delete removes the first rule that matches what the request sets,
//     leaving out invert and goto target, or fails with ENOENT;
//   - RuleList reports no action, as netlink's dump does: blackhole,
//     unreachable, prohibit and nop rules look the same (Rules, for
//     inspection, fills it in).
//
// One difference: adding an IPv4 lookup rule without a table makes the
// kernel pick a fresh table; the fake refuses it with EINVAL, as IPv6 does.
//
// Failure injection: FailNext fails the next calls of one kind with a given
// error (netlink.ErrDumpInterrupted on RuleList returns the list with the
// error, as an interrupted dump does), and SetHook decides per call. Calls
// counts every call, so a test can assert that a step made no netlink
// writes at all.
//
// The fake owns nothing outside its memory and never touches the host.
package routerulefake
