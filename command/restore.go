package command

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// RestoreError is a failed restore transaction: a binary that applies a
// script read from its standard input as one (iptables-restore, ipset
// restore) refused it or did not finish. It keeps what was fed to the
// binary and what the binary said, so that a driver can blame the failing
// line on the object it belongs to.
//
// Drivers return it wrapped in their own sentinel (iptables.ErrRestore,
// ipsets.ErrRestore), which gives the text its package prefix; errors.As
// finds the *RestoreError there, and the runner's error (an *Error for
// the runners nodeplane ships) through Unwrap.
type RestoreError struct {
	// Argv is the binary and its arguments.
	Argv []string
	// Input is the complete input fed to the binary.
	Input []byte
	// Line is the 1-based line of Input the binary reported as failing,
	// or 0 when it did not say.
	Line int
	// Stdout and Stderr are the binary's output, when the runner reports
	// them (an *Error does).
	Stdout, Stderr []byte
	// Err is the runner's error.
	Err error
}

// NewRestoreError returns the error of a restore of input by argv that
// failed with err, the runner's error; stdout is what the runner returned.
// Stderr, and Stdout when stdout is empty, are taken from the *Error in
// err's tree. lineRE matches the way the binary names the failing line:
// Line is the number its first non-empty group captures in the first of
// Stderr, Stdout and err's text that it matches, or 0 (also for a nil
// lineRE).
func NewRestoreError(argv []string, input, stdout []byte, err error, lineRE *regexp.Regexp) *RestoreError {
	e := &RestoreError{Argv: argv, Input: input, Stdout: stdout, Err: err}
	var ce *Error
	if errors.As(err, &ce) {
		e.Stderr = ce.Stderr
		if len(e.Stdout) == 0 {
			e.Stdout = ce.Stdout
		}
	}
	if lineRE == nil {
		return e
	}
	outputs := [][]byte{e.Stderr, e.Stdout}
	if err != nil {
		outputs = append(outputs, []byte(err.Error()))
	}
	for _, out := range outputs {
		m := lineRE.FindSubmatch(out)
		if m == nil {
			continue
		}
		for _, g := range m[1:] {
			if n, err := strconv.Atoi(string(g)); err == nil && n > 0 {
				e.Line = n
				return e
			}
		}
	}
	return e
}

// Error names the command and the failing line, says what the binary said
// (Message) and quotes the input around the failing line (Excerpt).
func (e *RestoreError) Error() string {
	var b strings.Builder
	b.WriteString(strings.Join(e.Argv, " "))
	if e.Line > 0 {
		fmt.Fprintf(&b, " (input line %d)", e.Line)
	}
	if msg := e.Message(); msg != "" {
		b.WriteString(": ")
		b.WriteString(msg)
	}
	if ex := e.Excerpt(); ex != "" {
		b.WriteString("\ninput:\n")
		b.WriteString(strings.TrimSuffix(ex, "\n"))
	}
	return b.String()
}

// Unwrap returns the runner's error.
func (e *RestoreError) Unwrap() error { return e.Err }

// Message returns what the binary said, on one line: its standard error,
// or the runner's error when that is empty; cut after 4 KiB.
func (e *RestoreError) Message() string {
	msg := strings.TrimSpace(string(e.Stderr))
	if msg == "" && e.Err != nil {
		msg = e.Err.Error()
	}
	msg = strings.Join(strings.Fields(msg), " ")
	if len(msg) > maxQuoted {
		msg = msg[:maxQuoted] + "…"
	}
	return msg
}

// FailedLine returns the text of the failing line of Input, without its
// newline; "" when Line is 0 or beyond the input.
func (e *RestoreError) FailedLine() string {
	if e.Line <= 0 {
		return ""
	}
	n := 0
	for l := range bytes.Lines(e.Input) {
		if n++; n == e.Line {
			return string(bytes.TrimSuffix(l, []byte{'\n'}))
		}
	}
	return ""
}

// Excerpt bounds: lines quoted either side of the failing one, and bytes
// quoted of each line.
const (
	excerptContext = 3
	excerptLineMax = 256
)

// Excerpt returns the lines of Input around the failing one, numbered,
// the failing one marked with ">": three either side, or the first seven
// when Line is 0. A line longer than 256 bytes is cut, ending in "…".
func (e *RestoreError) Excerpt() string {
	if len(e.Input) == 0 {
		return ""
	}
	first, last := 1, 2*excerptContext+1
	if e.Line > 0 {
		first, last = max(1, e.Line-excerptContext), e.Line+excerptContext
	}
	var b strings.Builder
	n := 0
	for l := range bytes.Lines(e.Input) {
		if n++; n > last {
			break
		}
		if n < first {
			continue
		}
		l = bytes.TrimSuffix(l, []byte{'\n'})
		cut := ""
		if len(l) > excerptLineMax {
			i := excerptLineMax
			for i > 0 && !utf8.RuneStart(l[i]) {
				i--
			}
			l, cut = l[:i], "…"
		}
		mark := "  "
		if n == e.Line {
			mark = "> "
		}
		fmt.Fprintf(&b, "%s%5d  %s%s\n", mark, n, l, cut)
	}
	return b.String()
}
