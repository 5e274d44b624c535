//go:build linux

package iptables

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"

	"github.com/nodeplane/nodeplane/internal/nfnl"
	"github.com/nodeplane/nodeplane/ipfamily"
)

// fastRead reads the chains of a table in process, with sockets it opens
// in the calling thread's network namespace.
func fastRead(b Backend, f ipfamily.Family, table string, p *saveParser) ([]fastChain, error) {
	if b == BackendLegacy {
		return legacyRead(f, table, p)
	}
	return nftRead(f, table, p)
}

// The xtables getsockopt interface (linux/netfilter_ipv4/ip_tables.h and
// linux/netfilter_ipv6/ip6_tables.h); the IPv6 numbers are the same.
const (
	xtSoGetInfo    = 64 // IPT_SO_GET_INFO, IP6T_SO_GET_INFO
	xtSoGetEntries = 65 // IPT_SO_GET_ENTRIES, IP6T_SO_GET_ENTRIES

	xtTableMaxNameLen     = 32
	xtExtensionMaxNameLen = 29
	xtGetInfoSize         = 84 // struct ipt_getinfo
	xtGetEntriesHeader    = 40 // struct ipt_get_entries up to entrytable
	xtMatchHeader         = 32 // struct xt_entry_match up to data
	xtCommentLen          = 256

	// Sizes of struct ipt_entry and ip6t_entry, and the offsets of their
	// target_offset and next_offset fields.
	iptEntrySize, iptTargetOffset   = 112, 88
	ip6tEntrySize, ip6tTargetOffset = 168, 140
)

// hookNames are the built-in chains by netfilter hook number.
var hookNames = [5]string{"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"}

// maxReadAttempts bounds the reads of a table that keeps changing while
// read (between the two getsockopt calls, or the two nf_tables dumps).
const maxReadAttempts = 5

// legacyRead reads a table through the xtables getsockopt interface of a
// raw socket. The kernel copies a consistent snapshot, so no lock is
// taken.
func legacyRead(f ipfamily.Family, table string, p *saveParser) ([]fastChain, error) {
	family, level := unix.AF_INET, unix.SOL_IP
	if f == ipfamily.IPv6 {
		family, level = unix.AF_INET6, unix.SOL_IPV6
	}
	fd, err := unix.Socket(family, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
	if err != nil {
		return nil, fmt.Errorf("raw socket: %w", err)
	}
	defer unix.Close(fd)
	for range maxReadAttempts {
		info := make([]byte, xtGetInfoSize)
		copy(info, table)
		if err := getsockopt(fd, level, xtSoGetInfo, info); err != nil {
			return nil, fmt.Errorf("getting the %s table's info: %w", table, err)
		}
		ne := binary.NativeEndian
		size := ne.Uint32(info[80:])
		buf := make([]byte, xtGetEntriesHeader+int(size))
		copy(buf, table)
		ne.PutUint32(buf[xtTableMaxNameLen:], size)
		err := getsockopt(fd, level, xtSoGetEntries, buf)
		if errors.Is(err, unix.EAGAIN) {
			continue // the table changed between the calls
		}
		if err != nil {
			return nil, fmt.Errorf("getting the %s table's entries: %w", table, err)
		}
		return parseEntries(info, buf[xtGetEntriesHeader:], f, p)
	}
	return nil, fmt.Errorf("the %s table kept changing while read", table)
}

// getsockopt calls getsockopt(2) with buf as the in/out value.
func getsockopt(fd, level, opt int, buf []byte) error {
	n := uint32(len(buf))
	_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), uintptr(level), uintptr(opt),
		uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&n)), 0)
	if errno != 0 {
		return errno
	}
	return nil
}

// legacyEntry is one entry of the table blob.
type legacyEntry struct {
	off     int
	hash    []byte
	target  string // target extension name; "" for the standard target
	verdict int32  // standard target verdict (a jump: the offset of the target)
	errName string // ERROR target: the chain name
}

