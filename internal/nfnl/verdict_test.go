package nfnl

import "testing"

func TestVerdictString(t *testing.T) {
	for _, c := range []struct {
		v    Verdict
		want string
	}{
		{Verdict{Code: VerdictAccept}, "accept"},
		{Verdict{Code: VerdictDrop}, "drop"},
		{Verdict{Code: VerdictReturn}, "return"},
		{Verdict{Code: VerdictJump, Chain: "svc-a"}, "jump svc-a"},
		{Verdict{Code: VerdictGoto, Chain: "svc-b"}, "goto svc-b"},
		{Verdict{Code: 77}, "verdict 77"},
	} {
		if got := c.v.String(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.v, got, c.want)
		}
	}
}
