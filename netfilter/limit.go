package netfilter

import (
	"fmt"
	"time"

	"github.com/nodeplane/nodeplane/internal/textform"
)

// LimitUnit is the period a MatchLimit's rate counts packets over.
type LimitUnit uint8

// The periods every backend takes. The zero value is invalid.
const (
	PerSecond LimitUnit = iota + 1
	PerMinute
	PerHour
)

// String returns "second", "minute" or "hour", the words iptables and nft
// write after a rate.
func (u LimitUnit) String() string {
	switch u {
	case PerSecond:
		return "second"
	case PerMinute:
		return "minute"
	case PerHour:
		return "hour"
	}
	return fmt.Sprintf("LimitUnit(%d)", uint8(u))
}

// Duration is the length of the period.
func (u LimitUnit) Duration() time.Duration {
	switch u {
	case PerSecond:
		return time.Second
	case PerMinute:
		return time.Minute
	case PerHour:
		return time.Hour
	}
	return 0
}

// Limits of a MatchLimit that hold on every backend (iptables' limit
// module is the narrower one).
const (
	// MaxLimitRatePerSecond is the fastest rate, in packets per second.
	MaxLimitRatePerSecond = 10000
	// MaxLimitBurst is the largest burst.
	MaxLimitBurst = 10000
	// DefaultLimitBurst is the burst of a MatchLimit whose Burst is 0.
	DefaultLimitBurst = 5
)

// MatchLimit matches packets while a token bucket holds a token: the
// bucket starts with Burst tokens, each matching packet takes one, and
// Rate tokens come back per Per period, up to Burst. Packets over the
// limit do not match. It is how a rule that logs is kept from flooding
// the log: put the criterion last, after the ones that pick the packets,
// so that only those take tokens. Each rule has its own bucket, shared by
// every packet that reaches it; rewriting the rule starts it full again.
//
// Rate is 1 to MaxLimitRatePerSecond per second (or the same rate per
// minute or hour); Burst is 0 (DefaultLimitBurst) to MaxLimitBurst.
// Negate would match the packets over the limit, which iptables' limit
// module cannot say: Validate refuses it, so that both backends give a
// packet the same verdict. A rule holds at most one.
type MatchLimit struct {
	// Rate is the number of packets per Per period in the long run.
	Rate uint32
	// Per is the period; the zero value is invalid.
	Per LimitUnit
	// Burst is the most packets matched at once; 0 means
	// DefaultLimitBurst.
	Burst uint32
	// Negate is refused by Validate (see above).
	Negate bool
}

// Limit matches at most rate packets per period, in bursts of up to burst
// (0: DefaultLimitBurst).
func Limit(rate uint32, per LimitUnit, burst uint32) Match {
	return MatchLimit{Rate: rate, Per: per, Burst: burst}
}

// EffectiveBurst is Burst, or DefaultLimitBurst when it is 0.
func (m MatchLimit) EffectiveBurst() uint32 {
	if m.Burst == 0 {
		return DefaultLimitBurst
	}
	return m.Burst
}

// validate checks the criterion against the limits of every backend.
func (m MatchLimit) validate() error {
	if m.Negate {
		return errRulef("a negated limit match (iptables' limit module cannot match the packets over a limit)")
	}
	d := m.Per.Duration()
	switch {
	case d == 0:
		return errRulef("limit match with %v", m.Per)
	case m.Rate == 0:
		return errRulef("limit match with rate 0 (leave the rule out to match nothing)")
	case uint64(m.Rate)*uint64(time.Second) > MaxLimitRatePerSecond*uint64(d):
		return errRulef("limit match of %d per %s is faster than %d per second", m.Rate, m.Per, MaxLimitRatePerSecond)
	case m.Burst > MaxLimitBurst:
		return errRulef("limit match with burst %d, over %d", m.Burst, MaxLimitBurst)
	}
	return nil
}

func (MatchLimit) match() {}

// MarshalText returns String's text: "second", "minute" or "hour"
// (encoding.TextMarshaler); an invalid unit is an error.
func (u LimitUnit) MarshalText() ([]byte, error) {
	if u.Duration() == 0 {
		return nil, fmt.Errorf("netfilter: %v has no text form", u)
	}
	return []byte(u.String()), nil
}

// UnmarshalText sets u to the unit whose String is text. Any other text
// is an error, and u is left as it was.
func (u *LimitUnit) UnmarshalText(text []byte) error {
	v, err := textform.Parse(text, PerSecond, PerMinute, PerHour)
	if err == nil {
		*u = v
	}
	return err
}
