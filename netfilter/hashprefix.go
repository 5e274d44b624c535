package netfilter

import (
	"fmt"
	"strings"
)

// MaxHashPrefixLength bounds a writer's hash prefix: the start of the
// comment by which a writer recognises its own rules.
const MaxHashPrefixLength = 32

// HashPrefixFor returns the hash prefix a writer derives from its chain
// prefix when it is given none: the chain prefix without a trailing "-",
// then ":" ("np-" gives "np:"). Package iptables and package nftables
// both derive it so, and nfmigrate.RemoveLeftovers finds the rules
// of an iptables Table by it.
func HashPrefixFor(chainPrefix string) string {
	return strings.TrimSuffix(chainPrefix, "-") + ":"
}

// ValidateHashPrefix checks a hash prefix: at most MaxHashPrefixLength
// letters, digits and "_-:.". The error matches ErrInvalidHashPrefix.
func ValidateHashPrefix(p string) error {
	if len(p) > MaxHashPrefixLength {
		return fmt.Errorf("%w: %q longer than %d bytes", ErrInvalidHashPrefix, p, MaxHashPrefixLength)
	}
	for i := 0; i < len(p); i++ {
		if c := p[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == ':' || c == '.') {
			return fmt.Errorf("%w: %q contains %q (want letters, digits and _-:.)", ErrInvalidHashPrefix, p, c)
		}
	}
	return nil
}
