package ipsets

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/nodeplane/nodeplane/command"
)

// header is what the driver compares of a kernel set: the parts it sets.
type header struct {
	typ     SetType // possibly a type the package does not support
	family  Family  // zero for bitmap:port or an unknown family
	maxSize int     // maxelem of a hash set
	rng     PortRange
	// extra is set when the kernel set has options the driver never sets
	// (timeout, counters, comment, …): such a set is replaced.
	extra bool
}

// headerOf returns the header the driver creates for meta (normalized).
func headerOf(meta *SetMetadata) header {
	if meta.Type.hasFamily() {
		return header{typ: meta.Type, family: meta.Family, maxSize: meta.MaxSize}
	}
	return header{typ: meta.Type, rng: meta.Range}
}

// swappable reports whether the kernel can swap a set of header k with one
// of header w: the type and family must match.
func swappable(k, w header) bool { return k.typ == w.typ && k.family == w.family }

// appendCreate appends the create line for kname with header h.
func appendCreate(b []byte, kname string, h header, exist bool) []byte {
	b = append(b, "create "...)
	b = append(b, kname...)
	b = append(b, ' ')
	b = append(b, h.typ...)
	if h.typ.hasFamily() {
		b = append(b, " family "...)
		b = append(b, FamilyName(h.family)...)
		b = append(b, " maxelem "...)
		b = strconv.AppendInt(b, int64(h.maxSize), 10)
	} else {
		b = append(b, " range "...)
		b = append(b, h.rng.String()...)
	}
	if exist {
		b = append(b, " -exist"...)
	}
	return append(b, '\n')
}

// parseHeader parses the fields after "create NAME" of a save line.
func parseHeader(fields [][]byte) header {
	var h header
	if len(fields) == 0 {
		h.extra = true
		return h
	}
	h.typ = SetType(fields[0])
	if h.typ.hasFamily() {
		h.maxSize = 65536 // the kernel's default, shown unless set
	}
	for i := 1; i < len(fields); i++ {
		key := string(fields[i])
		var val string
		hasVal := false
		switch key {
		case "family", "hashsize", "maxelem", "bucketsize", "initval", "range", "timeout", "netmask", "bitmask", "markmask":
			if i+1 < len(fields) {
				val, hasVal = string(fields[i+1]), true
				i++
			}
		}
		switch key {
		case "hashsize", "bucketsize", "initval":
			// Chosen and grown by the kernel.
		case "family":
			switch val {
			case "inet":
				h.family = IPv4
			case "inet6":
				h.family = IPv6
			default:
				h.extra = true
			}
		case "maxelem":
			n, err := strconv.Atoi(val)
			if err != nil || !hasVal {
				h.extra = true
			}
			h.maxSize = n
		case "range":
			r, ok := parseRange(val)
			if !ok {
				h.extra = true
			}
			h.rng = r
		default:
			h.extra = true
		}
	}
	return h
}

func parseRange(s string) (PortRange, bool) {
	i := strings.IndexByte(s, '-')
	if i < 0 {
		return PortRange{}, false
	}
	a, ok1 := parsePort(s[:i])
	b, ok2 := parsePort(s[i+1:])
	return PortRange{a, b}, ok1 && ok2 && a <= b
}

// run runs the ipset binary.
func (s *IPSets) run(ctx context.Context, stdin io.Reader, args ...string) ([]byte, error) {
	return s.runner.Run(ctx, stdin, "ipset", args...)
}

// stderrOf returns the standard error of a failed command when the runner
// kept it, else the error's text (which, for the runners nodeplane ships,
// quotes it).
func stderrOf(err error) string {
	var ce *command.Error
	if errors.As(err, &ce) {
		return string(ce.Stderr)
	}
	return err.Error()
}

// Substrings of ipset's messages the driver acts on.
const (
	msgNotExist = "does not exist"
	msgInUse    = "in use by a kernel component"
)

func isNotExist(err error) bool { return strings.Contains(stderrOf(err), msgNotExist) }
func isInUse(err error) bool    { return strings.Contains(stderrOf(err), msgInUse) }

// lines calls fn for each line of out, without its newline.
func lines(out []byte, fn func(line []byte) error) error {
	for line := range bytes.Lines(out) {
		if err := fn(bytes.TrimSuffix(line, []byte{'\n'})); err != nil {
			return err
		}
	}
	return nil
}

// nextField returns the first space-separated field of b and the rest.
func nextField(b []byte) (field, rest []byte) {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\r') {
		b = b[1:]
	}
	i := 0
	for i < len(b) && b[i] != ' ' && b[i] != '\t' && b[i] != '\r' {
		i++
	}
	return b[:i], b[i:]
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
	var meta *SetMetadata
	set := s.entry(kname)
	var foreign []string
	dump := func(add func(Member)) error {
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
				if hh.typ.Valid() && !hh.extra && (hh.family != 0) == hh.typ.hasFamily() {
					meta = &SetMetadata{Type: hh.typ, Family: hh.family, Range: hh.rng}
					if !hh.typ.hasFamily() {
						meta.Family = s.family
					}
				}
			case "add":
				raw, _ := nextField(rest)
				if h == nil || len(raw) == 0 {
					return fmt.Errorf("%w: save %s: %q", ErrParse, kname, line)
				}
				if meta != nil {
					if m, ok := parseMember(meta.Type, raw); ok && check(meta, m) == nil {
						add(m)
						return nil
					}
				}
				foreign = append(foreign, string(raw))
			}
			return nil
		})
	}
	var notify func(Member, bool)
	if report && s.onChange != nil {
		notify = func(m Member, added bool) { s.notify(set.name, m, added) }
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
func (s *IPSets) resyncAll(ctx context.Context, now time.Time) error {
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
		if err := s.read(ctx, kname, now, false); err != nil {
			return err
		}
	}
	s.recheck = s.recheck[:0]
	clear(s.queued)
	return nil
}

// resyncNames lists the kernel's owned sets, records missing and leftover
// ones, and queues every owned set in the kernel for a member recheck.
func (s *IPSets) resyncNames(ctx context.Context, now time.Time) error {
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
			if err := s.read(ctx, kname, now, false); err != nil {
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
func (s *IPSets) recheckSome(ctx context.Context, now time.Time) error {
	if len(s.recheck) == 0 {
		return nil
	}
	start := s.clk.Now()
	for len(s.recheck) > 0 {
		kname := s.recheck[0]
		s.recheck = s.recheck[1:]
		delete(s.queued, kname)
		if set := s.sets[kname]; set != nil && set.kernel != nil {
			if err := s.read(ctx, kname, now, false); err != nil {
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
