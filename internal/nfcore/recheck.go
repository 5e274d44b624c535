package nfcore

import (
	"log/slog"
	"time"
)

// Recheck is the schedule of post-write rechecks of a netfilter table:
// after a write, the table is read again after each of the delays in turn,
// so that another writer that overwrote it (an old agent, a foreign tool)
// is found and repaired. A recheck that finds something to repair starts
// the schedule over (it wrote); one that finds nothing moves to the next
// delay, and after the last one no recheck is due until the next write.
// The zero value has no delays and never rechecks.
type Recheck struct {
	delays []time.Duration
	at     time.Time // zero: none scheduled
	idx    int
}

// NewRecheck returns a schedule with delays (each positive; none turns
// rechecks off). It keeps delays as given.
func NewRecheck(delays []time.Duration) Recheck { return Recheck{delays: delays} }

// Due reports whether a recheck is scheduled at or before now.
func (r *Recheck) Due(now time.Time) bool { return !r.at.IsZero() && !now.Before(r.at) }

// At is when the next recheck is due; zero when none is scheduled.
func (r *Recheck) At() time.Time { return r.at }

// Wrote starts the schedule over after a write that ended at end.
func (r *Recheck) Wrote(end time.Time) {
	r.idx, r.at = 0, time.Time{}
	if len(r.delays) > 0 {
		r.at = end.Add(r.delays[0])
	}
}

// Clean moves to the next delay after a recheck at now that found nothing
// to repair.
func (r *Recheck) Clean(now time.Time) {
	r.idx++
	if r.idx < len(r.delays) {
		r.at = now.Add(r.delays[r.idx])
	} else {
		r.at = time.Time{}
	}
}

// Settle ends an Apply that finished at end: after a write (wrote) the
// schedule starts again (Wrote), and a recheck that found nothing to write
// moves on to its next delay (Clean). A recheck that did write repaired
// another writer's change, which it logs.
func (r *Recheck) Settle(end time.Time, wrote, recheck bool, log *slog.Logger) {
	switch {
	case wrote:
		r.Wrote(end)
		if recheck {
			log.Info("repaired drift found by a post-write recheck")
		}
	case recheck:
		r.Clean(end)
	}
}
