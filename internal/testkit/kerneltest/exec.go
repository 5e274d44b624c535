//go:build linux

package kerneltest

import (
	"github.com/nodeplane/nodeplane/command"

	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// sbinDirs are searched after PATH, so root tools are found even when the
// test's PATH lacks the sbin directories.
var sbinDirs = []string{"/usr/sbin", "/sbin", "/usr/bin", "/bin"}

// waitDelay bounds how long Wait blocks on output pipes held open by
// grandchildren after the process itself exited or was killed.
const waitDelay = 2 * time.Second

// Exec runs a binary inside the namespace and returns its standard output.
// The process is started from a thread inside the namespace, so it shares the
// test's mount namespace (bpffs and /sys stay as they are, unlike with `ip
// netns exec`; /sys/class/net shows the original namespace). name is looked
// up in PATH, then in /usr/sbin, /sbin, /usr/bin and /bin. LC_ALL=C is set.
// A failure is a *command.Error carrying stderr and the exit code, its Err
// naming the namespace; ctx
// cancellation kills the process.
func (ns *NS) Exec(ctx context.Context, name string, args ...string) ([]byte, error) {
	return ns.ExecInput(ctx, nil, name, args...)
}

// ExecInput is Exec with stdin as the command's standard input (nil means
// none), for iptables-restore, ipset restore or nft -f -.
func (ns *NS) ExecInput(ctx context.Context, stdin io.Reader, name string, args ...string) ([]byte, error) {
	cmd, err := ns.command(ctx, name, args)
	if err != nil {
		return nil, err
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, &stdout, &stderr
	if err := ns.Do(cmd.Start); err != nil {
		return nil, ns.execError(cmd, err, nil)
	}
	if err := cmd.Wait(); err != nil {
		return stdout.Bytes(), ns.execError(cmd, err, stderr.Bytes())
	}
	return stdout.Bytes(), nil
}

// command builds the exec.Cmd for name, resolving it first.
func (ns *NS) command(ctx context.Context, name string, args []string) (*exec.Cmd, error) {
	path, err := lookPath(name)
	if err != nil {
		return nil, &command.Error{Argv: append([]string{name}, args...), ExitCode: -1, Err: ns.inNS(err)}
	}
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	cmd.WaitDelay = waitDelay
	return cmd, nil
}

// execError wraps err from starting or waiting for cmd.
func (ns *NS) execError(cmd *exec.Cmd, err error, stderr []byte) *command.Error {
	code := -1
	if cmd.ProcessState != nil {
		code = cmd.ProcessState.ExitCode()
	}
	return &command.Error{Argv: cmd.Args, ExitCode: code, Stderr: bytes.Clone(stderr), Err: ns.inNS(err)}
}

// inNS names the namespace in a command's error.
func (ns *NS) inNS(err error) error {
	return fmt.Errorf("in netns %s: %w", ns.name, err)
}

// lookPath finds name in PATH or the sbin directories; a name containing a
// slash is used as given.
func lookPath(name string) (string, error) {
	if name == "" {
		return "", fmt.Errorf("%w: empty command name", ErrInvalid)
	}
	if strings.Contains(name, "/") {
		return name, nil
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range sbinDirs {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%q not found in PATH or %s: %w", name, strings.Join(sbinDirs, ", "), exec.ErrNotFound)
}

// Process is a long-running command started in a namespace by NS.Start. It
// is killed when its context is done, when Stop is called, or when the
// namespace is closed.
type Process struct {
	ns     *NS
	cmd    *exec.Cmd
	stdout lockedBuffer
	stderr lockedBuffer
	done   chan struct{}
	err    error // set before done is closed
}

// Start starts a long-running binary inside the namespace (a listener, a
// daemon) and returns at once. Lookup, environment and namespace are as for
// Exec. Its output is collected for Stdout and Stderr.
func (ns *NS) Start(ctx context.Context, name string, args ...string) (*Process, error) {
	cmd, err := ns.command(ctx, name, args)
	if err != nil {
		return nil, err
	}
	p := &Process{ns: ns, cmd: cmd, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = &p.stdout, &p.stderr
	if err := ns.Do(cmd.Start); err != nil {
		return nil, ns.execError(cmd, err, nil)
	}
	go p.wait()

	ns.mu.Lock()
	closed := ns.closed
	select {
	case <-p.done: // already reaped; wait found nothing to forget
	default:
		if !closed {
			ns.procs[p] = struct{}{}
		}
	}
	ns.mu.Unlock()
	if closed { // Close ran while the process was starting
		_ = p.Stop()
		return nil, fmt.Errorf("%w: %s", ErrClosed, ns.name)
	}
	return p, nil
}

// wait reaps the process and records how it ended.
func (p *Process) wait() {
	if err := p.cmd.Wait(); err != nil {
		p.err = p.ns.execError(p.cmd, err, p.stderr.Bytes())
	}
	close(p.done)
	p.ns.mu.Lock()
	delete(p.ns.procs, p)
	p.ns.mu.Unlock()
}

// Pid returns the process ID.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited and been reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

// Wait blocks until the process exits and returns nil for exit status 0,
// else a *command.Error (a killed process reports "signal: killed").
func (p *Process) Wait() error {
	<-p.done
	return p.err
}

// Stop kills the process with SIGKILL and waits until it is reaped. Stopping
// a process that already exited does nothing. Its error is only about the
// kill itself, never the exit status.
func (p *Process) Stop() error {
	select {
	case <-p.done:
		return nil
	default:
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kerneltest: kill pid %d in %s: %w", p.Pid(), p.ns.name, err)
	}
	<-p.done
	return nil
}

// Stdout returns a copy of what the process has written to standard output
// so far.
func (p *Process) Stdout() []byte { return p.stdout.Bytes() }

// Stderr returns a copy of what the process has written to standard error so
// far.
func (p *Process) Stderr() []byte { return p.stderr.Bytes() }

// lockedBuffer is a bytes.Buffer safe for one writer and concurrent readers.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// Bytes returns a copy of the contents.
func (b *lockedBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}

// Run is ExecInput under the name of command.Runner, so an NS can be handed
// to any driver as the runner of its binaries (iptables-restore, ipset, nft)
// and they run inside the namespace.
func (ns *NS) Run(ctx context.Context, stdin io.Reader, name string, args ...string) ([]byte, error) {
	return ns.ExecInput(ctx, stdin, name, args...)
}