// parseEntries turns the entries blob of a table (with the info that came
// with it) into its chains: built-in chains from the hook offsets, user
// chains from their ERROR heads, rules with their hash and jump target.
func parseEntries(info, blob []byte, f ipfamily.Family, p *saveParser) ([]fastChain, error) {
	ne := binary.NativeEndian
	entrySize, targetOff := iptEntrySize, iptTargetOffset
	if f == ipfamily.IPv6 {
		entrySize, targetOff = ip6tEntrySize, ip6tTargetOffset
	}
	validHooks := ne.Uint32(info[32:])
	var entries []legacyEntry
	for off := 0; off < len(blob); {
		if len(blob)-off < entrySize {
			return nil, fmt.Errorf("truncated entry at %d", off)
		}
		e := blob[off:]
		tOff := int(ne.Uint16(e[targetOff:]))
		next := int(ne.Uint16(e[targetOff+2:]))
		if tOff < entrySize || next < tOff+xtMatchHeader || next > len(e) {
			return nil, fmt.Errorf("bad entry offsets at %d", off)
		}
		le := legacyEntry{off: off}
		for m := entrySize; m < tOff; {
			msize := int(ne.Uint16(e[m:]))
			if msize < xtMatchHeader || m+msize > tOff {
				return nil, fmt.Errorf("bad match at %d", off+m)
			}
			name := cString(e[m+2 : m+2+xtExtensionMaxNameLen])
			if le.hash == nil && string(name) == "comment" && msize >= xtMatchHeader+xtCommentLen {
				le.hash = p.ourHash(cString(e[m+xtMatchHeader : m+xtMatchHeader+xtCommentLen]))
			}
			m += msize
		}
		tsize := int(ne.Uint16(e[tOff:]))
		if tsize < xtMatchHeader || tOff+tsize > next {
			return nil, fmt.Errorf("bad target at %d", off+tOff)
		}
		le.target = string(cString(e[tOff+2 : tOff+2+xtExtensionMaxNameLen]))
		data := e[tOff+xtMatchHeader : tOff+tsize]
		switch le.target {
		case "":
			if len(data) < 4 {
				return nil, fmt.Errorf("bad standard target at %d", off+tOff)
			}
			le.verdict = int32(ne.Uint32(data))
		case "ERROR":
			le.errName = string(cString(data))
		}
		entries = append(entries, le)
		off += next
	}

	// Chain starts: built-in chains at their hook entry (ending at their
	// underflow, the policy), user chains at their ERROR head.
	var hookAt, underflow = map[int]string{}, map[int]bool{}
	for h := range hookNames {
		if validHooks&(1<<h) == 0 {
			continue
		}
		hookAt[int(ne.Uint32(info[36+4*h:]))] = hookNames[h]
		underflow[int(ne.Uint32(info[56+4*h:]))] = true
	}
	// Jump targets: the entry after a user chain's head.
	chainAt := map[int]string{}
	for i, e := range entries {
		if e.target == "ERROR" && i+1 < len(entries) {
			chainAt[entries[i+1].off] = e.errName
		}
	}

	var chains []fastChain
	cur, user := -1, false
	closeUser := func() {
		if cur >= 0 && user && len(chains[cur].rules) > 0 {
			chains[cur].rules = chains[cur].rules[:len(chains[cur].rules)-1] // the RETURN tail
		}
		cur, user = -1, false
	}
	for i, e := range entries {
		if name, ok := hookAt[e.off]; ok {
			closeUser()
			chains = append(chains, fastChain{name: name})
			cur = len(chains) - 1
		}
		if underflow[e.off] && !user {
			cur = -1 // the policy of a built-in chain
			continue
		}
		if e.target == "ERROR" {
			closeUser()
			if i == len(entries)-1 {
				break // the table's end marker
			}
			chains = append(chains, fastChain{name: e.errName})
			cur, user = len(chains)-1, true
			continue
		}
		if cur < 0 {
			return nil, fmt.Errorf("entry at %d outside every chain", e.off)
		}
		r := fastRule{hash: e.hash, target: e.target}
		if e.target == "" && e.verdict >= 0 {
			r.target = chainAt[int(e.verdict)]
		}
		chains[cur].rules = append(chains[cur].rules, r)
	}
	closeUser()
	return chains, nil
}

