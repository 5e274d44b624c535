package command_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/nodeplane/nodeplane/command"
)

func ExampleLocal() {
	out, err := command.Local{}.Run(context.Background(), strings.NewReader("hello\n"), "cat")
	fmt.Printf("%q %v\n", out, err)
	// Output: "hello\n" <nil>
}

func ExampleRunnerFunc() {
	// A recording runner, as a unit test might use in place of the kernel.
	var calls []string
	r := command.RunnerFunc(func(_ context.Context, stdin io.Reader, name string, args ...string) ([]byte, error) {
		calls = append(calls, name+" "+strings.Join(args, " "))
		return nil, nil
	})
	_, _ = r.Run(context.Background(), nil, "ipset", "list", "-name")
	fmt.Println(calls)
	// Output: [ipset list -name]
}

func ExampleError() {
	_, err := command.Local{}.Run(context.Background(), nil, "sh", "-c", "echo no such set >&2; exit 1")
	if e, ok := err.(*command.Error); ok {
		fmt.Println(e.ExitCode, strings.TrimSpace(string(e.Stderr)))
	}
	// Output: 1 no such set
}

func ExampleNetNS() {
	// A runner for binaries in another network namespace; FD is an open
	// descriptor of it (here deliberately not one, so nothing runs).
	r := command.NetNS{FD: -1}
	_, err := r.Run(context.Background(), nil, "iptables-save")
	fmt.Println(errors.Is(err, command.ErrNetNS))
	// Output: true
}

// A driver wraps a failed restore in its own sentinel; errors.As finds the
// RestoreError, which says which line failed and quotes the input there.
func ExampleRestoreError() {
	errRestore := errors.New("mydriver: restore failed")
	input := []byte("create a hash:ip\nadd a 10.0.0.1\nadd a 10.0.0.2\n")
	_, err := command.Local{}.Run(context.Background(), nil, "sh", "-c", "echo 'Error in line 2: Hash is full' >&2; exit 1")
	err = fmt.Errorf("%w: %w", errRestore,
		command.NewRestoreError([]string{"ipset", "restore"}, input, nil, err, regexp.MustCompile(`Error in line (\d+):`)))

	var re *command.RestoreError
	if errors.As(err, &re) {
		fmt.Printf("%d %q\n", re.Line, re.FailedLine())
	}
	fmt.Println(err)
	// Output:
	// 2 "add a 10.0.0.1"
	// mydriver: restore failed: ipset restore (input line 2): Error in line 2: Hash is full
	// input:
	//       1  create a hash:ip
	// >     2  add a 10.0.0.1
	//       3  add a 10.0.0.2
}
