package iptables

import (
	"bytes"
	"crypto/sha256"
	"strconv"
	"strings"

	"github.com/nodeplane/nodeplane/internal/nfcore"
)

// HashLength is the length of the rule hash that follows the hash prefix in
// every rule comment the Table writes: 16 base64url characters (96 bits of
// SHA-256). It is the hash length of both netfilter backends.
const HashLength = nfcore.HashLength

// Salts separate the hash chains of the two groups of rules a Table keeps
// in a built-in chain; owned chains use no salt.
const (
	saltNone   = ""
	saltInsert = "insert"
	saltAppend = "append"
)

// ruleHash returns the hash of the rule whose rendered arguments are body,
// at 0-based position index of its group (salt) in chain. The hash depends
// on the chain, the group, the position and the rule, so a rule that
// changes or moves gets a new hash and is rewritten, while the rules around
// a changed one keep theirs (and their packet counters).
func ruleHash(chain, salt string, index int, body string) string {
	var out [HashLength]byte
	var scratch [256]byte
	hashRule(&out, scratch[:0], chain, salt, index, body)
	return string(out[:])
}

// hashRule writes the hash of a rule (see ruleHash) to out, using scratch
// as working space; it returns scratch, grown if it had to be.
func hashRule(out *[HashLength]byte, scratch []byte, chain, salt string, index int, body string) []byte {
	b := append(scratch[:0], chain...)
	b = append(b, 0)
	b = append(b, salt...)
	b = append(b, 0)
	b = strconv.AppendInt(b, int64(index), 10)
	b = append(b, 0)
	b = append(b, body...)
	sum := sha256.Sum256(b)
	nfcore.EncodeHash(out, sum[:])
	return b
}

// chainHashes returns the hashes of rules, in order, concatenated: hash i
// is hashes[i*HashLength:(i+1)*HashLength]. It allocates only the result.
func chainHashes(chain, salt string, rules []renderedRule) string {
	var out strings.Builder
	out.Grow(len(rules) * HashLength)
	var h [HashLength]byte
	var buf [256]byte
	scratch := buf[:0]
	for i, r := range rules {
		scratch = hashRule(&h, scratch, chain, salt, i, r.body)
		out.Write(h[:])
	}
	return out.String()
}

// renderedRule is a rule's arguments in restore-input form.
type renderedRule struct {
	// body is the arguments, quoted where needed and joined by spaces
	// (Rule.appendRestore). It is a substring of the text of its list.
	body string
	// cut is the length of the leading header criteria (-s, -d, -i, -o,
	// -p) in body: the hash comment goes there, where iptables-save
	// prints the first match, so the line we write is the line it prints.
	cut int
}

// withHash returns the rule's arguments with our hash comment.
func (r renderedRule) withHash(prefix, hash string) string {
	var b bytes.Buffer
	b.Grow(len(r.body) + len(prefix) + len(hash) + 26)
	r.writeWithHash(&b, prefix, hash)
	return b.String()
}

// writeWithHash writes the rule's arguments with our hash comment, as
// withHash returns them, without building the string.
func (r renderedRule) writeWithHash(b *bytes.Buffer, prefix, hash string) {
	switch {
	case r.cut == 0:
		writeHashComment(b, prefix, hash)
		b.WriteByte(' ')
		b.WriteString(r.body)
	case r.cut >= len(r.body):
		b.WriteString(r.body)
		b.WriteByte(' ')
		writeHashComment(b, prefix, hash)
	default:
		b.WriteString(r.body[:r.cut])
		b.WriteByte(' ')
		writeHashComment(b, prefix, hash)
		b.WriteString(r.body[r.cut:])
	}
}

func writeHashComment(b *bytes.Buffer, prefix, hash string) {
	b.WriteString(`-m comment --comment "`)
	b.WriteString(prefix)
	b.WriteString(hash)
	b.WriteByte('"')
}
