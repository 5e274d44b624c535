package dataplane

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/nodeplane/nodeplane/clock"
)

// Defaults for the zero fields of Options.
const (
	DefaultQueueSize      = 1000
	DefaultMaxBatch       = 1000
	DefaultCoalesce       = 10 * time.Millisecond
	DefaultThrottleBurst  = 10
	DefaultThrottleRefill = 100 * time.Millisecond
	DefaultBackoffInitial = 100 * time.Millisecond
	DefaultBackoffMax     = 30 * time.Second
	DefaultResyncInterval = 90 * time.Second
	DefaultResyncJitter   = 0.1
	DefaultHealthInterval = 10 * time.Second
)

// Options configures a Loop. The zero value is ready to use: every zero
// field takes the default named after it. For durations, a negative value
// turns the feature off where the field says so.
type Options struct {
	// Logger receives the loop's logs. Nil discards them.
	Logger *slog.Logger
	// Clock is the time source. Nil means clock.Real().
	Clock clock.Clock

	// QueueSize bounds the input queue: Send blocks and TrySend fails while
	// this many messages wait. Zero means DefaultQueueSize.
	QueueSize int
	// MaxBatch is the most messages the loop takes from the queue before it
	// looks at its timers and, when due, applies. Zero means
	// DefaultMaxBatch.
	MaxBatch int
	// Coalesce is how long the loop keeps collecting messages after the
	// first one that made it dirty before it applies, so that a burst costs
	// one pass instead of many. Zero means DefaultCoalesce; negative applies
	// after every batch taken from the queue. Timer-driven passes (retry,
	// RetryAfter, periodic resync) do not wait.
	Coalesce time.Duration
	// Throttle limits how often apply passes run.
	Throttle Throttle
	// Backoff paces retries after a failed pass.
	Backoff Backoff
	// ResyncInterval is how often each driver gets QueueResync and a pass,
	// so that drift made behind the agent's back is repaired. WithResyncInterval
	// overrides it per driver. Zero means DefaultResyncInterval; negative
	// turns periodic resync off.
	ResyncInterval time.Duration
	// ResyncJitter spreads each resync by up to this fraction of the
	// interval either way, so that drivers and nodes do not resync in step.
	// Zero means DefaultResyncJitter; negative means no jitter; it must be
	// below 1.
	ResyncJitter float64
	// Rand draws the jitter. Nil means a generator seeded at random. The
	// loop uses it from its own goroutine only.
	Rand *rand.Rand
	// HealthInterval is how often OnHealth is called even when nothing
	// changed, so that a watchdog can tell a quiet loop from a stuck one.
	// Zero means DefaultHealthInterval; negative means only on changes.
	HealthInterval time.Duration
	// OnHealth, if set, receives the loop's health when Run starts and
	// stops, when an in-sync marker arrives, after every apply pass, when a
	// manager panics, and every HealthInterval. It is called from the loop's
	// goroutine, so it must be quick and must not call Send (TrySend is
	// fine).
	OnHealth func(Health)
	// OnInSync, if set, is called once, from the loop's goroutine, after the
	// first successful apply pass (which comes after both in-sync
	// markers).
	OnInSync func()

	// Inactive starts the loop inactive, as a standby instance that is not
	// the leader: managers get every message and run, but no driver is
	// applied and no manager that writes to the kernel itself (a Resyncer)
	// is called, so nothing is written until Loop.SetActive(true). The
	// zero value starts it active.
	Inactive bool
	// Metrics, if set, receives the loop's measurements (see Metrics).
	// Nil records nothing.
	Metrics Metrics
}

// Throttle is a token bucket on apply passes: it holds up to Burst passes
// and earns one back every Refill. The bucket starts full.
type Throttle struct {
	// Burst is the bucket's size. Zero means DefaultThrottleBurst.
	Burst int
	// Refill is the time to earn one pass back. Zero means
	// DefaultThrottleRefill; negative turns throttling off.
	Refill time.Duration
}

