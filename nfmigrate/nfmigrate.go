package nfmigrate

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
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/iptables"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/netfilter"
	"github.com/nodeplane/nodeplane/nftables"
)

// ErrInvalidOptions reports a Backend or Owned value out of range. Every
// error of the package starts with "nfmigrate: ".
var ErrInvalidOptions = errors.New("nfmigrate: invalid options")

// Backend is a netfilter backend nodeplane writes to.
type Backend uint8

// The backends.
const (
	// IPTablesLegacy is package iptables on iptables.BackendLegacy.
	IPTablesLegacy Backend = iota + 1
	// IPTablesNFT is package iptables on iptables.BackendNFT.
	IPTablesNFT
	// NFTables is package nftables.
	NFTables
)

// Valid reports whether b is one of the backends.
func (b Backend) Valid() bool { return b >= IPTablesLegacy && b <= NFTables }

// iptablesBackend returns the iptables backend b stands for, if any.
func (b Backend) iptablesBackend() (iptables.Backend, bool) {
	switch b {
	case IPTablesLegacy:
		return iptables.BackendLegacy, true
	case IPTablesNFT:
		return iptables.BackendNFT, true
	}
	return "", false
}

// Kernel is the namespace to clean: its Runner runs the iptables binaries,
// and its nftables sockets reach nf_tables. A *kernel.Namespace is one,
// and so is a kernelfake.Namespace.
type Kernel interface {
	kernel.Commands
	kernel.NFTables
}

// Owned says what nodeplane's writers own in the backends.
type Owned struct {
	// ChainPrefix is the iptables Tables' ChainPrefix (required).
	ChainPrefix string
	// HashPrefix is their HashPrefix; empty derives it from ChainPrefix,
	// as iptables.Options does.
	HashPrefix string
	// NFTablesTables are the names of the nftables tables of ours, removed
	// in both IP families.
	NFTablesTables []string
}

// RemoveLeftovers deletes what o describes from every backend but keep, in
// both IP families of k's namespace (nil: the process's). The errors of
// the tables it could not clean are joined; bad input is an error
// matching ErrInvalidOptions, and nothing is touched. A nil ctx is
// context.Background().
func RemoveLeftovers(ctx context.Context, k Kernel, keep Backend, o Owned) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if !keep.Valid() {
		return fmt.Errorf("%w: backend to keep %v", ErrInvalidOptions, keep)
	}
	if o.ChainPrefix == "" {
		return fmt.Errorf("%w: the iptables ChainPrefix is required", ErrInvalidOptions)
	}
	if o.HashPrefix == "" {
		o.HashPrefix = netfilter.HashPrefixFor(o.ChainPrefix)
	}
	if err := o.validate(k); err != nil {
		return err
	}
	var errl []error
	for _, b := range []Backend{IPTablesLegacy, IPTablesNFT} {
		if b != keep {
			errl = append(errl, removeIPTables(ctx, k, b, o))
		}
	}
	if keep != NFTables {
		for _, name := range o.NFTablesTables {
			for _, f := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
				if err := nftables.RemoveTable(ctx, k, f, name); err != nil {
					errl = append(errl, fmt.Errorf("nfmigrate: %w", err))
				}
			}
		}
	}
	return errors.Join(errl...)
}

// validate checks the prefixes and table names the way the writers
// will, before anything is touched: the writers' constructors do no I/O.
func (o Owned) validate(k Kernel) error {
	_, err := iptables.New(iptables.Options{Table: "filter", Family: ipfamily.IPv4, Backend: iptables.BackendLegacy,
		ChainPrefix: o.ChainPrefix, HashPrefix: o.HashPrefix, Kernel: k})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	for _, name := range o.NFTablesTables {
		t, err := nftables.New(nftables.Options{Name: name, Family: ipfamily.IPv4, Role: nftables.Filter, Kernel: k})
		if err != nil {
			return fmt.Errorf("%w: NFTablesTables: %w", ErrInvalidOptions, err)
		}
		t.Close()
	}
	return nil
}

// removeIPTables removes our chains and hash-commented rules from iptables
// backend b in both families. It reads the backend with its save binary
// without -t, which lists only the tables that exist (so it creates none
// and loads no module), and writes, with an iptables.Table with nothing
// declared, only to the tables that hold something of ours.
func removeIPTables(ctx context.Context, k Kernel, backend Backend, o Owned) error {
	b, _ := backend.iptablesBackend()
	var runner command.Runner = command.Local{}
	if k != nil {
		runner = k.Runner()
	}
	var errl []error
	for _, f := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
		out, err := runner.Run(ctx, nil, b.SaveCommand(f))
		if err != nil {
			if errors.Is(err, exec.ErrNotFound) {
				continue
			}
			errl = append(errl, fmt.Errorf("nfmigrate: reading %s: %w", b.SaveCommand(f), err))
			continue
		}
		for _, table := range tablesWithOurs(out, o.ChainPrefix, o.HashPrefix) {
			tbl, err := iptables.New(iptables.Options{
				Table: table, Family: f, Backend: b, ChainPrefix: o.ChainPrefix, HashPrefix: o.HashPrefix,
				Kernel: k, PostWriteRecheck: []time.Duration{},
			})
			if err == nil {
				_, err = tbl.Apply(ctx)
			}
			if err != nil {
				errl = append(errl, fmt.Errorf("nfmigrate: removing leftovers from %s table %s: %w", b.SaveCommand(f), table, err))
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
