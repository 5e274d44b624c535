package nftables

import (
	"context"
	"fmt"
	"time"

	"github.com/nodeplane/nodeplane/internal/nfnl"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel"
)

// RemoveTable deletes the nftables table name of family f in k's namespace
// (nil: the process's), with everything in it, in one transaction, so
// that no rule of ours is left in nftables; nfmigrate.RemoveLeftovers
// calls it for an agent that switches to package iptables. A table that does not exist is
// not an error, and then nothing is written. Nothing else is touched. The
// names iptables-nft gives its tables (IPTablesNFTTables) are refused: its
// tables are never nodeplane's. A nil
// ctx is context.Background().
func RemoveTable(ctx context.Context, k kernel.NFTables, f ipfamily.Family, name string) error {
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
