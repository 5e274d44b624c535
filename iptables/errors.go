package iptables

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/nodeplane/nodeplane/command"
	"github.com/nodeplane/nodeplane/dataplane"
)

// Sentinel errors. Every error of the package starts with "iptables: "
// once, then says what is wrong; errors.Is matches every sentinel the text
// speaks of. A rule the Table refuses matches the sentinels of package
// netfilter: netfilter.ErrInvalidRule, and netfilter.ErrWrongFamily or
// netfilter.ErrInvalidChainName where that is the cause; a chain name the
// Table refuses matches netfilter.ErrInvalidChainName.
var (
	// ErrInvalidOptions reports an Options field out of range.
	ErrInvalidOptions = errors.New("iptables: invalid options")
	// ErrNotOwned reports a chain given to SetChains or RemoveChains whose
	// name lacks the Table's ChainPrefix.
	ErrNotOwned = errors.New("iptables: chain does not carry the table's prefix")
	// ErrNotBuiltin reports a hook given to InsertRules or AppendRules
	// that is not a built-in chain of the Table's table.
	ErrNotBuiltin = errors.New("iptables: not a built-in chain of this table")
	// ErrDuplicateChain reports a chain named twice in one SetChains
	// call.
	ErrDuplicateChain = errors.New("iptables: chain given twice")
	// ErrUnknownChain reports a programmed rule that jumps to a chain with
	// the Table's prefix that is not declared. Apply does not write the
	// object holding that rule (see ObjectError) while it stands.
	ErrUnknownChain = errors.New("iptables: jump to an undeclared owned chain")
	// ErrChainLoop reports owned chains whose jumps form a loop, which the
	// kernel refuses. Apply does not write the chain whose jump closes the
	// loop while it stands.
	ErrChainLoop = errors.New("iptables: owned chains jump in a loop")
	// ErrRefused reports an object whose change the kernel (or the restore
	// binary) refused: Apply wrote everything else and tries it again on
	// its own backoff.
	ErrRefused = errors.New("iptables: change refused by the kernel")
	// ErrChainInUse reports an owned chain that is no longer wanted but
	// that a foreign rule still jumps to: it is flushed and kept, and
	// deleted by a later Apply once nothing jumps to it.
	ErrChainInUse = errors.New("iptables: unwanted chain still referenced by a foreign rule")
	// ErrSave reports a failure to read the kernel's tables.
	ErrSave = errors.New("iptables: reading the table failed")
	// ErrRestore reports a failed restore transaction; the error is a
	// *RestoreError, which keeps the input and the binary's output.
	ErrRestore = errors.New("iptables: restore failed")
	// ErrIncompatible reports a table that iptables-nft-save cannot show
	// because it holds native nftables rules.
	ErrIncompatible = errors.New("iptables: table is incompatible with iptables-nft (native nftables rules)")
	// ErrNoBackend reports that DetectBackend found neither backend's
	// binaries.
	ErrNoBackend = errors.New("iptables: no iptables backend found")
)

// bare returns a sentinel's text without the package prefix, to quote it
// inside another error of the package.
func bare(sentinel error) string { return strings.TrimPrefix(sentinel.Error(), "iptables: ") }

// RestoreError is a failed iptables-restore transaction: what was fed to
// the binary and what it said. errors.Is(err, ErrRestore) holds, and
// errors.As finds the runner's own error (a *command.Error for
// command.Local) through Unwrap.
type RestoreError struct {
	// Command is the binary and its arguments.
	Command []string
	// Input is the complete restore input.
	Input []byte
	// Line is the 1-based line of Input the binary reported as failing,
	// or 0 when it did not say.
	Line int
	// Stdout and Stderr are the binary's output, when the runner reports
	// them (command.Local does).
	Stdout, Stderr []byte
	// Err is the runner's error.
	Err error
}

// excerptContext is how many lines either side of the failing one Error
// quotes.
const excerptContext = 3

// Error names the command and the failing line, quotes the binary's
// standard error and the input around the failing line (or its start).
func (e *RestoreError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v: %s", ErrRestore, strings.Join(e.Command, " "))
	if e.Line > 0 {
		fmt.Fprintf(&b, " (input line %d)", e.Line)
	}
	if msg := e.message(); msg != "" {
		fmt.Fprintf(&b, ": %s", msg)
	}
	if ex := inputExcerpt(e.Input, e.Line); ex != "" {
		b.WriteString("\ninput:\n")
		b.WriteString(ex)
	}
	return b.String()
}

// message returns what the binary said (its standard error, else the
// runner's error), on one line.
func (e *RestoreError) message() string {
	msg := strings.TrimSpace(string(e.Stderr))
	if msg == "" && e.Err != nil {
		msg = e.Err.Error()
	}
	return strings.Join(strings.Fields(msg), " ")
}

// Unwrap returns ErrRestore and the runner's error.
func (e *RestoreError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrRestore}
	}
	return []error{ErrRestore, e.Err}
}

