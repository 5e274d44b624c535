// Package nftables is the native nftables writer of the rule model of
// package netfilter: a Table keeps one nftables table of one IP family (ip
// or ip6), named by its owner, in the state its owner declares, over
// netlink — no nft binary at run time. *Table implements netfilter.Table,
// the interface managers take, exactly as *iptables.Table does, so that a
// manager written once runs on either backend; and it adds what only
// nftables has: named sets (addresses, address . protocol . port
// concatenations, ranges of addresses and ports) and verdict maps that
// dispatch in one lookup. IPSets is the netfilter.Sets over a Table's sets,
// which the node managers take for the sets their rules match.
//
// # What a Table owns
//
// The table Options.Name in the family of Options.Family, and everything
// in it: chains, rules and sets that were not declared are deleted, and a
// Table with nothing to program deletes the table. It recognises its rules
// by their user data — a comment made of Options.HashPrefix and a
// 16-character hash of the rule, the rule's own comments after it — never
// by their position; a rule without our hash in our table (someone's
// addition) is deleted. A table of that name that holds rules, not one of
// them ours, is another program's (kube-proxy's "kube-proxy", say): the
// Table writes nothing to it and its Apply and Plan fail with
// ErrForeignTable. The names iptables-nft gives its tables ("filter",
// "nat" …, IPTablesNFTTables) are refused by New.
//
// Options.Role decides where the table's base chains sit: the role of one
// of iptables' tables (Filter, NAT, Mangle, Raw), its hooks, chain types
// and priorities. Each hook has one base chain, BaseChain(hook) ("INPUT"),
// PriorityOffset below the priority of iptables' table of that role, that
// holds the hook's InsertRules rules at its top and its AppendRules rules
// at its bottom, as iptables' built-in chain does; SetPolicy sets its
// policy:
//
//	role    hooks                                    type              priority
//	raw     PREROUTING OUTPUT                        filter            -310
//	mangle  all five                                 filter (OUTPUT:   -160
//	                                                 route)
//	nat     PREROUTING OUTPUT (destination NAT)      nat               -110
//	nat     INPUT POSTROUTING (source NAT)           nat               90
//	filter  INPUT FORWARD OUTPUT                     filter            -10
//
// What the rule model promises, then, holds among our rules: at a hook, a
// packet an inserted rule accepts meets none of the appended rules, and
// one an inserted rule drops is dropped, exactly as on package iptables.
// Relative to other tables it promises the order of priorities: all of our
// rules at a hook run before iptables' rules of the same place
// (iptables-legacy and iptables-nft both sit at -300, -150, -100, 100 and
// 0), and after kube-proxy's nftables filtering (-110) and DNAT (-100) for
// the filter role, so that a filter Table sees translated service
// addresses as iptables' filter table does; a nat Table translates before
// kube-proxy (a connection keeps the first NAT binding made); raw runs
// before conntrack (-200). Unlike iptables' chains, base chains do not
// end the packet's journey when they accept it: a packet our chain
// accepts still meets every later base chain of the hook, of any table —
// iptables', kube-proxy's — and one another table's chain accepted still
// meets ours; a drop is final everywhere.
//
// A table written when each hook had two base chains ("INPUT-insert" and
// "INPUT-append") is moved to one chain per hook by the next Apply, in the
// one transaction that writes the table's difference, which the kernel
// commits whole; while the kernel refuses a hook's new chain, the old ones
// of that hook stay.
//
// # Declaring and applying
//
// New validates the options and does no I/O. SetChains sets the full
// content of regular chains and RemoveChains forgets them; InsertRules and
// AppendRules set our rules at a hook; SetSets declares sets and verdict
// maps with their content, AddElements and DeleteElements change their
// elements, RemoveSets forgets them. Rules use sets with netfilter.MatchSet
// and verdict maps with netfilter.ActionVerdictMap; a set must be declared
// before the rules that use it.
//
//	ns, err := kernel.Open("/run/netns/pod1") // or leave Kernel nil: this namespace
//	...
//	tbl, err := nftables.New(nftables.Options{Name: "np-nat", Family: ipfamily.IPv4, Role: nftables.NAT, Kernel: ns})
//	...
//	err = tbl.SetSets(nftables.Set{Name: "services", Verdict: true,
//		Key:      []nftables.KeyType{nftables.TypeAddr, nftables.TypeProto, nftables.TypePort},
//		Elements: []nftables.Element{{Key: []nftables.Value{nftables.Addr(vip), nftables.Proto(netfilter.ProtoTCP), nftables.Port(80)},
//			Verdict: netfilter.Goto("svc-web")}}})
//	err = tbl.SetChains(netfilter.Chain{Name: "svc-web", Rules: []netfilter.Rule{{
//		Matches: []netfilter.Match{netfilter.Protocol(netfilter.ProtoTCP)}, Action: netfilter.DNAT(backend)}}})
//	err = tbl.InsertRules("np", netfilter.HookPrerouting, []netfilter.Rule{{Action: netfilter.VerdictMap("services", netfilter.Dst, netfilter.Dst)}})
//	res, err := tbl.Apply(ctx) // res.RetryAfter: when to call Apply again
//
// What the Table can tell on its own is refused when declared, with an
// error and nothing changed: a rule netfilter.Rule.Validate refuses, a
// rule past a limit of nftables (MaxCommentLength, MaxLogPrefixLength), a
// set or verdict map the Table does not declare, a construct its role or
// hook does not take (DROP in nat, REJECT outside filter's INPUT, FORWARD
// and OUTPUT, NAT outside nat, NoTrack outside raw, an input interface at
// OUTPUT…), a chain name without ChainPrefix (also as the target of a
// jump or goto, of a rule or a verdict-map element, which must be a regular
// chain: never a base chain), a set of the wrong shape, an
// element of the other family. What depends on other declarations or on
// the kernel is found by Apply and held back per object (see below): a
// jump to a chain not declared, a loop of chains, what the kernel refuses.
//
// A regular chain is programmed only while a programmed rule or a
// verdict-map element jumps to it, or when it is forced.
//
// Apply reads the table over netlink on its first call — chains, rules
// (handles and user data only: expressions are never parsed back), sets
// and elements, consistently (the ruleset generation is the same before and
// after) — computes the difference and writes it in one netlink batch
// transaction, which the kernel commits whole or not at all: only the
// chains, rules, sets and elements that differ. In a chain, the rules that
// stand in the declared order stay, with their counters; the others are
// deleted and the missing ones inserted at their places. References come
// before what uses them and go after it. Set elements are the one thing
// split: those past ElementsPerTransaction go in further transactions, so
// that a set of a hundred thousand elements loads in bounded messages, one
// transaction at a time, the Table encoding the next while the kernel
// processes one (a cancelled context stops Apply between two of them).
// When nothing changed since the last Apply it makes no system call at
// all; when nothing differs it writes nothing. Between reads it trusts
// what it wrote: QueueResync (which a dataplane.Loop calls every
// ResyncInterval) and the PostWriteRecheck delays make the next Apply ask
// the kernel for its ruleset generation, and read the table again only if
// the generation moved. A restarted agent's Table adopts its table and
// writes nothing when the declared state is the one in the kernel.
//
// # One object never holds back the others
//
// The kernel answers a refused request with an errno, and the Table's
// socket asks for the offset of the attribute at fault, so that a refusal
// names its object: a chain (its rules, creation or deletion), a set, or
// one element. Apply leaves that object out — a chain keeps its kernel
// rules, and is created empty if it did not exist, so that jumps to it stay
// valid; an element or set keeps its kernel version — and sends the rest
// again, in the same Apply. It then returns its dataplane.Ledger's
// *dataplane.PartialError (errors.Is(err, dataplane.ErrPartial)) naming
// each object left out, in the order they first failed (Objects: a
// *dataplane.ObjectError of Driver "nftables", Kind KindChain, KindSet or
// KindElement, Reason ErrRefused with the kernel's errno as Err, or
// ErrUnknownChain or ErrChainLoop for a declaration that cannot be
// written); a refused object is retried after a second, then after a
// delay that doubles up to five minutes, or at once when declared anew,
// and one that cannot be written is looked at again by every Apply that
// plans. A failure of
// the Table as a whole (the socket, a read, a refusal the kernel does not
// attribute) is returned as such and the next Apply reads the table again;
// after Options.RebuildAfter of them in a row, the next Apply deletes the
// table and writes it whole in one transaction, so that the base chains
// are never missing.
//
// # Plan, State and Stats
//
// A Table is a dataplane.Planner, Stater and StatsReporter, as every
// driver. Plan runs Apply's own planner without sending anything: it
// reads the kernel where Apply would and lists, in the order of Apply's
// transactions, the table's creation, the chains created, replaced (a
// policy) or deleted, the rules added to or deleted from a chain, the sets
// created or deleted and each element added or deleted; the Apply right
// after makes exactly these writes (if the kernel takes them all), and an
// Apply whose Plan is empty writes nothing:
//
//	plan, _ := tbl.Plan(ctx)
//	fmt.Println(plan) // nftables-ip-np-filter: 1 write
//	                  // + rule np-fw np:tXFNxRiTaLJTwl0b all
//
// State lists the chains, our rules, the sets and elements the kernel
// holds, the drift from the declarations (a chain missing or with other
// rules, an element missing or unwanted…) and the objects failing. An
// IPSets is a Planner too, whose Plan is empty (the Table writes its sets),
// and a Stater of its own sets, failing those whose removal waits.
//
// # Sets for the node managers: IPSets
//
// The node managers (masquerade, hostips, the overlays…) declare their sets
// on a netfilter.Sets and match them in rules by its KernelName. On this
// backend the rules match the sets of their own table, so the Sets is an
// *IPSets, made on the Table that holds the rules: NewIPSets(tbl,
// IPSetsOptions{Prefix: "np4-"}). It implements netfilter.Sets, validating as
// package ipsets does (a bad name, an unknown type, a member of the other
// family or of the wrong shape is refused with the same ipsets sentinels
// and changes nothing), and declares each set on the Table at once, so
// that sets and the rules that use them are written in one transaction and
// members change element by element:
//
//	nat, _ := nftables.New(nftables.Options{Name: "npm-nat", Family: ipfamily.IPv4, Role: nftables.NAT, ChainPrefix: "npm-", Kernel: ns})
//	sets, _ := nftables.NewIPSets(nat, nftables.IPSetsOptions{})
//	m, _ := masquerade.New(masquerade.Options{Family: ipfamily.IPv4, Sets: sets, Table: nat, Chain: "npm-masq"})
//	_ = loop.AddManager(m)
//	_ = loop.AddDriver(sets) // removes the sets whose rules are gone
//	_ = loop.AddDriver(nat)  // writes sets and rules
//
// It holds hash:ip (a set of addresses), hash:net (an interval set of
// prefixes), hash:ip,port (address . protocol . port) and bitmap:port (ports;
// a rule matching it needs a tcp, udp or sctp protocol criterion, else it is
// netfilter.ErrUnsupported), in
// either family; hash:net,net is refused (netfilter.ErrUnknownSetType), since the
// kernel's sets of concatenated ranges refuse the overlapping pairs an ip
// set holds. A set that the Table's rules still use when it is removed
// waits until they stop using it (see IPSets.RemoveSet); meanwhile
// ApplyDeletions reports it (a *dataplane.ObjectError with Reason
// ErrSetInUse).
//
// # Switching backend
//
// A node changes backend with one option of its agent. Once, before its
// loop starts, the agent calls nfmigrate.RemoveLeftovers with the backend
// it keeps: moving to this package, it removes the iptables Tables' chains
// and hash-commented rules from both iptables backends; moving back to
// package iptables, it removes the tables this package owned (RemoveTable).
//
// # Namespaces and tests
//
// Options.Kernel is the namespace, through its kernel.NFTables capability:
// a *kernel.Namespace opens the Table's netfilter socket inside it once
// (kernel.Namespace.OpenNFTablesSocket); Close releases it. Unit tests hand
// the Table a kernelfake.Namespace (or its nftablesfake.Namespace alone),
// which serves the same netlink conversation from memory.
//
// # What it never touches
//
// Any other table: kube-proxy's, iptables-nft's, firewalld's, anyone's —
// not even our table's name in the other family. It runs no binary and
// loads no module of its own accord (the kernel loads what the rules use).
//
// # Limits
//
// One Table per table: two Tables (two roles, two agents) on one name
// would delete each other's work. The inet family is not offered: the rule
// model is per IP family (one Table per family, as every driver here).
// Maps with data other than verdicts are not offered (no action of the
// rule model would use them). In a set of one field, overlapping and
// adjacent elements merge into ranges, as nft's auto-merge does; in a set
// of concatenated ranges, overlapping elements are refused by the kernel,
// one by one. The kernel checks an element against those written before
// it only, by whether its first or last key falls in one of them; the
// Table writes them in the order of their first keys, so that which
// element of an overlapping pair is refused does not vary from one Apply
// to the next: the later one, if a key of it falls in the other (always
// when the other contains it; an overlap that neither key of the later
// element falls in goes unnoticed). The package builds everywhere, but rules are rendered (with
// github.com/google/nftables/expr, which builds on Linux only) on Linux
// only: elsewhere declaring a rule fails with netfilter.ErrUnsupported.
package nftables
