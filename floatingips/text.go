package floatingips

import (
	"github.com/nodeplane/nodeplane/internal/managerutil"
	"github.com/nodeplane/nodeplane/internal/textform"
)

// String returns "insert", "append" or "none", the names of JumpInsert,
// JumpAppend and JumpNone.
func (j Jump) String() string { return managerutil.PlacementString(j) }

// MarshalText returns String's text (encoding.TextMarshaler).
func (j Jump) MarshalText() ([]byte, error) { return []byte(j.String()), nil }

// UnmarshalText sets j to the jump whose String is text: "insert", "append"
// or "none" (encoding.TextUnmarshaler). Any other text is an error, and j is
// left as it was.
func (j *Jump) UnmarshalText(text []byte) error {
	v, err := textform.Parse(text, JumpInsert, JumpAppend, JumpNone)
	if err == nil {
		*j = v
	}
	return err
}
