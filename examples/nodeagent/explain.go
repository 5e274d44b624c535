package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/nodeplane/nodeplane/examples/nodeagent/agent"
	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore"
	"github.com/nodeplane/nodeplane/ipfamily"
)

// explainCmd says whether the cluster file's NetworkPolicies allow a flow
// between two pods, and which tier, policy and rule decide it at each end.
// It reads the file only: no kernel, no running agent.
func explainCmd(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("explain", flag.ContinueOnError)
	ds := fs.String("datastore", "file:/etc/nodeplane/cluster.yaml", `"file:PATH": a YAML cluster file`)
	from := fs.String("from", "", "the source pod, namespace/name")
	to := fs.String("to", "", "the destination pod, namespace/name")
	proto := fs.String("protocol", "TCP", "TCP, UDP or SCTP")
	port := fs.Uint("port", 80, "the destination port")
	family := fs.String("family", "", `"ipv4" or "ipv6": the flow between the pods' addresses of that family; empty: every family both pods have`)
	if err := fs.Parse(args); err != nil {
		return err
	}
	path, ok := strings.CutPrefix(*ds, "file:")
	if !ok {
		return fmt.Errorf(`--datastore must be "file:PATH", not %q`, *ds)
	}
	if *port == 0 || *port > 65535 {
		return fmt.Errorf("--port %d is not a port", *port)
	}
	c, err := datastore.Load(path)
	if err != nil {
		return err
	}
	families := []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6}
	switch strings.ToLower(*family) {
	case "":
	case "ipv4":
		families = families[:1]
	case "ipv6":
		families = families[1:]
	default:
		return fmt.Errorf(`--family must be "ipv4" or "ipv6", not %q`, *family)
	}
	explained := 0
	var errs []error
	for _, f := range families {
		e, err := agent.ExplainFlowOf(c, *from, *to, strings.ToUpper(*proto), uint16(*port), f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		explained++
		if _, err := fmt.Fprintf(out, "%s → %s %s/%d: %s\n", *from, *to, strings.ToUpper(*proto), *port, e); err != nil {
			return err
		}
	}
	if explained == 0 {
		return errors.Join(errs...)
	}
	return nil
}
