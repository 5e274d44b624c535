package nftables

import (
	"crypto/sha256"
	"encoding/binary"
	"slices"

	"github.com/google/nftables/userdata"

	"github.com/nodeplane/nodeplane/internal/nfcore"
	"github.com/nodeplane/nodeplane/internal/nfnl"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/netfilter"
)

// Limits of nftables beyond those of the rule model (package netfilter).
const (
	// MaxCommentLength bounds the comment a rule carries in its user data:
	// HashPrefix, the 16-character hash and the rule's Comments joined by
	// blanks (nft shows comments up to this length).
	MaxCommentLength = 128
	// MaxLogPrefixLength is the longest LOG or NFLOG prefix the kernel
	// keeps.
	MaxLogPrefixLength = 127
	// HashLength is the length of the rule hash that follows HashPrefix
	// (that of both netfilter backends).
	HashLength = nfcore.HashLength
)

// Registers (NFT_REG_*, NFT_REG32_*).
const (
	reg1     = 1
	reg2     = 2
	reg3     = 3
	reg32_00 = 8
)

// placement is where a rule is declared: the Table's role and, for a base
// chain, its hook ("" for a regular chain, which the kernel checks against
// the base chains that reach it when the rule is written).
type placement struct {
	role Role
	hook netfilter.Hook
}

// setLookup returns a declared set's shape by name, or nil.
type setLookup func(name string) *setSpec

// rendered is a rule rendered for writing.
type rendered struct {
	// exprs is the payload of NFTA_RULE_EXPRESSIONS; the anonymous sets'
	// IDs in it are placeholders (their index plus one), big-endian at the
	// offsets idAt.
	exprs []byte
	idAt  []int
	anon  []anonSet
	// udata is the rule's user data: its comment with our hash.
	udata []byte
	// hash is the rule's 16-character hash (without HashPrefix).
	hash string
	// target is the chain the rule jumps or goes to, or "".
	target string
	// sets are the named sets the rule looks up; vmap the verdict map it
	// dispatches through ("" for none).
	sets []string
	vmap string
}

// anonSet is an anonymous constant set of one rule (several port ranges,
// several address types).
type anonSet struct {
	keyType, keyLen uint32
	interval        bool
	// elems are the encoded NFTA_LIST_ELEMs of its elements.
	elems []byte
}

// renderer renders rules for one Table.
type renderer struct {
	f        ipfamily.Family
	at       placement
	counters bool
	sets     setLookup
	// working state of one rule
	b   nfnl.Writer
	err error
	r   rendered
}

// ruleHash is the 16-character hash of a rendered rule: its expressions
// (anonymous sets by index), its anonymous sets' contents, its comments
// and salt.
func ruleHash(exprs []byte, anon []anonSet, comments []string, salt int) string {
	h := sha256.New()
	var n [8]byte
	put := func(b []byte) {
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	put(exprs)
	for _, a := range anon {
		binary.BigEndian.PutUint32(n[:4], a.keyType)
		binary.BigEndian.PutUint32(n[4:], a.keyLen)
		h.Write(n[:])
		if a.interval {
			h.Write([]byte{1})
		}
		put(a.elems)
	}
	for _, c := range comments {
		put([]byte(c))
	}
	binary.BigEndian.PutUint64(n[:], uint64(salt))
	h.Write(n[:])
	var sum [sha256.Size]byte
	return nfcore.HashString(h.Sum(sum[:0]))
}

// ruleHashFromUserData returns the hash of a rule's user data when its
// comment starts with prefix and a hash, else "".
func ruleHashFromUserData(udata []byte, prefix string) string {
	c, ok := userdata.GetString(udata, userdata.TypeComment)
	if !ok {
		return ""
	}
	h, _, _ := nfcore.CommentHash(c, prefix)
	return h
}

// anonSet adds an anonymous constant set with elems (keys as in a
// declared set of one field: first||last for an interval set).
func (rd *renderer) anonSet(keyType uint32, keyLen int, interval bool, elems map[string]string) {
	if interval {
		var err error
		if elems, err = canonicalRanges(keyLen, elems, true); err != nil {
			rd.err = err
			return
		}
	}
	keys := make([]string, 0, len(elems))
	for k := range elems {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var w nfnl.Writer
	for _, k := range keys {
		for _, e := range kernelElems(k, keyLen, interval, false, "") {
			w.AppendElem(&e)
		}
	}
	rd.r.anon = append(rd.r.anon, anonSet{keyType: keyType, keyLen: uint32(keyLen), interval: interval, elems: w.B})
}

// appendKernelElems appends the kernel elements of one encoded element, as
// kernelElems returns them, without allocating for a set of single keys.
func appendKernelElems(w *nfnl.Writer, k string, klen int, interval, concat bool, data string) {
	var v *nfnl.Verdict
	if data != "" {
		d := decodeVerdict(data)
		v = &d
	}
	switch {
	case !interval:
		w.AppendElemString(k, "", 0, v)
	case concat:
		w.AppendElemString(k[:klen], k[klen:], 0, v)
	default:
		for _, e := range kernelElems(k, klen, interval, concat, data) {
			w.AppendElem(&e)
		}
	}
}

// kernelElems returns the kernel elements of one encoded element: the key,
// or for a one-field interval set the first key and, unless the range
// ends at the top, the key after the last with the interval-end flag; for
// a concatenation with intervals, the key and its end.
func kernelElems(k string, klen int, interval, concat bool, data string) []nfnl.Elem {
	e := nfnl.Elem{Key: []byte(k[:klen])}
	if data != "" {
		v := decodeVerdict(data)
		e.Verdict = &v
	}
	switch {
	case !interval:
		return []nfnl.Elem{e}
	case concat:
		e.KeyEnd = []byte(k[klen:])
		return []nfnl.Elem{e}
	}
	hi := k[klen:]
	if isMax(hi) {
		return []nfnl.Elem{e}
	}
	return []nfnl.Elem{e, {Key: incremented(hi), Flags: nfnl.ElemIntervalEnd}}
}

// appendComment appends a rule comment to user data.
func appendComment(udata []byte, comment string) []byte {
	return userdata.AppendString(udata, userdata.TypeComment, comment)
}
