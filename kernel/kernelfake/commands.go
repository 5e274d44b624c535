package kernelfake

import (
	"context"
	"io"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/nodeplane/nodeplane/command"
)

// Runner implements kernel.Commands: a runner that serves the iptables
// and ip6tables binaries (every backend and tool: iptables-restore,
// ip6tables-nft-save…) from IPTables, and ipset from IPSets, by the base
// name of the binary. Any other binary fails as a missing one does: a
// *command.Error wrapping exec.ErrNotFound. Each run counts as a call of
// OpRun and can be made to fail with Fail(OpRun, …).
func (ns *Namespace) Runner() command.Runner { return command.RunnerFunc(ns.run) }

func (ns *Namespace) run(ctx context.Context, stdin io.Reader, name string, args ...string) ([]byte, error) {
	unlock, err := ns.begin(ctx, OpRun)
	unlock()
	argv := append([]string{name}, args...)
	if err != nil {
		return nil, &command.Error{Argv: argv, ExitCode: -1, Err: err}
	}
	base := filepath.Base(name)
	switch {
	case strings.HasPrefix(base, "iptables") || strings.HasPrefix(base, "ip6tables"):
		return ns.s.iptables.Run(ctx, stdin, name, args...)
	case base == "ipset":
		return ns.s.ipsets.Run(ctx, stdin, name, args...)
	}
	return nil, &command.Error{Argv: argv, ExitCode: -1, Err: &exec.Error{Name: name, Err: exec.ErrNotFound}}
}
