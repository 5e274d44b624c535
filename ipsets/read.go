package ipsets

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nodeplane/nodeplane/netfilter"
)

// This file reads the kernel's sets: the full re-read at start and after
// a failure, the listing of set names a periodic resync starts with, and
// the member rechecks it queues, a budget's worth per Apply.

// sync re-reads the kernel as far as needed.
func (s *IPSets) sync(ctx context.Context) error {
	switch {
	case s.fullResync:
		if err := s.resyncAll(ctx); err != nil {
			return err
		}
		s.fullResync, s.namesResync = false, false
	case s.namesResync:
		if err := s.resyncNames(ctx); err != nil {
			return err
		}
		s.namesResync = false
	}
	if err := s.recheckSome(ctx); err != nil {
		return err
	}
	for kname, set := range s.sets {
		if set.unread && !s.ledger.Waiting(kname) {
			if err := s.read(ctx, kname, false); err != nil {
				return err
			}
		}
	}
	return nil
}

// read re-reads kname (see readSet). A failure of that set alone — ipset
// refused to save it, or its output could not be parsed — is recorded on
// the set, which is neither written nor destroyed until it has been read;
// it is tried again after its backoff. Other failures are returned.
func (s *IPSets) read(ctx context.Context, kname string, report bool) error {
	if set := s.sets[kname]; set != nil && set.unread && s.ledger.Waiting(kname) {
		return nil
	}
	err := s.readSet(ctx, kname, report)
	if err == nil {
		if set := s.sets[kname]; set != nil && set.unread {
			set.unread = false
			s.ledger.Forget(kname)
		}
		return nil
	}
	reason := ErrParse
	switch {
	case errors.Is(err, ErrParse):
	case refused(err):
		reason = ErrCommand
	default:
		return err
	}
	s.entry(kname).unread = true
	s.failed(kname, opRead, reason, strings.TrimPrefix(err.Error(), reason.Error()+": "), err)
	return nil
}

// listNames returns the owned kernel set names (`ipset list -name`).
func (s *IPSets) listNames(ctx context.Context) (map[string]struct{}, error) {
	out, err := s.run(ctx, nil, "list", "-name")
	if err != nil {
		return nil, fmt.Errorf("%w: list -name: %w", ErrCommand, err)
	}
	names := map[string]struct{}{}
	_ = lines(out, func(line []byte) error {
		name := string(bytes.TrimSpace(line))
		if s.owned(name) {
			names[name] = struct{}{}
		}
		return nil
	})
	return names, nil
}

// readSet re-reads one owned set (`ipset save NAME`) into its entry: the
// header, and the members into the dataplane view. A set the kernel does
// not have is recorded as missing. With report, the members the kernel
// gained or lost since the last view are reported to OnMemberChange.
func (s *IPSets) readSet(ctx context.Context, kname string, report bool) error {
	out, err := s.run(ctx, nil, "save", kname)
	if err != nil {
		if isNotExist(err) {
			s.markMissing(kname, report)
			return nil
		}
		return fmt.Errorf("%w: save %s: %w", ErrCommand, kname, err)
	}
	var h *header
	// meta is what a member must fit to be tracked; nil when the set's
	// header is one the driver never creates, so every member is foreign.
	var meta *netfilter.SetMetadata
	set := s.entry(kname)
	var foreign []string
	dump := func(add func(netfilter.Member)) error {
		return lines(out, func(line []byte) error {
			verb, rest := nextField(line)
			name, rest := nextField(rest)
			if string(name) != kname {
				return nil
			}
			switch string(verb) {
			case "create":
				hh := parseHeader(bytes.Fields(rest))
				h, meta = &hh, nil
				if hh.typ.Valid() && !hh.extra && (hh.family != 0) == hh.typ.HasFamily() {
					meta = &netfilter.SetMetadata{Type: hh.typ, Family: hh.family, Range: hh.rng}
					if !hh.typ.HasFamily() {
						meta.Family = s.family
					}
				}
			case "add":
				raw, _ := nextField(rest)
				if h == nil || len(raw) == 0 {
					return fmt.Errorf("%w: save %s: %q", ErrParse, kname, line)
				}
				if meta != nil {
					if m, ok := netfilter.ParseMemberText(meta, raw); ok {
						add(m)
						return nil
					}
				}
				foreign = append(foreign, string(raw))
			}
			return nil
		})
	}
	var notify func(netfilter.Member, bool)
	if report && s.onChange != nil {
		notify = func(m netfilter.Member, added bool) { s.notify(set.name, m, added) }
	}
	if err := set.members.replaceKernel(dump, notify); err != nil {
		return err
	}
	if h == nil {
		return fmt.Errorf("%w: save %s: no create line", ErrParse, kname)
	}
	set.kernel, set.foreign = h, foreign
	return nil
}

