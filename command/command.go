package command

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
)

// Runner runs one binary to completion. stdin may be nil, and so may ctx
// (context.Background()). It returns the standard output; a failure
// (including a non-zero exit) is an error, which should be an *Error, as
// it is for Local, NetNS and the fakes nodeplane ships: drivers read the
// exit status and standard error from it.
type Runner interface {
	// Run runs name with args to completion and returns its standard output.
	Run(ctx context.Context, stdin io.Reader, name string, args ...string) ([]byte, error)
}

// RunnerFunc adapts a function to Runner.
type RunnerFunc func(ctx context.Context, stdin io.Reader, name string, args ...string) ([]byte, error)

// Run calls f.
func (f RunnerFunc) Run(ctx context.Context, stdin io.Reader, name string, args ...string) ([]byte, error) {
	return f(ctx, stdin, name, args...)
}

// Local runs binaries as child processes of the calling process, in its
// network namespace. The zero value is ready to use.
type Local struct {
	// Env, when non-nil, replaces the child's environment (for example to
	// set XTABLES_LOCKFILE).
	Env []string
}

// Run runs name with args, feeding it stdin, and returns its standard
// output. A failure to start, a non-zero exit or a cancelled context is
// returned as *Error.
func (l Local) Run(ctx context.Context, stdin io.Reader, name string, args ...string) ([]byte, error) {
	return run(ctx, l.Env, (*exec.Cmd).Start, stdin, name, args)
}

// run runs name with args, starting the process with start, and reports a
// failure as *Error. A nil ctx is context.Background().
func run(ctx context.Context, env []string, start func(*exec.Cmd) error, stdin io.Reader, name string, args []string) ([]byte, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin = stdin
	if env != nil {
		cmd.Env = env
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	err := start(cmd)
	if err == nil {
		err = cmd.Wait()
	}
	if err == nil {
		return stdout.Bytes(), nil
	}
	e := &Error{Argv: append([]string{name}, args...), ExitCode: -1, Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), Err: err}
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		e.ExitCode = exitErr.ExitCode()
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		e.Err = fmt.Errorf("%w (%w)", ctxErr, err)
	}
	return stdout.Bytes(), e
}

// Error is a failed command: what was run, how it ended and what it said.
type Error struct {
	// Argv is the binary and its arguments.
	Argv []string
	// ExitCode is the exit status, or -1 when the process did not exit
	// normally (not started, killed).
	ExitCode int
	// Stdout and Stderr are the command's output.
	Stdout, Stderr []byte
	// Err is the underlying error from os/exec or the context.
	Err error
}

// maxQuoted caps how much standard error Error quotes.
const maxQuoted = 4096

// Error describes the command, how it ended and its standard error
// (trimmed, and cut after 4 KiB).
func (e *Error) Error() string {
	msg := fmt.Sprintf("%s: %v", strings.Join(e.Argv, " "), e.Err)
	if s := strings.TrimSpace(string(e.Stderr)); s != "" {
		if len(s) > maxQuoted {
			s = s[:maxQuoted] + "…"
		}
		msg += ": " + s
	}
	return msg
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }
