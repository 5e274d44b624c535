package plugin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore"
)

func code(err error) uint {
	if e, ok := err.(*types.Error); ok {
		return e.Code
	}
	return 0
}

func TestParseConf(t *testing.T) {
	c, err := ParseConf([]byte(`{"cniVersion":"1.1.0","name":"n","type":"nodeplane","mtu":1400,"mtuFile":"/x",
		"ipam":{"type":"host-local"},"dns":{"nameservers":["10.96.0.10"]}}`))
	require.NoError(t, err)
	require.Equal(t, "n", c.Name)
	require.Equal(t, "host-local", c.IPAM.Type)
	require.Equal(t, 1400, c.MTU)
	require.Equal(t, "/x", c.MTUFile)
	require.Equal(t, []string{"10.96.0.10"}, c.DNS.Nameservers)
	require.Nil(t, c.PrevResult)

	c, err = ParseConf([]byte(`{"cniVersion":"1.0.0","name":"n","type":"nodeplane","ipam":{"type":"host-local"},
		"prevResult":{"cniVersion":"1.0.0","ips":[{"address":"10.0.0.1/32"}]}}`))
	require.NoError(t, err)
	require.NotNil(t, c.PrevResult)

	for conf, want := range map[string]uint{
		`{`: types.ErrDecodingFailure,
		`{"cniVersion":"1.1.0","type":"nodeplane","ipam":{"type":"host-local"}}`:                                     types.ErrInvalidNetworkConfig,
		`{"cniVersion":"1.1.0","name":"n","type":"nodeplane"}`:                                                       types.ErrInvalidNetworkConfig,
		`{"cniVersion":"1.1.0","name":"n","type":"nodeplane","mtu":20,"ipam":{"type":"host-local"}}`:                 types.ErrInvalidNetworkConfig,
		`{"cniVersion":"1.1.0","name":"n","type":"nodeplane","mtu":70000,"ipam":{"type":"host-local"}}`:              types.ErrInvalidNetworkConfig,
		`{"cniVersion":"1.1.0","name":"n","type":"nodeplane","ipam":{"type":"host-local"},"prevResult":{"ips":"x"}}`: types.ErrDecodingFailure,
	} {
		_, err := ParseConf([]byte(conf))
		require.Error(t, err, conf)
		require.Equal(t, want, code(err), "%s: %v", conf, err)
	}
}

func TestLinkMTU(t *testing.T) {
	file := filepath.Join(t.TempDir(), "mtu")
	m, err := (&NetConf{}).linkMTU()
	require.NoError(t, err)
	require.Zero(t, m, "no mtu and no file: the kernel's default")
	m, err = (&NetConf{MTU: 1400, MTUFile: file}).linkMTU()
	require.NoError(t, err)
	require.Equal(t, 1400, m, "mtu wins over the file")
	_, err = (&NetConf{MTUFile: file}).linkMTU()
	require.Equal(t, types.ErrTryAgainLater, code(err), "a missing file: try again later (%v)", err)
	require.NoError(t, os.WriteFile(file, []byte("1450"), 0o644))
	m, err = (&NetConf{MTUFile: file}).linkMTU()
	require.NoError(t, err)
	require.Equal(t, 1450, m)
}

func TestHostInterface(t *testing.T) {
	name, ok, err := hostInterface("IgnoreUnknown=1;K8S_POD_NAMESPACE=demo;K8S_POD_NAME=web-0;K8S_POD_INFRA_CONTAINER_ID=abc")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, datastore.PodInterface("demo", "web-0"), name)

	for _, args := range []string{"", "IgnoreUnknown=1", "IgnoreUnknown=1;K8S_POD_NAME=web-0"} {
		_, ok, err := hostInterface(args)
		require.NoError(t, err, args)
		require.False(t, ok, args)
	}
	_, _, err = hostInterface("K8S_POD_NAMESPACE=demo;K8S_POD_NAME=web-0;OTHER=1")
	require.Equal(t, types.ErrInvalidEnvironmentVariables, code(err), "unknown keys without IgnoreUnknown")
	_, _, err = hostInterface("K8S_POD_NAME")
	require.Error(t, err)
}

func TestAlias(t *testing.T) {
	a := attachment{network: "nodeplane", containerID: "0123abc", ifName: "eth0"}
	s, err := a.alias()
	require.NoError(t, err)
	require.Equal(t, "nodeplane/nodeplane/0123abc/eth0", s)
	back, err := parseAlias(s)
	require.NoError(t, err)
	require.Equal(t, a, back)

	for _, foreign := range []string{"", "nodeplane", "nodeplane/", "nodeplane/n/c", "nodeplane/n//eth0", "nodeplane/n/c/eth0/x", "other/n/c/eth0"} {
		_, err := parseAlias(foreign)
		require.ErrorIs(t, err, errNotOurs, foreign)
	}
	_, err = attachment{network: "n", containerID: strings.Repeat("c", 250), ifName: "eth0"}.alias()
	require.Equal(t, types.ErrInvalidEnvironmentVariables, code(err))
}
