package command

import (
	"context"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLocalRunReturnsStdoutAndFeedsStdin(t *testing.T) {
	out, err := Local{}.Run(context.Background(), strings.NewReader("a\nb\n"), "cat")
	require.NoError(t, err)
	require.Equal(t, "a\nb\n", string(out))
}

func TestLocalRunFailureKeepsExitCodeAndStderr(t *testing.T) {
	_, err := Local{}.Run(context.Background(), nil, "sh", "-c", "echo out; echo bad input >&2; exit 3")
	var e *Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, 3, e.ExitCode)
	require.Equal(t, "out\n", string(e.Stdout))
	require.Equal(t, "bad input\n", string(e.Stderr))
	require.Equal(t, []string{"sh", "-c", "echo out; echo bad input >&2; exit 3"}, e.Argv)
	require.Contains(t, err.Error(), "bad input")
	var exitErr *exec.ExitError
	require.ErrorAs(t, err, &exitErr)
}

func TestLocalRunMissingBinary(t *testing.T) {
	_, err := Local{}.Run(context.Background(), nil, "/nonexistent/nodeplane-binary")
	var e *Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, -1, e.ExitCode)
}

func TestLocalRunCancelledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Local{}.Run(ctx, nil, "sleep", "5")
	require.ErrorIs(t, err, context.Canceled)
}

func TestLocalEnvReplacesEnvironment(t *testing.T) {
	out, err := Local{Env: []string{"NODEPLANE_X=42"}}.Run(context.Background(), nil, "sh", "-c", "echo $NODEPLANE_X")
	require.NoError(t, err)
	require.Equal(t, "42\n", string(out))
}

func TestRunnerFunc(t *testing.T) {
	var got []string
	r := RunnerFunc(func(_ context.Context, _ io.Reader, name string, args ...string) ([]byte, error) {
		got = append([]string{name}, args...)
		return nil, errors.New("boom")
	})
	_, err := r.Run(context.Background(), nil, "ipset", "list")
	require.EqualError(t, err, "boom")
	require.Equal(t, []string{"ipset", "list"}, got)
}

func TestErrorQuotesStderrCapped(t *testing.T) {
	long := strings.Repeat("x", 5000)
	e := &Error{Argv: []string{"ipset", "restore"}, ExitCode: 1, Stderr: []byte("  " + long + "\n"), Err: errors.New("exit status 1")}
	msg := e.Error()
	if !strings.HasPrefix(msg, "ipset restore: exit status 1: xxx") || !strings.HasSuffix(msg, "…") || strings.Contains(msg, long) {
		t.Fatalf("message not capped: %.80q… (%d bytes)", msg, len(msg))
	}
}

// A nil context is context.Background(), never a panic.
func TestLocalRunNilContext(t *testing.T) {
	//lint:ignore SA1012 a nil context must not panic
	out, err := Local{}.Run(nil, nil, "echo", "ok")
	require.NoError(t, err)
	require.Equal(t, "ok\n", string(out))
	//lint:ignore SA1012 a nil context must not panic
	_, err = NetNS{FD: -1}.Run(nil, nil, "true")
	require.ErrorIs(t, err, ErrNetNS)
}
