// Package clock is the injectable time source used by every nodeplane
// component that waits or schedules: the dataplane loop's throttle, retry
// backoff and refresh tickers, the monitors' resync and flap damping, and the
// drivers' grace periods.
//
// Components take a Clock in their options; nil means Real(). Tests pass a
// *Fake and move time with Advance, so timing behaviour (backoff, grace
// periods, periodic resyncs) is checked deterministically without sleeping.
//
// The package owns no kernel state and starts no goroutines.
package clock
