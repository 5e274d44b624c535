// Package fib models how the Linux kernel stores, compares and deletes
// routing policy rules (fib rules), on kernel.Rule. It is the one copy of
// those semantics: the routerule driver predicts with it what an add or a
// delete will do to the kernel's ordered rule list, and the fake namespace
// (kernel/kernelfake) behaves like the kernel with it.
//
// The facts it encodes were checked against kernel 6.18, and are checked
// again by kernelfake's differential tests (TestKernelFakeMatchesKernel and
// TestKernelFakeRulesMatchKernel), which run the same calls on a fake and on
// a real namespace:
//
//   - the rules of a family form one list ordered by priority; a new rule
//     goes after every rule of its priority (Insert); a rule added without
//     a priority (0) gets one less than the second rule's (DefaultPriority);
//   - the kernel reads an add and a delete request the same way (Stored): a
//     mark without a mask gets the full mask 0xffffffff, and only a goto
//     rule has a goto target;
//   - an add with NLM_F_EXCL fails with EEXIST when a rule exists whose
//     every attribute equals the request's (Exists), except that the invert
//     flag and the goto target are not compared and that a source,
//     destination, TOS or realm the request leaves out matches any. So
//     "5: lookup 9" cannot be added while "5: from 10.0.0.0/8 lookup 9"
//     exists, though the reverse order works;
//   - a delete removes the first rule, in list order, that matches every
//     attribute the request sets (DeleteMatches); attributes left unset
//     (zero, or an unset Suppressor) match anything, and the invert flag and
//     the goto target are never compared.
//
// A fresh namespace's rules are Defaults.
package fib
