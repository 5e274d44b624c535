package ipsetsfake

import (
	"encoding/json"

	"github.com/nodeplane/nodeplane/internal/textform"
)

// MarshalJSON encodes c as encoding/json does, but with Err as its text
// (null when nil), which it would write as {}.
func (c Call) MarshalJSON() ([]byte, error) {
	type plain Call
	return json.Marshal(struct {
		plain
		Err *string
	}{plain(c), textform.Error(c.Err)})
}
