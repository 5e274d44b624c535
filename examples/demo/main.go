// Command demo is nodeplane's one-command demo (make demo): three "nodes"
// (network namespaces on a bridge underlay) with two "pods" each, one
// reference agent per node on a cluster file, and checks printed step by
// step: pod↔pod over VXLAN, over WireGuard, pod egress masquerade on iptables
// and then on native nftables (the agents switched with --netfilter
// nftables), an agent restart during a ping, a node removed from the file,
// the cleanup command. It removes everything it made, also on Ctrl-C or
// failure, and exits non-zero if a check fails.
//
//	sudo go run ./demo --agent PATH-TO-nodeagent
//
// It needs root, iproute2, ping, ipset and iptables (conntrack to show the
// masquerade's translation); scripts/demo.sh installs them. Where nft is
// installed, it also lists the agents' nftables table.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	agentBin := flag.String("agent", "", "path to the nodeagent binary (required)")
	resync := flag.Duration("resync", 10*time.Second, "the agents' refresh interval")
	idle := flag.Duration("idle-window", 5*time.Second, "how long the agents' idle CPU is measured")
	services := flag.Int("services", 1, "services in the cluster file (to measure the agents with many)")
	flag.Parse()
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "demo: needs root (it creates network namespaces): run `sudo make demo`")
		os.Exit(2)
	}
	if *agentBin == "" {
		fmt.Fprintln(os.Stderr, "demo: --agent is required (make demo builds it)")
		os.Exit(2)
	}
	for _, c := range []string{"ip", "ping", "ipset", "iptables"} {
		if _, err := exec.LookPath(c); err != nil {
			fmt.Fprintf(os.Stderr, "demo: %s not found (scripts/demo.sh installs it)\n", c)
			os.Exit(2)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s := &Scenario{Agent: *agentBin, Out: os.Stdout, Resync: *resync, Services: *services, IdleWindow: *idle}
	err := s.Run(ctx)
	switch {
	case err == nil:
	case errors.Is(err, errCheck):
		os.Exit(1)
	default:
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}
