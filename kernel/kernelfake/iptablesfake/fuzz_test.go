package iptablesfake_test

import (
	"context"
	"strings"
	"testing"

	"github.com/nodeplane/nodeplane/kernel/kernelfake/iptablesfake"
)

// FuzzRestore feeds arbitrary input to the fake restore and commands: it
// must answer with output or an error, never panic, and a save afterwards
// must still work.
func FuzzRestore(f *testing.F) {
	f.Add("*filter\n:np-a - [0:0]\n-A np-a -s 10.0.0.1 -p tcp --dport 80 -j ACCEPT\n-I INPUT 1 -j np-a\nCOMMIT\n", "-R INPUT 1 -j DROP")
	f.Add("*nat\n-A POSTROUTING -j MASQUERADE --random-fully\n-D POSTROUTING 1\n-X\nCOMMIT\n", "-E np-a np-b")
	f.Add("*filter\n-A INPUT ! -s 1.2.3.4/8 -m comment --comment \"a\\\"b\" -g x\nCOMMIT", "! -p")
	f.Fuzz(func(t *testing.T, input, command string) {
		k := iptablesfake.New()
		ctx := context.Background()
		_, _ = k.Run(ctx, strings.NewReader(input), "iptables-nft-restore", "--noflush")
		_, _ = k.Run(ctx, strings.NewReader(input), "ip6tables-legacy-restore")
		_, _ = k.Run(ctx, nil, "iptables-nft", strings.Fields(command)...)
		if _, err := k.Run(ctx, nil, "iptables-nft-save"); err != nil {
			t.Fatalf("save after fuzzed input: %v", err)
		}
	})
}
