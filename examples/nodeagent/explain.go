package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/nodeplane/nodeplane/examples/nodeagent/agent"
	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore"
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
	e, err := agent.ExplainFlow(c, *from, *to, strings.ToUpper(*proto), uint16(*port))
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "%s → %s %s/%d: %s\n", *from, *to, strings.ToUpper(*proto), *port, e)
	return err
}
