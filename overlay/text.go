package overlay

import (
	"encoding/json"

	"github.com/nodeplane/nodeplane/internal/textform"
)

// MarshalJSON encodes s as encoding/json does, but with LastRejected as
// its text (null for none), which encoding/json would write as {}.
func (s Stats) MarshalJSON() ([]byte, error) {
	type plain Stats
	return json.Marshal(struct {
		plain
		LastRejected *string
	}{plain(s), textform.Error(s.LastRejected)})
}
