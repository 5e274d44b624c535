package iptables

import (
	"bytes"
	"fmt"
	"testing"
)

// BenchmarkParseSave measures parsing iptables-save output of 11k rules of
// ours (quoted hash comments) and 10k foreign ones with quoted comments,
// as kube-proxy writes them.
func BenchmarkParseSave(b *testing.B) {
	var out bytes.Buffer
	out.WriteString("*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n")
	for c := range 1000 {
		fmt.Fprintf(&out, ":np-%04d - [0:0]\n:KUBE-SVC-%04d - [0:0]\n", c, c)
	}
	for c := range 1000 {
		fmt.Fprintf(&out, "-A FORWARD -m comment --comment \"np:%016d\" -j np-%04d\n", c, c)
		for j := range 10 {
			fmt.Fprintf(&out, "-A np-%04d -s 10.0.%d.%d/32 -p tcp -m comment --comment \"np:%08d%08d\" -m tcp --dport %d -j ACCEPT\n", c, c%250, j, c, j, 1000+j)
			fmt.Fprintf(&out, "-A KUBE-SVC-%04d -m comment --comment \"default/svc-%d:http cluster IP\" -m tcp -p tcp --dport 80 -j KUBE-SEP-%d\n", c, c, j)
		}
	}
	out.WriteString("COMMIT\n")
	p := &saveParser{table: "filter", chainPrefix: "np-", hashPrefix: "np:"}
	b.SetBytes(int64(out.Len()))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.parse(bytes.NewReader(out.Bytes())); err != nil {
			b.Fatal(err)
		}
	}
}
