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
	family := byte(unix.NFPROTO_IPV4)
	if f == ipfamily.IPv6 {
		family = unix.NFPROTO_IPV6
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
	// NFTA_CHAIN_TABLE and NFTA_RULE_TABLE are the same.
	req := nlAttr([]byte{family, unix.NFNETLINK_V0, 0, 0}, unix.NFTA_RULE_TABLE, table)
	// Large enough for the 32 KiB the kernel sends at most per read once
	// a read offers that much (a page otherwise).
	buf := make([]byte, 1<<16)
	gen := -1
	same = true
	sameGen := func(data []byte) error {
		g := int(binary.BigEndian.Uint16(data[2:4])) // nfgenmsg.res_id
		if gen < 0 {
			gen = g
		}
		same = same && g == gen
		return nil
	}
	builtin := map[string]bool{}
	for _, c := range tableChains[table] {
		builtin[c] = true
	}
	err = nlRequest(fd, unix.NFT_MSG_GETCHAIN, unix.NLM_F_DUMP, req, buf, func(data []byte) error {
		sameGen(data)
		name, tbl, base, err := nftChainFromMsg(data)
		if err != nil || tbl != table {
			return err
		}
		if base && !builtin[name] {
			return fmt.Errorf("base chain %s is not a built-in chain of %s", name, table)
		}
		chains = append(chains, fastChain{name: name})
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("listing chains: %w", err)
	}
	for i := range chains {
		err = nlRequest(fd, unix.NFT_MSG_GETRULE, unix.NLM_F_DUMP, nlAttr(req[:len(req):len(req)], unix.NFTA_RULE_CHAIN, chains[i].name), buf, func(data []byte) error {
			sameGen(data)
			r, err := nftRuleFromMsg(data, p)
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
	if err := nlRequest(fd, unix.NFT_MSG_GETGEN, unix.NLM_F_ACK, []byte{unix.AF_UNSPEC, unix.NFNETLINK_V0, 0, 0}, buf, sameGen); err != nil {
		return nil, false, fmt.Errorf("getting the generation: %w", err)
	}
	return chains, same, nil
}

// nlRequest sends the nf_tables request typ with flags and payload req on
// the netlink socket fd and calls fn with the payload (at least a struct
// nfgenmsg) of each message of the answer, read through buf, until the end
// of the dump or the acknowledgement.
func nlRequest(fd int, typ, flags uint16, req, buf []byte, fn func(data []byte) error) error {
	ne := binary.NativeEndian
	msg := make([]byte, unix.NLMSG_HDRLEN, unix.NLMSG_HDRLEN+len(req))
	ne.PutUint32(msg, uint32(unix.NLMSG_HDRLEN+len(req)))
	ne.PutUint16(msg[4:], unix.NFNL_SUBSYS_NFTABLES<<8|typ)
	ne.PutUint16(msg[6:], unix.NLM_F_REQUEST|flags)
	if err := unix.Sendto(fd, append(msg, req...), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
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
		for b := buf[:n]; len(b) > 0; {
			l := 0
			if len(b) >= unix.NLMSG_HDRLEN {
				l = int(ne.Uint32(b))
			}
			if l < unix.NLMSG_HDRLEN+4 || l > len(b) {
				return errors.New("malformed netlink message")
			}
			data := b[unix.NLMSG_HDRLEN:l]
			switch ne.Uint16(b[4:]) {
			case unix.NLMSG_DONE:
				return nil
			case unix.NLMSG_ERROR: // an error, or the acknowledgement (0)
				if errno := -int32(ne.Uint32(data)); errno != 0 {
					return unix.Errno(errno)
				}
				return nil
			}
			if err := fn(data); err != nil {
				return err
			}
			b = b[min(nlAlign(l), len(b)):]
		}
	}
}

// nlAttr appends to b a netlink attribute of type typ holding s and a NUL
// byte, padded.
func nlAttr(b []byte, typ uint16, s string) []byte {
	b = binary.NativeEndian.AppendUint16(b, uint16(4+len(s)+1))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = append(append(b, s...), 0)
	return append(b, make([]byte, nlAlign(len(b))-len(b))...)
}

// nlAlign rounds n up to the netlink alignment, 4 bytes.
func nlAlign(n int) int { return (n + 3) &^ 3 }

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
		n = nlAlign(n)
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
func nftChainFromMsg(data []byte) (name, table string, base bool, err error) {
	err = nlAttrs(data[4:], func(typ uint16, data []byte) error {
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

// nftExprs are the expressions iptables-nft writes (limit and log only in
// the forms checked by nftExpr).
var nftExprs = map[string]bool{
	"match": true, "target": true, "immediate": true, "payload": true, "meta": true, "cmp": true,
	"bitwise": true, "counter": true, "lookup": true, "range": true, "limit": true, "log": true,
}

// nftUdataComment is NFTNL_UDATA_RULE_COMMENT, the rule user data TLV of a
// comment.
const nftUdataComment = 0

// nftRuleFromMsg decodes a rule message: its hash and jump target.
func nftRuleFromMsg(data []byte, p *saveParser) (r fastRule, err error) {
	var udata []byte
	err = nlAttrs(data[4:], func(typ uint16, data []byte) error {
		switch typ {
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
	if r.hash == nil && udata != nil {
		if c := userdata.Get(udata, nftUdataComment); c != nil {
			r.hash = p.ourHash(cString(c))
		}
	}
	return r, err
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
	case "limit", "log":
		// As iptables-nft-save: a packet limit, not inverted (NFT_LIMIT_PKTS
		// and no flag are 0), or a log to a group (NFLOG).
		ok := string(name) == "limit"
		if err := nlAttrs(data, func(typ uint16, b []byte) error {
			switch {
			case string(name) == "log" && typ == unix.NFTA_LOG_GROUP:
				ok = true
			case string(name) == "limit" && (typ == unix.NFTA_LIMIT_TYPE || typ == unix.NFTA_LIMIT_FLAGS):
				ok = ok && len(b) == 4 && binary.BigEndian.Uint32(b) == 0
			}
			return nil
		}); err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("a %s expression iptables-nft does not write", name)
		}
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

// cString returns b up to its first NUL byte.
func cString(b []byte) []byte {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return b[:i]
	}
	return b
}
