package iptables

import (
	"context"
	"errors"
	"fmt"

	"github.com/nodeplane/nodeplane/command"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel"
)

// HintChains are the chains whose presence tells DetectBackend which
// backend the node's kubelet and kube-proxy use: they create them in the
// mangle table of the backend they write to.
var HintChains = []string{"KUBE-IPTABLES-HINT", "KUBE-KUBELET-CANARY"}

// Detection explains the choice DetectBackend made.
type Detection struct {
	// Backend is the chosen backend.
	Backend Backend
	// Reason says why, in a few words, for logs.
	Reason string
	// Hint is the hint chain found (see HintChains), or "".
	Hint string
	// LegacyRules and NFTRules are the rules found in every table of
	// both IP families of each backend.
	LegacyRules, NFTRules int
	// LegacyAvailable and NFTAvailable report whether at least one save
	// binary of the backend ran.
	LegacyAvailable, NFTAvailable bool
}

// DetectBackend finds the iptables backend the node already uses, so that
// our rules land where the rest of the node's firewall is:
//
//  1. a hint chain (HintChains) in the nft backend chooses nft, else one in
//     the legacy backend chooses legacy;
//  2. else the backend holding more rules (IPv4 and IPv6, all tables)
//     wins;
//  3. a tie, including an empty node, chooses nft, the default of current
//     distributions.
//
// It runs ip[6]tables-nft-save and ip[6]tables-legacy-save without -t in
// the namespace of k (nil: the process's namespace, as Options.Kernel);
// without -t the legacy binary lists only tables that already exist, so
// detection loads no kernel module and creates no table. A backend whose
// binaries are missing or fail is skipped; when neither ran the error wraps
// ErrNoBackend. It writes nothing. A nil ctx is context.Background().
func DetectBackend(ctx context.Context, k kernel.Commands) (Backend, Detection, error) {
	ctx = orBackground(ctx)
	runner := runnerOf(k)
	type probe struct {
		rules     int
		hint      string
		available bool
		errs      []error
	}
	run := func(b Backend) probe {
		var p probe
		for _, v := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
			bin := b.SaveCommand(v)
			out, err := runner.Run(ctx, nil, bin)
			if err != nil {
				p.errs = append(p.errs, fmt.Errorf("%s: %w", bin, err))
				continue
			}
			p.available = true
			n, hint := countRules(out, HintChains)
			p.rules += n
			if p.hint == "" {
				p.hint = hint
			}
		}
		return p
	}
	nft := run(BackendNFT)
	if err := ctx.Err(); err != nil {
		return "", Detection{}, err
	}
	legacy := run(BackendLegacy)
	if err := ctx.Err(); err != nil {
		return "", Detection{}, err
	}
	d := Detection{
		LegacyRules: legacy.rules, NFTRules: nft.rules,
		LegacyAvailable: legacy.available, NFTAvailable: nft.available,
	}
	switch {
	case !nft.available && !legacy.available:
		return "", d, fmt.Errorf("%w: %w", ErrNoBackend, errors.Join(append(nft.errs, legacy.errs...)...))
	case !legacy.available:
		d.Backend, d.Reason = BackendNFT, "only the nft binaries ran"
	case !nft.available:
		d.Backend, d.Reason = BackendLegacy, "only the legacy binaries ran"
	case nft.hint != "":
		d.Backend, d.Hint, d.Reason = BackendNFT, nft.hint, "hint chain "+nft.hint+" in nft"
	case legacy.hint != "":
		d.Backend, d.Hint, d.Reason = BackendLegacy, legacy.hint, "hint chain "+legacy.hint+" in legacy"
	case legacy.rules > nft.rules:
		d.Backend, d.Reason = BackendLegacy, fmt.Sprintf("more rules in legacy (%d) than in nft (%d)", legacy.rules, nft.rules)
	case nft.rules > legacy.rules:
		d.Backend, d.Reason = BackendNFT, fmt.Sprintf("more rules in nft (%d) than in legacy (%d)", nft.rules, legacy.rules)
	default:
		d.Backend, d.Reason = BackendNFT, fmt.Sprintf("as many rules in both (%d): nft by default", nft.rules)
	}
	return d.Backend, d, nil
}

// runnerOf returns the runner of k, or command.Local for nil.
func runnerOf(k kernel.Commands) command.Runner {
	if k == nil {
		return command.Local{}
	}
	return k.Runner()
}

// orBackground returns ctx, or context.Background() for nil.
func orBackground(ctx context.Context) context.Context {
	if ctx == nil {
		return context.Background()
	}
	return ctx
}
