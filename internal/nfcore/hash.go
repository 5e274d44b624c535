package nfcore

import "encoding/base64"

// Both backends own a rule by a comment that starts with their hash prefix
// (netfilter.ValidateHashPrefix) followed by the rule's hash: HashLength
// base64url characters of a SHA-256 digest of what the backend renders.
// A rule without such a comment is foreign and never touched.

// HashLength is the length of a rule hash: 16 base64url characters, 96
// bits of the digest.
const HashLength = 16

// hashBytes is how many bytes of the digest a hash keeps.
const hashBytes = HashLength * 6 / 8

// EncodeHash writes the hash of a digest (at least 12 bytes) to out.
func EncodeHash(out *[HashLength]byte, digest []byte) {
	base64.RawURLEncoding.Encode(out[:], digest[:hashBytes])
}

// HashString returns the hash of a digest (at least 12 bytes).
func HashString(digest []byte) string {
	var out [HashLength]byte
	EncodeHash(&out, digest)
	return string(out[:])
}

// hashChars[c] reports whether c can appear in a hash (base64url).
var hashChars = func() (t [256]bool) {
	for c := range t {
		b := byte(c)
		t[c] = b >= 'A' && b <= 'Z' || b >= 'a' && b <= 'z' || b >= '0' && b <= '9' || b == '-' || b == '_'
	}
	return t
}()

// IsHashChar reports whether c can appear in a hash.
func IsHashChar(c byte) bool { return hashChars[c] }

// CommentHash returns the hash of a rule comment that is ours: prefix, a
// hash, then nothing or a blank and the rest (the rule's own comments,
// which rest returns). ok is false for any other comment.
func CommentHash[T ~string | ~[]byte](comment T, prefix string) (hash, rest T, ok bool) {
	n := len(prefix) + HashLength
	if len(comment) < n || string(comment[:len(prefix)]) != prefix {
		return hash, rest, false
	}
	if len(comment) > n && comment[n] != ' ' {
		return hash, rest, false
	}
	for i := len(prefix); i < n; i++ {
		if !hashChars[comment[i]] {
			return hash, rest, false
		}
	}
	if len(comment) > n {
		rest = comment[n+1:]
	}
	return comment[len(prefix):n], rest, true
}
