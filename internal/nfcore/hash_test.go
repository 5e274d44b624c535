package nfcore

import (
	"crypto/sha256"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestHash(t *testing.T) {
	sum := sha256.Sum256([]byte("rule"))
	h := HashString(sum[:])
	assert.Len(t, h, HashLength)
	for i := range len(h) {
		assert.True(t, IsHashChar(h[i]), "%q", h[i])
	}
	assert.NotEqual(t, h, HashString(func() []byte { s := sha256.Sum256([]byte("rule2")); return s[:] }()))
	for _, c := range " \"'+/=:.\x00\xff" {
		assert.False(t, IsHashChar(byte(c)), "%q", c)
	}

	for _, c := range []struct {
		comment, hash, rest string
		ok                  bool
	}{
		{"np:" + h, h, "", true},
		{"np:" + h + " svc default/web", h, "svc default/web", true},
		{"np:" + h + "x", "", "", false},                           // longer hash
		{"np:" + h[:15], "", "", false},                            // shorter
		{"np:" + strings.Replace(h, h[:1], "+", 1), "", "", false}, // not base64url
		{"xx:" + h, "", "", false},                                 // another prefix
		{h, "", "", false},
		{"", "", "", false},
	} {
		hash, rest, ok := CommentHash(c.comment, "np:")
		assert.Equal(t, c.ok, ok, "%q", c.comment)
		assert.Equal(t, c.hash, hash, "%q", c.comment)
		assert.Equal(t, c.rest, rest, "%q", c.comment)
		bh, brest, bok := CommentHash([]byte(c.comment), "np:")
		assert.Equal(t, c.ok, bok)
		assert.Equal(t, c.hash, string(bh))
		assert.Equal(t, c.rest, string(brest))
	}
}
