//go:build linux

package iptables

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"github.com/google/nftables"
	"github.com/google/nftables/userdata"
	"github.com/mdlayher/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/nodeplane/nodeplane/internal/netnsutil"
)

// fastRead reads the chains of a table of the namespace ns in process.
func fastRead(ns netns.NsHandle, b Backend, v IPVersion, table string, p *saveParser) ([]fastChain, error) {
	switch b {
	case BackendLegacy:
		return legacyRead(ns, v, table, p)
	case BackendNFT:
		return nftRead(ns, v, table, p)
	}
	return nil, fmt.Errorf("backend %v", b)
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

// maxLegacyAttempts bounds the reads of a table that keeps changing size
// between the two getsockopt calls.
const maxLegacyAttempts = 5

// legacyRead reads a table through the xtables getsockopt interface of a
// raw socket created in ns. The kernel copies a consistent snapshot, so no
// lock is taken.
func legacyRead(ns netns.NsHandle, v IPVersion, table string, p *saveParser) ([]fastChain, error) {
	family, level := unix.AF_INET, unix.SOL_IP
	if v == IPv6 {
		family, level = unix.AF_INET6, unix.SOL_IPV6
	}
	fd := -1
	err := netnsutil.Do(ns, func() error {
		var err error
		fd, err = unix.Socket(family, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("raw socket: %w", err)
	}
	defer unix.Close(fd)
	for range maxLegacyAttempts {
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
		return parseEntries(info, buf[xtGetEntriesHeader:], v, p)
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
func parseEntries(info, blob []byte, v IPVersion, p *saveParser) ([]fastChain, error) {
	ne := binary.NativeEndian
	entrySize, targetOff := iptEntrySize, iptTargetOffset
	if v == IPv6 {
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
// like the iptables table) over nf_tables netlink in ns: its chains, then
// every rule of the table in one dump, with the hash taken from the first
// comment match that is ours (or the rule's comment user data, which older
// iptables-nft versions used) and the jump target from the verdict. A rule
// with an expression iptables-nft does not write is refused, so that
// iptables-save decides whether the table is compatible. The two dumps
// must come from the same ruleset generation, else it reads again.
func nftRead(ns netns.NsHandle, v IPVersion, table string, p *saveParser) ([]fastChain, error) {
	family := nftables.TableFamilyIPv4
	if v == IPv6 {
		family = nftables.TableFamilyIPv6
	}
	conn, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: int(ns)})
	if err != nil {
		return nil, fmt.Errorf("nf_tables connection: %w", err)
	}
	defer conn.Close()
	for range maxLegacyAttempts {
		chains, same, err := nftDump(conn, byte(family), table, p)
		if err != nil || same {
			return chains, err
		}
	}
	return nil, fmt.Errorf("the %s table kept changing while read", table)
}

// nftDump dumps the chains and then the rules of a table; same reports
// whether both dumps saw the same ruleset generation.
func nftDump(conn *netlink.Conn, family byte, table string, p *saveParser) (chains []fastChain, same bool, err error) {
	tableAttr, err := netlink.MarshalAttributes([]netlink.Attribute{{Type: unix.NFTA_RULE_TABLE, Data: []byte(table + "\x00")}})
	if err != nil {
		return nil, false, err
	}
	dump := func(msgType uint16) ([]netlink.Message, error) {
		return conn.Execute(netlink.Message{
			Header: netlink.Header{
				Type:  netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | msgType),
				Flags: netlink.Request | netlink.Dump,
			},
			Data: append([]byte{family, unix.NFNETLINK_V0, 0, 0}, tableAttr...),
		})
	}
	gen := -1
	sameGen := func(m netlink.Message) bool {
		if len(m.Data) < 4 {
			return false
		}
		g := int(binary.BigEndian.Uint16(m.Data[2:4]))
		if gen < 0 {
			gen = g
		}
		return g == gen
	}
	same = true
	builtin := map[string]bool{}
	for _, c := range tableChains[table] {
		builtin[c] = true
	}
	msgs, err := dump(unix.NFT_MSG_GETCHAIN)
	if err != nil {
		return nil, false, fmt.Errorf("listing chains: %w", err)
	}
	index := map[string]int{}
	for _, m := range msgs {
		same = sameGen(m) && same
		name, tbl, base, err := nftChainFromMsg(m)
		if err != nil {
			return nil, false, err
		}
		if tbl != table {
			continue
		}
		if base && !builtin[name] {
			return nil, false, fmt.Errorf("base chain %s is not a built-in chain of %s", name, table)
		}
		index[name] = len(chains)
		chains = append(chains, fastChain{name: name})
	}
	msgs, err = dump(unix.NFT_MSG_GETRULE)
	if err != nil {
		return nil, false, fmt.Errorf("listing rules: %w", err)
	}
	for _, m := range msgs {
		same = sameGen(m) && same
		chain, tbl, r, err := nftRuleFromMsg(m, p)
		if err != nil {
			return nil, false, err
		}
		if tbl != table {
			continue
		}
		i, ok := index[chain]
		if !ok {
			same = false // a chain created between the dumps
			continue
		}
		chains[i].rules = append(chains[i].rules, r)
	}
	return chains, same, nil
}

// nlAttrs calls fn for each netlink attribute of b, with its type (the
// nested and byte-order flags masked off) and payload; it stops at the
// first error of fn or malformed attribute.
func nlAttrs(b []byte, fn func(typ uint16, data []byte) error) error {
	for len(b) >= 4 {
		n := int(binary.NativeEndian.Uint16(b))
		if n < 4 || n > len(b) {
			return errors.New("malformed netlink attribute")
		}
		if err := fn(binary.NativeEndian.Uint16(b[2:])&0x3fff, b[4:n]); err != nil {
			return err
		}
		n = (n + 3) &^ 3
		if n > len(b) {
			break
		}
		b = b[n:]
	}
	return nil
}

// nlString returns a NUL-terminated attribute payload as a string.
func nlString(b []byte) string { return string(cString(b)) }

// nftChainFromMsg decodes a chain message: its name, table and whether it
// is a base chain (has a hook).
func nftChainFromMsg(m netlink.Message) (name, table string, base bool, err error) {
	if len(m.Data) < 4 {
		return "", "", false, errors.New("short chain message")
	}
	err = nlAttrs(m.Data[4:], func(typ uint16, data []byte) error {
		switch typ {
		case unix.NFTA_CHAIN_TABLE:
			table = nlString(data)
		case unix.NFTA_CHAIN_NAME:
			name = nlString(data)
		case unix.NFTA_CHAIN_HOOK:
			base = true
		}
		return nil
	})
	return name, table, base, err
}

// nftExprs are the expressions iptables-nft writes.
var nftExprs = map[string]bool{
	"match": true, "target": true, "immediate": true, "payload": true, "meta": true, "cmp": true,
	"bitwise": true, "counter": true, "lookup": true, "range": true, "limit": true, "log": true,
}

// nftUdataComment is NFTNL_UDATA_RULE_COMMENT, the rule user data TLV of a
// comment.
const nftUdataComment = 0

// nftRuleFromMsg decodes a rule message: its chain, table, hash and jump
// target.
func nftRuleFromMsg(m netlink.Message, p *saveParser) (chain, table string, r fastRule, err error) {
	if len(m.Data) < 4 {
		return "", "", r, errors.New("short rule message")
	}
	var udata []byte
	err = nlAttrs(m.Data[4:], func(typ uint16, data []byte) error {
		switch typ {
		case unix.NFTA_RULE_TABLE:
			table = nlString(data)
		case unix.NFTA_RULE_CHAIN:
			chain = nlString(data)
		case unix.NFTA_RULE_USERDATA:
			udata = data
		case unix.NFTA_RULE_EXPRESSIONS:
			return nlAttrs(data, func(typ uint16, elem []byte) error {
				if typ != unix.NFTA_LIST_ELEM {
					return nil
				}
				return nftExpr(elem, p, &r)
			})
		}
		return nil
	})
	if err != nil {
		return "", "", r, err
	}
	if r.hash == nil && udata != nil {
		if c := userdata.Get(udata, nftUdataComment); c != nil {
			r.hash = p.ourHash(cString(c))
		}
	}
	return chain, table, r, nil
}

// nftExpr reads one expression into r.
func nftExpr(elem []byte, p *saveParser, r *fastRule) error {
	var name []byte
	var data []byte
	if err := nlAttrs(elem, func(typ uint16, b []byte) error {
		switch typ {
		case unix.NFTA_EXPR_NAME:
			name = cString(b)
		case unix.NFTA_EXPR_DATA:
			data = b
		}
		return nil
	}); err != nil {
		return err
	}
	if !nftExprs[string(name)] {
		return fmt.Errorf("expression %q", name)
	}
	switch string(name) {
	case "match":
		var mname, info []byte
		if err := nlAttrs(data, func(typ uint16, b []byte) error {
			switch typ {
			case unix.NFTA_MATCH_NAME:
				mname = cString(b)
			case unix.NFTA_MATCH_INFO:
				info = b
			}
			return nil
		}); err != nil {
			return err
		}
		if string(mname) == "comment" && r.hash == nil {
			r.hash = p.ourHash(cString(info))
		}
	case "target":
		return nlAttrs(data, func(typ uint16, b []byte) error {
			if typ == unix.NFTA_TARGET_NAME {
				r.target = nlString(b)
			}
			return nil
		})
	case "immediate":
		return nlAttrs(data, func(typ uint16, b []byte) error {
			if typ != unix.NFTA_IMMEDIATE_DATA {
				return nil
			}
			return nlAttrs(b, func(typ uint16, b []byte) error {
				if typ != unix.NFTA_DATA_VERDICT {
					return nil
				}
				var code int32
				var chain string
				if err := nlAttrs(b, func(typ uint16, b []byte) error {
					switch {
					case typ == unix.NFTA_VERDICT_CODE && len(b) == 4:
						code = int32(binary.BigEndian.Uint32(b))
					case typ == unix.NFTA_VERDICT_CHAIN:
						chain = nlString(b)
					}
					return nil
				}); err != nil {
					return err
				}
				if code == unix.NFT_JUMP || code == unix.NFT_GOTO {
					r.target = chain
				}
				return nil
			})
		})
	}
	return nil
}
