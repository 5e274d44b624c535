package iptables

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"
)

// HashLength is the length of the rule hash that follows the hash prefix in
// every rule comment the Table writes: 16 base64url characters (96 bits of
// SHA-256).
const HashLength = 16

// hashBytes is how many bytes of the digest the hash keeps.
const hashBytes = HashLength * 6 / 8

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
	appendHash(out[:0], nil, chain, salt, index, body)
	return string(out[:])
}

// appendHash appends the hash of a rule (see ruleHash) to dst, using
// scratch as working space; it returns dst and the grown scratch.
func appendHash(dst, scratch []byte, chain, salt string, index int, body string) ([]byte, []byte) {
	b := append(scratch[:0], chain...)
	b = append(b, 0)
	b = append(b, salt...)
	b = append(b, 0)
	b = strconv.AppendInt(b, int64(index), 10)
	b = append(b, 0)
	b = append(b, body...)
	sum := sha256.Sum256(b)
	n := len(dst)
	dst = append(dst, make([]byte, HashLength)...)
	base64.RawURLEncoding.Encode(dst[n:], sum[:hashBytes])
	return dst, b
}

// chainHashes returns the hashes of rules, in order, concatenated: hash i
// is hashes[i*HashLength:(i+1)*HashLength].
func chainHashes(chain, salt string, rules []renderedRule) string {
	out := make([]byte, 0, len(rules)*HashLength)
	var scratch []byte
	for i, r := range rules {
		out, scratch = appendHash(out, scratch, chain, salt, i, r.body)
	}
	return string(out)
}

// renderedRule is a rule's arguments in restore-input form.
type renderedRule struct {
	// body is the arguments, quoted where needed and joined by spaces.
	body string
	// cut is the length of the leading header criteria (-s, -d, -i, -o,
	// -p, -f) in body: the hash comment goes there, where iptables-save
	// prints the first match, so the line we write is the line it prints.
	cut int
}

// withHash returns the rule's arguments with our hash comment.
func (r renderedRule) withHash(prefix, hash string) string {
	c := hashComment(prefix, hash)
	switch {
	case r.cut == 0:
		return c + " " + r.body
	case r.cut >= len(r.body):
		return r.body + " " + c
	}
	return r.body[:r.cut] + " " + c + r.body[r.cut:]
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

// isHeaderOption reports whether a is one of the criteria iptables keeps
// in the rule's IP header part and iptables-save prints before every match.
func isHeaderOption(a string) bool {
	switch a {
	case "-s", "--source", "--src", "-d", "--destination", "--dst",
		"-i", "--in-interface", "-o", "--out-interface",
		"-p", "--protocol", "-f", "--fragment":
		return true
	}
	return false
}

// headerArgs returns how many leading arguments are header criteria.
func headerArgs(args []string) int {
	i := 0
	for i < len(args) {
		j := i
		if args[j] == "!" {
			j++
		}
		if j >= len(args) || !isHeaderOption(args[j]) {
			break
		}
		if args[j] == "-f" || args[j] == "--fragment" {
			i = j + 1
		} else {
			i = j + 2
		}
	}
	return min(i, len(args))
}

// renderArgs joins rule arguments into restore-input form, quoting those
// that need it.
func renderArgs(args []string) renderedRule {
	n := 0
	for _, a := range args {
		n += len(a) + 3
	}
	h := headerArgs(args)
	var b strings.Builder
	b.Grow(n)
	cut := 0
	for i, a := range args {
		if i == h {
			cut = b.Len()
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		writeQuoted(&b, a)
	}
	if h == len(args) {
		cut = b.Len()
	}
	return renderedRule{body: b.String(), cut: cut}
}

// writeQuoted writes arg as one iptables-restore token: as is when it has
// no blank, quote or backslash, else in double quotes with quotes and
// backslashes escaped (iptables-restore reads backslash escapes only inside
// quotes).
func writeQuoted(b *strings.Builder, arg string) {
	if arg != "" && !strings.ContainsAny(arg, " \t\"\\'") {
		b.WriteString(arg)
		return
	}
	b.WriteByte('"')
	for i := 0; i < len(arg); i++ {
		if c := arg[i]; c == '"' || c == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(arg[i])
	}
	b.WriteByte('"')
}

// hashComment returns the match arguments that carry hash, in restore
// form: -m comment --comment "<prefix><hash>".
func hashComment(prefix, hash string) string {
	return `-m comment --comment "` + prefix + hash + `"`
}

// isHashChar reports whether c can appear in a hash (base64url).
func isHashChar(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}
