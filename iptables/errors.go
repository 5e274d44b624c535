package iptables

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/nodeplane/nodeplane/command"
)

// Sentinel errors of the table writer. Errors returned by Table, New and
// DetectBackend wrap one of them (or one of the rule model's sentinels,
// such as ErrInvalidRule), so callers can test with errors.Is.
var (
	// ErrInvalidOptions reports an Options field out of range.
	ErrInvalidOptions = errors.New("iptables: invalid options")
	// ErrNotOwned reports a chain given to UpdateChain or RemoveChain whose
	// name lacks the Table's ChainPrefix.
	ErrNotOwned = errors.New("iptables: chain does not carry the table's prefix")
	// ErrNotBuiltin reports a chain given to InsertOrAppendRules or
	// AppendRules that is not a built-in chain of the Table's table.
	ErrNotBuiltin = errors.New("iptables: not a built-in chain of this table")
	// ErrUnknownChain reports a programmed rule that jumps to a chain with
	// the Table's prefix that was never declared with UpdateChain. Apply
	// writes nothing while it stands.
	ErrUnknownChain = errors.New("iptables: jump to an undeclared owned chain")
	// ErrChainLoop reports owned chains whose jumps form a loop, which the
	// kernel refuses. Apply writes nothing while it stands.
	ErrChainLoop = errors.New("iptables: owned chains jump in a loop")
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
	msg := strings.TrimSpace(string(e.Stderr))
	if msg == "" && e.Err != nil {
		msg = e.Err.Error()
	}
	if msg != "" {
		fmt.Fprintf(&b, ": %s", msg)
	}
	if ex := inputExcerpt(e.Input, e.Line); ex != "" {
		b.WriteString("\ninput:\n")
		b.WriteString(ex)
	}
	return b.String()
}

// Unwrap returns ErrRestore and the runner's error.
func (e *RestoreError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrRestore}
	}
	return []error{ErrRestore, e.Err}
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
