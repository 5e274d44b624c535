package iptables

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/nodeplane/nodeplane/ipfamily"
)

// TestParseSetList: the family of each set of `ipset list -t` output, as
// ipset 7.17 prints it: from the header, IPv4 for the bitmap:ip types,
// whose header names none, and none for the others without one.
func TestParseSetList(t *testing.T) {
	out := `Name: s6
Type: hash:net
Revision: 7
Header: family inet6 hashsize 1024 maxelem 65536 bucketsize 12 initval 0x1b12132f
Size in memory: 1240
References: 0
Number of entries: 0

Name: bip
Type: bitmap:ip
Revision: 3
Header: range 10.0.0.0-10.0.0.255
Size in memory: 120
References: 0
Number of entries: 0

Name: bipm
Type: bitmap:ip,mac
Revision: 3
Header: range 10.0.0.0-10.0.0.255
Size in memory: 2160
References: 0
Number of entries: 0

Name: bp
Type: bitmap:port
Revision: 3
Header: range 1-100
Size in memory: 88
References: 0
Number of entries: 0

Name: sp ace
Type: hash:ip
Revision: 6
Header: family inet hashsize 1024 maxelem 65536 bucketsize 12 initval 0x0ea70ad4
Size in memory: 216
References: 2
Number of entries: 0

Name: ls
Type: list:set
Revision: 3
Header: size 8
Size in memory: 80
References: 0
Number of entries: 0
`
	assert.Equal(t, map[string]kernelSet{
		"s6":     {exists: true, family: ipfamily.IPv6},
		"bip":    {exists: true, family: ipfamily.IPv4},
		"bipm":   {exists: true, family: ipfamily.IPv4},
		"bp":     {exists: true},
		"sp ace": {exists: true, family: ipfamily.IPv4},
		"ls":     {exists: true},
	}, parseSetList([]byte(out)))
	assert.Empty(t, parseSetList(nil))
}