// nftRead reads a table of the iptables-nft layout (table ip or ip6 named
// like the iptables table) over nf_tables netlink: its chains, then the
// rules of each chain, with the hash taken from the first comment match
// that is ours (or the rule's comment user data, which older iptables-nft
// versions used) and the jump target from the verdict. A rule with an
// expression iptables-nft does not write is refused, so that
// iptables-save decides whether the table is compatible. Every answer
// must come from the same ruleset generation, else it reads again.
func nftRead(f ipfamily.Family, table string, p *saveParser) ([]fastChain, error) {
	family := byte(nfnl.FamilyIPv4)
	if f == ipfamily.IPv6 {
		family = nfnl.FamilyIPv6
	}
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
	if err != nil {
		return nil, fmt.Errorf("nf_tables socket: %w", err)
	}
	defer unix.Close(fd)
	for range maxReadAttempts {
		chains, same, err := nftDump(fd, family, table, p)
		if err != nil || same {
			return chains, err
		}
	}
	return nil, fmt.Errorf("the %s table kept changing while read", table)
}

// nftDump lists the chains of a table, dumps the rules of each chain and
// asks for the ruleset generation; same reports whether every answer came
// from one generation. Rules are dumped chain by chain, as iptables-nft
// does: for each 32 KiB it sends, the kernel walks again the rules of the
// dump it sent before, which over a whole table is quadratic.
func nftDump(fd int, family byte, table string, p *saveParser) (chains []fastChain, same bool, err error) {
	var w nfnl.Writer
	// Large enough for the 32 KiB the kernel sends at most per read once
	// a read offers that much (a page otherwise).
	buf := make([]byte, 1<<16)
	gen := -1
	same = true
	sameGen := func(m *nfnl.Msg) {
		if gen < 0 {
			gen = int(m.ResID)
		}
		same = same && int(m.ResID) == gen
	}
	builtin := map[string]bool{}
	for _, c := range tableChains[table] {
		builtin[c] = true
	}
	w.Reset()
	start := w.Begin(nfnl.Type(nfnl.MsgGetChain), nfnl.FlagRequest|nfnl.FlagDump, 0, family, 0)
	w.Str(nfnl.ChainTable, table)
	w.End(start)
	err = nftRequest(fd, w.B, buf, func(m *nfnl.Msg) error {
		sameGen(m)
		c, err := nfnl.ParseChain(m.Data)
		if err != nil || c.Table != table {
			return err
		}
		if c.Hook != nil && !builtin[c.Name] {
			return fmt.Errorf("base chain %s is not a built-in chain of %s", c.Name, table)
		}
		chains = append(chains, fastChain{name: c.Name})
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("listing chains: %w", err)
	}
	for i := range chains {
		w.Reset()
		start := w.Begin(nfnl.Type(nfnl.MsgGetRule), nfnl.FlagRequest|nfnl.FlagDump, 0, family, 0)
		w.Str(nfnl.RuleTable, table)
		w.Str(nfnl.RuleChain, chains[i].name)
		w.End(start)
		err = nftRequest(fd, w.B, buf, func(m *nfnl.Msg) error {
			sameGen(m)
			r, err := nftRuleFromMsg(m.Data, p)
			r.hash = bytes.Clone(r.hash) // out of buf, which the next read overwrites
			chains[i].rules = append(chains[i].rules, r)
			return err
		})
		if err != nil {
			return nil, false, fmt.Errorf("listing the rules of %s: %w", chains[i].name, err)
		}
	}
	// A change after the last answer, that no answer showed (a chain
	// deleted before its dump), shows in the generation now.
	w.Reset()
	start = w.Begin(nfnl.Type(nfnl.MsgGetGen), nfnl.FlagRequest|nfnl.FlagAck, 0, unix.AF_UNSPEC, 0)
	w.End(start)
	if err := nftRequest(fd, w.B, buf, func(m *nfnl.Msg) error { sameGen(m); return nil }); err != nil {
		return nil, false, fmt.Errorf("getting the generation: %w", err)
	}
	return chains, same, nil
}

// errAnswered ends the walk of a datagram at the end of an answer.
var errAnswered = errors.New("end of the answer")

// nftRequest sends the nf_tables request req (a whole message) on the
// netlink socket fd and calls fn with each nf_tables message of the
// answer, read through buf, until the end of the dump or the
// acknowledgement. An error from the kernel is returned as its errno.
func nftRequest(fd int, req, buf []byte, fn func(m *nfnl.Msg) error) error {
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		err = nfnl.ForEachMsg(buf[:n], func(m *nfnl.Msg) error {
			switch {
			case m.Type == nfnl.MsgDone:
				return errAnswered
			case m.Type == nfnl.MsgError: // an error, or the acknowledgement (0)
				e, err := nfnl.ParseError(m.Flags, m.Data)
				if err != nil {
					return err
				}
				if e.Errno != 0 {
					return unix.Errno(-e.Errno)
				}
				return errAnswered
			case !m.IsNFT():
				return fmt.Errorf("unexpected netlink message type %#x", m.Type)
			}
			return fn(m)
		})
		if errors.Is(err, errAnswered) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// nftExprs are the expressions iptables-nft writes (limit and log only in
// the forms checked by nftExpr).
var nftExprs = map[string]bool{
	"match": true, "target": true, "immediate": true, "payload": true, "meta": true, "cmp": true,
	"bitwise": true, "counter": true, "lookup": true, "range": true, "limit": true, "log": true,
}

// nftUdataComment is NFTNL_UDATA_RULE_COMMENT, the rule user data TLV of a
// comment.
const nftUdataComment = 0

// nftRuleFromMsg decodes the attributes of a rule message: its hash and
// jump target. (Not nfnl.ParseRule, which would copy out the table and
// chain names of every rule.)
func nftRuleFromMsg(attrs []byte, p *saveParser) (r fastRule, err error) {
	var exprs, udata []byte
	a := nfnl.NewAttrs(attrs)
	for a.Next() {
		switch a.Type() {
		case nfnl.RuleExprs:
			exprs = a.Value()
		case nfnl.RuleUserData:
			udata = a.Value()
		}
	}
	if err := a.Err(); err != nil {
		return r, err
	}
	err = nfnl.WalkExprs(exprs, func(name string, data []byte) error {
		return nftExpr(name, data, p, &r)
	})
	if r.hash == nil && udata != nil {
		if c := userdata.Get(udata, nftUdataComment); c != nil {
			r.hash = p.ourHash(cString(c))
		}
	}
	return r, err
}

// nftExpr reads one expression, its name and data, into r.
func nftExpr(name string, data []byte, p *saveParser, r *fastRule) error {
	if !nftExprs[name] {
		return fmt.Errorf("expression %q", name)
	}
	a := nfnl.NewAttrs(data)
	switch name {
	case "limit", "log":
		// As iptables-nft-save: a packet limit, not inverted (NFT_LIMIT_PKTS
		// and no flag are 0), or a log to a group (NFLOG).
		ok := name == "limit"
		for a.Next() {
			switch {
			case name == "log" && a.Type() == unix.NFTA_LOG_GROUP:
				ok = true
			case name == "limit" && (a.Type() == unix.NFTA_LIMIT_TYPE || a.Type() == unix.NFTA_LIMIT_FLAGS):
				ok = ok && len(a.Value()) == 4 && a.U32() == 0
			}
		}
		if a.Err() == nil && !ok {
			return fmt.Errorf("a %s expression iptables-nft does not write", name)
		}
	case "match":
		var mname, info []byte
		for a.Next() {
			switch a.Type() {
			case unix.NFTA_MATCH_NAME:
				mname = cString(a.Value())
			case unix.NFTA_MATCH_INFO:
				info = a.Value()
			}
		}
		if a.Err() == nil && string(mname) == "comment" && r.hash == nil {
			r.hash = p.ourHash(cString(info))
		}
	case "target":
		for a.Next() {
			if a.Type() == unix.NFTA_TARGET_NAME {
				r.target = a.Str()
			}
		}
	case "immediate":
		v, ok, err := nfnl.ImmediateVerdict(data)
		if err != nil {
			return err
		}
		if ok && (v.Code == nfnl.VerdictJump || v.Code == nfnl.VerdictGoto) {
			r.target = v.Chain
		}
	}
	return a.Err()
}

// cString returns b up to its first NUL byte.
func cString(b []byte) []byte {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return b[:i]
	}
	return b
}
