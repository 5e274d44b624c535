// Package fib models how the Linux kernel stores, compares and deletes
// routing policy rules (fib rules), as seen through the netlink library's
// Rule type. The routerule driver uses it to predict what a delete or an
// add will do to the kernel's ordered rule list, and the public fake
// (routerule/routerulefake) uses it to behave like the kernel.
//
// The facts it encodes were checked against kernel 6.18 with iproute2 and
// vishvananda/netlink v1.3.1:
//
//   - Rules of one family form one list ordered by priority; a new rule goes
//     after every rule of the same priority.
//   - An add with NLM_F_EXCL (what netlink's RuleAdd sends) fails with
//     EEXIST when a rule exists whose every attribute equals the request's,
//     except that the invert flag and the goto target are not compared and
//     that a source, destination or TOS the request leaves out matches any.
//     So "pref 5 lookup 9" cannot be added while "pref 5 from 10.0.0.0/8
//     lookup 9" exists, though the reverse order works.
//   - A delete removes the first rule, in list order, that matches every
//     attribute the request sets; attributes left out (or zero) match
//     anything, and the invert flag and the goto target are never compared.
//   - A dump (netlink's RuleList) reports no action: a lookup rule shows
//     its table, a goto rule its target, and blackhole, unreachable,
//     prohibit and nop rules look the same (table 0, no target).
package fib
