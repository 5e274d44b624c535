package wireguard

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strings"

	"golang.org/x/crypto/curve25519"
)

// KeyLen is the length of a WireGuard key in bytes.
const KeyLen = 32

// PublicKey is a node's WireGuard public key. Its text form is base64, as wg(8)
// prints it; the zero value means "no key".
type PublicKey [KeyLen]byte

// PrivateKey is a WireGuard private key. It never prints: String and LogValue
// return "(redacted)", so a key that reaches a log or an error by mistake
// does not leak. Marshal it explicitly with Base64 (the key file's form).
type PrivateKey [KeyLen]byte

// GeneratePrivateKey returns a new random private key, clamped as Curve25519
// requires.
func GeneratePrivateKey() (PrivateKey, error) {
	var k PrivateKey
	if _, err := rand.Read(k[:]); err != nil {
		return PrivateKey{}, fmt.Errorf("wireguard: generating a key: %w", err)
	}
	k[0] &= 248
	k[31] = (k[31] & 127) | 64
	return k, nil
}

// Public returns the public key that belongs to k.
func (k PrivateKey) Public() PublicKey {
	var p PublicKey
	out, err := curve25519.X25519(k[:], curve25519.Basepoint)
	if err != nil { // only for a low-order result, which a clamped key never gives
		return PublicKey{}
	}
	copy(p[:], out)
	return p
}

// IsZero reports whether k is the zero key (no key).
func (k PrivateKey) IsZero() bool { return k == PrivateKey{} }

// Base64 returns the key in base64, the form of a key file and of `wg genkey`.
// Handle the result as the secret it is.
func (k PrivateKey) Base64() string { return base64.StdEncoding.EncodeToString(k[:]) }

// String returns "(redacted)": a private key is never printed.
func (k PrivateKey) String() string { return "(redacted)" }

// GoString returns "(redacted)", so %#v does not print the key either.
func (k PrivateKey) GoString() string { return "(redacted)" }

// LogValue implements slog.LogValuer: a logged private key is "(redacted)".
func (k PrivateKey) LogValue() slog.Value { return slog.StringValue("(redacted)") }

// Format implements fmt.Formatter: every verb prints "(redacted)".
func (k PrivateKey) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte("(redacted)")) }

// ParsePrivateKey parses a base64 private key (surrounding white space
// allowed, as in a key file). The error wraps ErrInvalidKey and never quotes
// the input.
func ParsePrivateKey(s string) (PrivateKey, error) {
	b, err := parseBase64Key(s)
	if err != nil {
		return PrivateKey{}, err
	}
	return PrivateKey(b), nil
}

// IsZero reports whether k is the zero key (no key).
func (k PublicKey) IsZero() bool { return k == PublicKey{} }

// String returns the key in base64, as wg(8) prints it; the zero key is
// "(none)".
func (k PublicKey) String() string {
	if k.IsZero() {
		return "(none)"
	}
	return base64.StdEncoding.EncodeToString(k[:])
}

// MarshalText implements encoding.TextMarshaler (base64; empty for the zero
// key).
func (k PublicKey) MarshalText() ([]byte, error) {
	if k.IsZero() {
		return []byte{}, nil
	}
	return []byte(base64.StdEncoding.EncodeToString(k[:])), nil
}

// UnmarshalText implements encoding.TextUnmarshaler: base64, or empty for the
// zero key.
func (k *PublicKey) UnmarshalText(b []byte) error {
	if len(strings.TrimSpace(string(b))) == 0 {
		*k = PublicKey{}
		return nil
	}
	p, err := ParsePublicKey(string(b))
	if err != nil {
		return err
	}
	*k = p
	return nil
}

// ParsePublicKey parses a base64 public key, as wg(8) prints it.
func ParsePublicKey(s string) (PublicKey, error) {
	b, err := parseBase64Key(s)
	if err != nil {
		return PublicKey{}, err
	}
	return PublicKey(b), nil
}

func parseBase64Key(s string) ([KeyLen]byte, error) {
	var out [KeyLen]byte
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil || len(b) != KeyLen {
		return out, fmt.Errorf("%w: want %d bytes of base64", ErrInvalidKey, KeyLen)
	}
	copy(out[:], b)
	return out, nil
}

// hexKey and parseHexKey are the UAPI's key form.
func hexKey(k [KeyLen]byte) string { return hex.EncodeToString(k[:]) }

func parseHexKey(s string) ([KeyLen]byte, error) {
	var out [KeyLen]byte
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != KeyLen {
		return out, fmt.Errorf("%w: want %d bytes of hex", ErrInvalidKey, KeyLen)
	}
	copy(out[:], b)
	return out, nil
}
