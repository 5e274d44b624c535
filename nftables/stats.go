package nftables

import "github.com/nodeplane/nodeplane/dataplane"

// Stats implements dataplane.StatsReporter. The objects are the declared
// chains the last Apply programmed (base chains included) and the
// declared sets: Desired counts them, and InKernel those the kernel held
// as the last Apply read or wrote it. Failing counts the objects on the
// Table's dataplane.Ledger, those of the last PartialError (chains, sets
// and elements that failed, wait for their retry, or whose declaration
// cannot be written), and Writes the
// requests of the transactions the kernel committed.
func (t *Table) Stats() dataplane.DriverStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := dataplane.DriverStats{Desired: t.objects.desired, InKernel: t.objects.inKernel, Failing: t.ledger.Len()}
	t.statsMu.Lock()
	st.Writes = uint64(t.stats.Messages)
	t.statsMu.Unlock()
	return st
}

// countObjects counts, for Stats, the objects of the last plan and those
// of them the kernel picture holds. Without a picture (the next Apply
// reads) it keeps the last counts.
func (t *Table) countObjects() {
	if t.kern == nil {
		return
	}
	desired, in := len(t.counted)+len(t.sets), 0
	for name := range t.counted {
		if t.kern.chains[name] != nil {
			in++
		}
	}
	for name := range t.sets {
		if t.kern.sets[name] != nil {
			in++
		}
	}
	t.objects.desired, t.objects.inKernel = desired, in
}
