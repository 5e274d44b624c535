package nftables

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/nodeplane/nodeplane/command"
	"github.com/nodeplane/nodeplane/internal/nfnl"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/iptables"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/netfilter"
)

// RemoveTable deletes the nftables table name of family f in k's namespace
// (nil: the process's), with everything in it, in one transaction: what an
// agent that switches from this package to package iptables runs once, so
// that no rule of ours is left in nftables. A table that does not exist is
// not an error, and then nothing is written. Nothing else is touched. A nil
// ctx is context.Background().
func RemoveTable(ctx context.Context, k Kernel, f ipfamily.Family, name string) error {
	if err := validateTableName(name); err != nil {
		return err
	}
	if !f.Valid() {
		return fmt.Errorf("%w: IP family %v", ErrInvalidOptions, f)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// A Table whose socket does the talking.
	t, err := New(Options{Name: name, Family: f, Role: Filter, Kernel: k, PostWriteRecheck: []time.Duration{}})
	if err != nil {
		return err
	}
	defer t.Close()
	s, err := t.socket()
	if err != nil {
		return err
	}
	err = t.request(s, nfnl.MsgGetTable, 0, func(w *nfnl.Writer) { w.Str(nfnl.TableName, name) }, func(*nfnl.Msg) error { return nil })
	switch {
	case isNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("%w: table %s %s: %w", ErrRead, familyName(f), name, err)
	}
	x := &txn{}
	st := x.begin(t.fam, nfnl.MsgDestroyTable, 0, "table", holdNone)
	x.w.Str(nfnl.TableName, name)
	x.w.End(st)
	errs, lost, err := t.send(s, x)
	switch {
	case err != nil:
		return fmt.Errorf("%w: deleting table %s %s: %w", ErrWrite, familyName(f), name, err)
	case len(errs) > 0:
		return fmt.Errorf("%w: deleting table %s %s: %w", ErrWrite, familyName(f), name, kernelErr(errs[0].errno))
	case lost:
		return fmt.Errorf("%w: deleting table %s %s: the kernel's answer was lost", ErrWrite, familyName(f), name)
	}
	return nil
}

// RemoveIPTablesLeftovers deletes what an iptables.Table with chainPrefix
// and hashPrefix (empty: derived from chainPrefix, as iptables.Options
// does) left in iptables, in both backends (legacy and nft) and both IP
// families of k's namespace (nil: the process's): its chains and its
// hash-commented rules in the built-in chains, as an iptables.Table with
// nothing declared removes them — what an agent that switches from package
// iptables to this package runs once. It reads each backend with its save
// binary without -t, which lists only the tables that exist (so it creates
// none and loads no module), and writes only to the tables that hold
// something of ours; a backend whose binaries are missing is skipped.
// Foreign rules and chains are never touched. The errors of the tables it
// could not clean are joined.
func RemoveIPTablesLeftovers(ctx context.Context, k kernel.Commands, chainPrefix, hashPrefix string) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if chainPrefix == "" {
		return fmt.Errorf("%w: the iptables ChainPrefix is required", ErrInvalidOptions)
	}
	if hashPrefix == "" {
		hashPrefix = netfilter.HashPrefixFor(chainPrefix)
	}
	var runner command.Runner = command.Local{}
	if k != nil {
		runner = k.Runner()
	}
	var errl []error
	for _, b := range []iptables.Backend{iptables.BackendLegacy, iptables.BackendNFT} {
		for _, f := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
			out, err := runner.Run(ctx, nil, b.SaveCommand(f))
			if err != nil {
				if errors.Is(err, exec.ErrNotFound) {
					continue
				}
				errl = append(errl, fmt.Errorf("nftables: reading %s: %w", b.SaveCommand(f), err))
				continue
			}
			for _, table := range tablesWithOurs(out, chainPrefix, hashPrefix) {
				tbl, err := iptables.New(iptables.Options{
					Table: table, Family: f, Backend: b, ChainPrefix: chainPrefix, HashPrefix: hashPrefix,
					Kernel: k, PostWriteRecheck: []time.Duration{},
				})
				if err == nil {
					_, err = tbl.Apply(ctx)
				}
				if err != nil {
					errl = append(errl, fmt.Errorf("nftables: removing iptables leftovers from %s table %s: %w", b.SaveCommand(f), table, err))
				}
			}
		}
	}
	return errors.Join(errl...)
}

// tablesWithOurs returns the tables of an iptables-save output that hold a
// chain with our prefix or a rule with our hash comment.
func tablesWithOurs(save []byte, chainPrefix, hashPrefix string) []string {
	var out []string
	table, ours := "", false
	flush := func() {
		if table != "" && ours {
			out = append(out, table)
		}
	}
	sc := bufio.NewScanner(bytes.NewReader(save))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "*"):
			flush()
			table, ours = line[1:], false
		case strings.HasPrefix(line, ":"+chainPrefix):
			ours = true
		case strings.HasPrefix(line, "-A ") && (strings.Contains(line, "--comment "+hashPrefix) || strings.Contains(line, `--comment "`+hashPrefix)):
			ours = true
		}
	}
	flush()
	return out
}
