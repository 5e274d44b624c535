package nfmigrate

import (
	"strconv"

	"github.com/nodeplane/nodeplane/internal/textform"
)

// String returns the backend's name: "iptables-legacy", "iptables-nft" or
// "nftables" (and "Backend(n)" for another value).
func (b Backend) String() string {
	switch b {
	case IPTablesLegacy:
		return "iptables-legacy"
	case IPTablesNFT:
		return "iptables-nft"
	case NFTables:
		return "nftables"
	}
	return "Backend(" + strconv.Itoa(int(b)) + ")"
}

// MarshalText returns String's text (encoding.TextMarshaler).
func (b Backend) MarshalText() ([]byte, error) { return []byte(b.String()), nil }

// UnmarshalText sets b to the backend whose String is text
// (encoding.TextUnmarshaler). Any other text is an error, and b is left as
// it was.
func (b *Backend) UnmarshalText(text []byte) error {
	v, err := textform.Parse(text, IPTablesLegacy, IPTablesNFT, NFTables)
	if err == nil {
		*b = v
	}
	return err
}
