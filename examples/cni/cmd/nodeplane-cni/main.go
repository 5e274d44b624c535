// Command nodeplane-cni is nodeplane's CNI plugin (package
// examples/cni/plugin): a runtime runs it with the CNI environment and a
// network configuration on stdin. Install it as "nodeplane" in the CNI bin
// directory (the reference agent does so with --cni-install).
package main

import "github.com/nodeplane/nodeplane/examples/cni/plugin"

func main() {
	plugin.Main()
}
