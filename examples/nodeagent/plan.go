package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/nodeplane/nodeplane/examples/nodeagent/agent"
	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore"
)

// planCmd prints what `nodeagent run` would write to the node's kernel
// now: it builds the agent's drivers against the live namespace, loads the
// cluster file, and prints every driver's Plan. It writes nothing.
func planCmd(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("plan", flag.ContinueOnError)
	var c common
	c.register(fs)
	ds := fs.String("datastore", "file:/etc/nodeplane/cluster.yaml", `"file:PATH": a YAML cluster file`)
	masq := fs.Bool("masquerade", true, "masquerade pod traffic leaving the pools, as run")
	netfilter := fs.String("netfilter", string(agent.NetfilterAuto), "netfilter backend of the masquerade rules, as run")
	wg := fs.Bool("wireguard", false, "encrypt pod traffic between nodes with WireGuard, as run")
	noBlackholes := fs.Bool("no-blackholes", false, "give this node's pod blocks no blackhole route, as run")
	netpol := fs.Bool("network-policy", true, "enforce the cluster's NetworkPolicies, as run")
	bpfProxy := fs.Bool("bpf-proxy", false, "the BPF service proxy runs, as run: its programs are not planned, the rules for its marks are")
	vni := fs.Uint("vxlan-vni", 0, "VXLAN network identifier (0: 4096)")
	port := fs.Uint("vxlan-port", 0, "VXLAN UDP port (0: 4789)")
	asJSON := fs.Bool("json", false, "print the plans as JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := c.config()
	if err != nil {
		return err
	}
	path, ok := strings.CutPrefix(*ds, "file:")
	if !ok {
		return fmt.Errorf(`--datastore must be "file:PATH", not %q`, *ds)
	}
	cfg.Datastore = &datastore.File{Path: path, Logger: cfg.Logger.With("component", "datastore")}
	cfg.NoMasquerade, cfg.Netfilter, cfg.WireGuard, cfg.NoBlackholes = !*masq, agent.Netfilter(*netfilter), *wg, *noBlackholes
	cfg.VXLANVNI, cfg.VXLANPort = uint32(*vni), uint16(*port)
	cfg.NetworkPolicy, cfg.BPFProxy = *netpol, *bpfProxy
	p, err := agent.Plan(ctx, cfg)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(p)
	}
	return agent.WritePlan(out, p)
}