// inputLine returns line n (1-based) of input, or "".
func inputLine(input []byte, n int) string {
	i := 0
	for l := range bytes.Lines(input) {
		if i++; i == n {
			return string(bytes.TrimSuffix(l, []byte{'\n'}))
		}
	}
	return ""
}

// inputExcerpt returns numbered lines of input around line (1-based), or
// the first lines when line is 0.
func inputExcerpt(input []byte, line int) string {
	if len(input) == 0 {
		return ""
	}
	first, last := 1, 2*excerptContext+1
	if line > 0 {
		first, last = max(1, line-excerptContext), line+excerptContext
	}
	var b strings.Builder
	n := 0
	for l := range bytes.Lines(input) {
		if n++; n > last {
			break
		}
		l = bytes.TrimSuffix(l, []byte{'\n'})
		if n < first {
			continue
		}
		mark := "  "
		if n == line {
			mark = "> "
		}
		fmt.Fprintf(&b, "%s%5d  %s\n", mark, n, l)
	}
	return b.String()
}

// failedLineRE matches the ways iptables-restore names the failing line:
// "line 3 failed", "Error occurred at line: 3", "line 3: CHAIN_DEL failed".
var failedLineRE = regexp.MustCompile(`(?:line (\d+) failed|Error occurred at line: (\d+)|line (\d+): )`)

// failedLine extracts the failing line number from the binary's output.
func failedLine(outputs ...[]byte) int {
	for _, out := range outputs {
		m := failedLineRE.FindSubmatch(out)
		if m == nil {
			continue
		}
		for _, g := range m[1:] {
			if len(g) > 0 {
				if n, err := strconv.Atoi(string(g)); err == nil {
					return n
				}
			}
		}
	}
	return 0
}

// newRestoreError builds the error for a failed restore.
func newRestoreError(argv []string, input, stdout []byte, err error) *RestoreError {
	e := &RestoreError{Command: argv, Input: input, Stdout: stdout, Err: err}
	var ce *command.Error
	if errors.As(err, &ce) {
		e.Stderr = ce.Stderr
		if len(e.Stdout) == 0 {
			e.Stdout = ce.Stdout
		}
	}
	e.Line = failedLine(e.Stderr, e.Stdout, []byte(err.Error()))
	return e
}

// ObjectError is one object of a Table that an Apply did not write: an
// owned chain (its content, or its deletion), or our rules in a built-in
// chain (named by the built-in chain). The kernel keeps its current
// version of the object meanwhile; an owned chain refused before it ever
// existed is created empty, so that the jumps to it stay valid.
type ObjectError struct {
	// Chain names the object: the owned chain, or the built-in chain
	// whose rules of ours were not written.
	Chain string
	// Reason is the sentinel: ErrRefused, ErrChainInUse, ErrUnknownChain
	// or ErrChainLoop.
	Reason error
	// Detail says what happened, without the package prefix.
	Detail string
	// Err is the *RestoreError of a refused line (without its Input:
	// Detail quotes the line), or nil.
	Err error
	// RetryAt is when Apply tries the object again (the loop is asked to
	// call it then through ApplyResult.RetryAfter); zero when only a new
	// declaration can change the outcome (ErrUnknownChain, ErrChainLoop).
	// A new declaration of the object also retries it at once.
	RetryAt time.Time
}

// Error says which object failed and why, with the package prefix once.
func (e *ObjectError) Error() string { return "iptables: " + e.text() }

func (e *ObjectError) text() string {
	return fmt.Sprintf("%s: %s: %s", e.Chain, bare(e.Reason), e.Detail)
}

// Unwrap returns the reason and the underlying error.
func (e *ObjectError) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Reason}
	}
	return []error{e.Reason, e.Err}
}

// PartialError is the error of an Apply that wrote everything it could
// while some objects were not written. It wraps a *dataplane.PartialError
// (so errors.Is(err, dataplane.ErrPartial) holds and a dataplane.Loop
// treats the failure as the objects', not the Table's) and, through it,
// every *ObjectError.
type PartialError struct {
	// Objects are the objects not written, by chain name.
	Objects []*ObjectError
	partial *dataplane.PartialError
}

// newPartialError returns nil for no objects; waiting of them were not
// tried because their retry is not due.
func newPartialError(objs []*ObjectError, waiting int) error {
	if len(objs) == 0 {
		return nil
	}
	errs := make([]error, len(objs))
	for i, o := range objs {
		errs[i] = o
	}
	return &PartialError{Objects: objs, partial: &dataplane.PartialError{Failed: len(objs) - waiting, Waiting: waiting, Errs: errs}}
}

// Error counts the objects and says for each why it was not written.
func (e *PartialError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "iptables: %d object(s) not written", len(e.Objects))
	for _, o := range e.Objects {
		b.WriteString("; ")
		b.WriteString(o.text())
	}
	return b.String()
}

// Unwrap returns the dataplane.PartialError that holds the objects' errors.
func (e *PartialError) Unwrap() error { return e.partial }
