package ipsets

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"github.com/nodeplane/nodeplane/command"
	"github.com/nodeplane/nodeplane/netfilter"
)

// This file is the ipset binary as the driver speaks to it: running it,
// the header lines it writes and reads, the exit statuses and messages it
// acts on, and the error of a failed restore.

// header is what the driver compares of a kernel set: the parts it sets.
type header struct {
	typ     netfilter.SetType // possibly a type the package does not support
	family  Family            // zero for bitmap:port or an unknown family
	maxSize int               // maxelem of a hash set
	rng     netfilter.PortRange
	// extra is set when the kernel set has options the driver never sets
	// (timeout, counters, comment, …): such a set is replaced.
	extra bool
}

// headerOf returns the header the driver creates for meta (normalized).
func headerOf(meta *netfilter.SetMetadata) header {
	if meta.Type.HasFamily() {
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
	if h.typ.HasFamily() {
		b = append(b, " family "...)
		b = append(b, FamilyName(h.family)...)
		b = append(b, " maxelem "...)
		b = strconv.AppendInt(b, int64(h.maxSize), 10)
	} else {
		b = append(b, " range "...)
		b = strconv.AppendUint(b, uint64(h.rng.First), 10)
		b = append(b, '-')
		b = strconv.AppendUint(b, uint64(h.rng.Last), 10)
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
	h.typ = netfilter.SetType(fields[0])
	if h.typ.HasFamily() {
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

func parseRange(s string) (netfilter.PortRange, bool) {
	i := strings.IndexByte(s, '-')
	if i < 0 {
		return netfilter.PortRange{}, false
	}
	a, err1 := strconv.ParseUint(s[:i], 10, 16)
	b, err2 := strconv.ParseUint(s[i+1:], 10, 16)
	return netfilter.Ports(uint16(a), uint16(b)), err1 == nil && err2 == nil && a <= b
}

// run runs the ipset binary.
func (s *IPSets) run(ctx context.Context, stdin io.Reader, args ...string) ([]byte, error) {
	return s.runner.Run(ctx, stdin, "ipset", args...)
}

// Substrings of ipset's messages the driver acts on.
const (
	msgNotExist = "does not exist"
	msgInUse    = "in use by a kernel component"
)

func isNotExist(err error) bool { return strings.Contains(stderrOf(err), msgNotExist) }

func isInUse(err error) bool { return strings.Contains(stderrOf(err), msgInUse) }

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

// ipsetPrefix matches what ipset writes before its message: its version
// and, in a restore, the failing line.
var ipsetPrefix = regexp.MustCompile(`ipset v[0-9.]+: (Error in line \d+: )?`)

// ipsetMessage returns what ipset said (msg), without its version and line
// number (and whatever a runner wrote before them).
func ipsetMessage(msg string) string {
	msg = strings.TrimSpace(msg)
	if loc := ipsetPrefix.FindStringIndex(msg); loc != nil {
		return msg[loc[1]:]
	}
	return msg
}

// stderrOf returns the standard error of a failed command when the runner
// kept it in a *command.Error, else the error's text.
func stderrOf(err error) string {
	var ce *command.Error
	if errors.As(err, &ce) {
		return string(ce.Stderr)
	}
	return err.Error()
}

// refused reports whether err is ipset's own failure exit (1, or 2 for a
// usage error): the binary ran and refused what it was given, rather than
// not running or being killed. The status is the ExitCode of the
// *command.Error in err's tree, which every runner nodeplane ships
// returns; an error without one is not a refusal.
func refused(err error) bool {
	var ce *command.Error
	return errors.As(err, &ce) && (ce.ExitCode == 1 || ce.ExitCode == 2)
}

// errorLine matches the way ipset restore names the failing line.
var errorLine = regexp.MustCompile(`Error in line (\d+):`)

// newRestoreError returns the *command.RestoreError of a restore of
// script that failed with err, having printed out.
func newRestoreError(script, out []byte, err error) *command.RestoreError {
	return command.NewRestoreError([]string{"ipset", "restore"}, script, out, err, errorLine)
}

// restoreError wraps re in ErrRestore.
func restoreError(re *command.RestoreError) error {
	return fmt.Errorf("%w: %w", ErrRestore, re)
}