// Backoff paces the retries of a driver or manager that failed: its k-th
// consecutive failure waits Initial·2^(k-1), capped at Max. A failed driver
// is skipped until its wait is over; everything else is applied as usual.
// Its next success resets it.
type Backoff struct {
	// Initial is the wait after the first failure. Zero means
	// DefaultBackoffInitial.
	Initial time.Duration
	// Max caps the wait. Zero means DefaultBackoffMax. It must not be below
	// Initial.
	Max time.Duration
}

// withDefaults validates o and fills in its zero fields.
func (o Options) withDefaults() (Options, error) {
	bad := func(format string, args ...any) (Options, error) {
		return o, fmt.Errorf("%w: %s", ErrInvalidOptions, fmt.Sprintf(format, args...))
	}
	switch {
	case o.QueueSize < 0:
		return bad("QueueSize %d is negative", o.QueueSize)
	case o.MaxBatch < 0:
		return bad("MaxBatch %d is negative", o.MaxBatch)
	case o.Throttle.Burst < 0:
		return bad("Throttle.Burst %d is negative", o.Throttle.Burst)
	case o.Backoff.Initial < 0:
		return bad("Backoff.Initial %v is negative", o.Backoff.Initial)
	case o.Backoff.Max < 0:
		return bad("Backoff.Max %v is negative", o.Backoff.Max)
	case o.ResyncJitter >= 1:
		return bad("ResyncJitter %v is not below 1", o.ResyncJitter)
	case o.ResyncJitter != o.ResyncJitter: // NaN
		return bad("ResyncJitter is NaN")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.Clock = clock.OrReal(o.Clock)
	if o.QueueSize == 0 {
		o.QueueSize = DefaultQueueSize
	}
	if o.MaxBatch == 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	if o.Coalesce == 0 {
		o.Coalesce = DefaultCoalesce
	}
	if o.Throttle.Burst == 0 {
		o.Throttle.Burst = DefaultThrottleBurst
	}
	if o.Throttle.Refill == 0 {
		o.Throttle.Refill = DefaultThrottleRefill
	}
	if o.Backoff.Initial == 0 {
		o.Backoff.Initial = DefaultBackoffInitial
	}
	if o.Backoff.Max == 0 {
		o.Backoff.Max = max(DefaultBackoffMax, o.Backoff.Initial)
	}
	if o.Backoff.Max < o.Backoff.Initial {
		return bad("Backoff.Max %v is below Backoff.Initial %v", o.Backoff.Max, o.Backoff.Initial)
	}
	if o.ResyncInterval == 0 {
		o.ResyncInterval = DefaultResyncInterval
	}
	if o.ResyncJitter == 0 {
		o.ResyncJitter = DefaultResyncJitter
	}
	if o.ResyncJitter < 0 {
		o.ResyncJitter = 0
	}
	if o.Rand == nil {
		o.Rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	if o.HealthInterval == 0 {
		o.HealthInterval = DefaultHealthInterval
	}
	return o, nil
}

// DriverOption adjusts how the loop treats one driver; see AddDriver.
type DriverOption func(*driverConfig) error

type driverConfig struct {
	name   string
	resync time.Duration // 0: loop default; <0: never
}

// WithName names the driver in logs and errors, overriding Named and the
// type name. The name must not be empty.
func WithName(name string) DriverOption {
	return func(c *driverConfig) error {
		if name == "" {
			return fmt.Errorf("%w: empty driver name", ErrInvalidOptions)
		}
		c.name = name
		return nil
	}
}

// WithResyncInterval overrides Options.ResyncInterval for one driver. Zero
// means the loop's interval; negative turns periodic resync off for this
// driver.
func WithResyncInterval(d time.Duration) DriverOption {
	return func(c *driverConfig) error {
		c.resync = d
		return nil
	}
}
