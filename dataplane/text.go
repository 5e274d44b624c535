package dataplane

import (
	"encoding/json"

	"github.com/nodeplane/nodeplane/internal/textform"
)

// MarshalText returns String's text, such as "tables"
// (encoding.TextMarshaler); an invalid phase gives "Phase(n)", which does
// not unmarshal.
func (p Phase) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText sets p to the phase whose String is text, such as "tables"
// (encoding.TextUnmarshaler). Any other text is an error, and p is left as
// it was.
func (p *Phase) UnmarshalText(text []byte) error {
	v, err := textform.Parse(text, PhaseIPSetsUpdate, PhaseTunnelL2, PhaseTables, PhaseRoutes, PhaseIPSetsDelete)
	if err == nil {
		*p = v
	}
	return err
}

// MarshalText returns String's text: "succeeded", "partial" or "failed"
// (encoding.TextMarshaler); the zero Outcome gives "unknown", which does not
// unmarshal.
func (o Outcome) MarshalText() ([]byte, error) { return []byte(o.String()), nil }

// UnmarshalText sets o to the outcome whose String is text: "succeeded",
// "partial" or "failed" (encoding.TextUnmarshaler). Any other text is an
// error, and o is left as it was.
func (o *Outcome) UnmarshalText(text []byte) error {
	v, err := textform.Parse(text, OutcomeSucceeded, OutcomePartial, OutcomeFailed)
	if err == nil {
		*o = v
	}
	return err
}

// MarshalText returns String's text: "periodic", "failure" or "activated"
// (encoding.TextMarshaler); the zero ResyncReason gives "unknown", which does
// not unmarshal.
func (r ResyncReason) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText sets r to the reason whose String is text: "periodic",
// "failure" or "activated" (encoding.TextUnmarshaler). Any other text is an
// error, and r is left as it was.
func (r *ResyncReason) UnmarshalText(text []byte) error {
	v, err := textform.Parse(text, ResyncPeriodic, ResyncAfterFailure, ResyncActivated)
	if err == nil {
		*r = v
	}
	return err
}

// MarshalJSON encodes h as encoding/json does, but with LastError as its
// text (null when nil), which it would write as {}.
func (h Health) MarshalJSON() ([]byte, error) {
	type plain Health
	return json.Marshal(struct {
		plain
		LastError *string
	}{plain(h), textform.Error(h.LastError)})
}

// MarshalJSON encodes a as encoding/json does, but with Err as its text
// (null when nil), which it would write as {}.
func (a DriverApply) MarshalJSON() ([]byte, error) {
	type plain DriverApply
	return json.Marshal(struct {
		plain
		Err *string
	}{plain(a), textform.Error(a.Err)})
}

// MarshalJSON encodes w as encoding/json does, but with Err as its text
// (null when nil), which it would write as {}.
func (w ManagerWork) MarshalJSON() ([]byte, error) {
	type plain ManagerWork
	return json.Marshal(struct {
		plain
		Err *string
	}{plain(w), textform.Error(w.Err)})
}

// MarshalJSON encodes r as encoding/json does, but with Err as its text
// (null when nil), which it would write as {}.
func (r Retry) MarshalJSON() ([]byte, error) {
	type plain Retry
	return json.Marshal(struct {
		plain
		Err *string
	}{plain(r), textform.Error(r.Err)})
}