// markMissing records that the kernel does not have kname, reporting its
// members as removed with report.
func (s *IPSets) markMissing(kname string, report bool) {
	set := s.sets[kname]
	if set == nil {
		return
	}
	if report {
		for m := range set.members.kernel() {
			s.notify(set.name, m, false)
		}
	}
	set.kernel, set.foreign = nil, nil
	set.members.clearKernel()
	if !set.wanted {
		delete(s.sets, kname)
		s.ledger.Forget(kname)
	}
}

// referenced returns the kernel's reference count of kname (`ipset list
// -t NAME`).
func (s *IPSets) referenced(ctx context.Context, kname string) (int, error) {
	out, err := s.run(ctx, nil, "list", "-t", kname)
	if err != nil {
		if isNotExist(err) {
			return 0, nil
		}
		return 0, fmt.Errorf("%w: list -t %s: %w", ErrCommand, kname, err)
	}
	refs := -1
	_ = lines(out, func(line []byte) error {
		if v, ok := bytes.CutPrefix(line, []byte("References:")); ok {
			if n, err := strconv.Atoi(string(bytes.TrimSpace(v))); err == nil {
				refs = n
			}
		}
		return nil
	})
	if refs < 0 {
		return 0, fmt.Errorf("%w: list -t %s: no References line", ErrParse, kname)
	}
	return refs, nil
}

// resyncAll re-reads every owned set.
func (s *IPSets) resyncAll(ctx context.Context) error {
	names, err := s.listNames(ctx)
	if err != nil {
		return err
	}
	for kname := range s.sets {
		if _, ok := names[kname]; !ok {
			s.markMissing(kname, false)
		}
	}
	for kname := range names {
		if err := s.read(ctx, kname, false); err != nil {
			return err
		}
	}
	s.recheck = s.recheck[:0]
	clear(s.queued)
	return nil
}

// resyncNames lists the kernel's owned sets, records missing and leftover
// ones, and queues every owned set in the kernel for a member recheck.
func (s *IPSets) resyncNames(ctx context.Context) error {
	names, err := s.listNames(ctx)
	if err != nil {
		return err
	}
	for kname, set := range s.sets {
		if _, ok := names[kname]; !ok && set.kernel != nil {
			s.log.Warn("ipsets: set missing from the kernel; recreating it", "set", kname)
			s.markMissing(kname, false)
		}
	}
	for kname := range names {
		set := s.entry(kname)
		if set.kernel == nil {
			// A leftover we did not know: read it now, so that it is
			// destroyed (or adopted) in this pass.
			if err := s.read(ctx, kname, false); err != nil {
				return err
			}
			continue
		}
		s.queue(kname)
	}
	return nil
}

func (s *IPSets) queue(kname string) {
	if _, ok := s.queued[kname]; ok {
		return
	}
	s.queued[kname] = struct{}{}
	s.recheck = append(s.recheck, kname)
}

// recheckSome re-reads queued sets until the budget is spent (at least
// one).
func (s *IPSets) recheckSome(ctx context.Context) error {
	if len(s.recheck) == 0 {
		return nil
	}
	start := s.clk.Now()
	for len(s.recheck) > 0 {
		kname := s.recheck[0]
		s.recheck = s.recheck[1:]
		delete(s.queued, kname)
		if set := s.sets[kname]; set != nil && set.kernel != nil {
			if err := s.read(ctx, kname, false); err != nil {
				return err
			}
		}
		if s.clk.Since(start) >= s.budget {
			break
		}
	}
	if len(s.recheck) == 0 {
		s.recheck = nil
	}
	return nil
}
