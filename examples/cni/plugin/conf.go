package plugin

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore"
	"github.com/nodeplane/nodeplane/mtu"
)

// Type is the plugin's type in a network configuration, and the name of
// its binary in the CNI bin directory.
const Type = "nodeplane"

// The gateways of a pod's default routes. Neither is assigned anywhere: a
// permanent neighbour entry in the pod resolves each to the host side's MAC.
var (
	// Gateway4 is the IPv4 default route's gateway, reached onlink.
	Gateway4 = netip.MustParseAddr("169.254.1.1")
	// Gateway6 is the IPv6 default route's gateway, a link-local address.
	Gateway6 = netip.MustParseAddr("fe80::1")
)

// HostMAC is the MAC of every host-side veth. Set explicitly at creation,
// it is one that udev's MAC address policy leaves alone, so the pod's
// neighbour entries never go stale.
var HostMAC = net.HardwareAddr{0xee, 0xee, 0xee, 0xee, 0xee, 0xee}

// aliasPrefix starts the alias of every host-side veth the plugin makes.
const aliasPrefix = "nodeplane/"

// maxAlias is the longest alias the kernel keeps (IFALIASZ less the NUL).
const maxAlias = 255

// Versions are the CNI spec versions the plugin speaks.
var Versions = version.PluginSupports("1.0.0", "1.1.0")

// NetConf is the plugin's network configuration: the standard fields and
// its own.
type NetConf struct {
	types.PluginConf
	// MTU is the MTU of both veth ends; 0 means MTUFile's, or the kernel's
	// default when there is no MTUFile either.
	MTU int `json:"mtu,omitempty"`
	// MTUFile is a file holding the MTU in decimal, as the agent writes it
	// (STATE_DIR/mtu); used when MTU is 0.
	MTUFile string `json:"mtuFile,omitempty"`
}

// ParseConf decodes and validates a network configuration: it needs a name
// and an IPAM type; a given MTU is within the kernel's bounds; a prevResult
// is parsed into PrevResult.
func ParseConf(stdin []byte) (*NetConf, error) {
	var c NetConf
	if err := json.Unmarshal(stdin, &c); err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, "cannot decode the network configuration", err.Error())
	}
	if c.Name == "" {
		return nil, types.NewError(types.ErrInvalidNetworkConfig, "the network configuration has no name", "")
	}
	if c.IPAM.Type == "" {
		return nil, types.NewError(types.ErrInvalidNetworkConfig, "the network configuration has no ipam type", "the plugin delegates addresses to an IPAM plugin such as host-local")
	}
	if c.MTU != 0 && (c.MTU < mtu.MinMTU || c.MTU > mtu.MaxMTU) {
		return nil, types.NewError(types.ErrInvalidNetworkConfig, fmt.Sprintf("mtu %d is outside %d–%d", c.MTU, mtu.MinMTU, mtu.MaxMTU), "")
	}
	if err := version.ParsePrevResult(&c.PluginConf); err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, "cannot parse prevResult", err.Error())
	}
	return &c, nil
}

// linkMTU returns the MTU to give both veth ends: MTU, else MTUFile's
// (ErrTryAgainLater while the file cannot be read: the agent has not
// written it yet), else 0, the kernel's default.
func (c *NetConf) linkMTU() (int, error) {
	switch {
	case c.MTU != 0:
		return c.MTU, nil
	case c.MTUFile != "":
		m, err := mtu.ReadFile(c.MTUFile)
		if err != nil {
			return 0, types.NewError(types.ErrTryAgainLater, "the pod MTU is not known yet (is the node agent running?)", err.Error())
		}
		return m, nil
	}
	return 0, nil
}

// k8sArgs are the CNI_ARGS a Kubernetes runtime passes; the field names are
// the keys.
type k8sArgs struct {
	types.CommonArgs
	K8S_POD_NAMESPACE types.UnmarshallableString
	K8S_POD_NAME      types.UnmarshallableString
}

// hostInterface returns the host-side interface name of the pod CNI_ARGS
// names, and false when they name none.
func hostInterface(cniArgs string) (string, bool, error) {
	var a k8sArgs
	if err := types.LoadArgs(cniArgs, &a); err != nil {
		return "", false, types.NewError(types.ErrInvalidEnvironmentVariables, "cannot parse CNI_ARGS", err.Error())
	}
	if a.K8S_POD_NAMESPACE == "" || a.K8S_POD_NAME == "" {
		return "", false, nil
	}
	return datastore.PodInterface(string(a.K8S_POD_NAMESPACE), string(a.K8S_POD_NAME)), true, nil
}

// attachment is what the runtime knows an attachment by.
type attachment struct {
	network, containerID, ifName string
}

// alias returns the ownership mark of the attachment's host-side veth:
// "nodeplane/NETWORK/CONTAINERID/IFNAME". None of the three may hold a
// slash (the CNI conventions forbid it in each).
func (a attachment) alias() (string, error) {
	s := aliasPrefix + a.network + "/" + a.containerID + "/" + a.ifName
	if len(s) > maxAlias {
		return "", types.NewError(types.ErrInvalidEnvironmentVariables,
			fmt.Sprintf("network name and container ID are too long for an interface alias (%d bytes, at most %d)", len(s), maxAlias), "")
	}
	return s, nil
}

// errNotOurs is returned by parseAlias for an alias the plugin did not set.
var errNotOurs = errors.New("not an alias of the plugin's")

// parseAlias returns the attachment whose mark alias is.
func parseAlias(alias string) (attachment, error) {
	rest, ok := strings.CutPrefix(alias, aliasPrefix)
	if !ok {
		return attachment{}, errNotOurs
	}
	f := strings.Split(rest, "/")
	if len(f) != 3 || f[0] == "" || f[1] == "" || f[2] == "" {
		return attachment{}, errNotOurs
	}
	return attachment{network: f[0], containerID: f[1], ifName: f[2]}, nil
}
