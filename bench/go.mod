module github.com/nodeplane/nodeplane/bench

go 1.26.0

// The bench measures the library of this repository, never a released one.
replace github.com/nodeplane/nodeplane => ../

require (
	github.com/cilium/ebpf v0.22.0
	github.com/coreos/go-iptables v0.8.0
	github.com/nodeplane/nodeplane v0.0.0-00010101000000-000000000000
	github.com/stretchr/testify v1.12.1
	github.com/vishvananda/netlink v1.3.1
	golang.org/x/sys v0.50.0
	golang.zx2c4.com/wireguard/wgctrl v0.0.0-20241231184526-a9ab2273dd10
)

require (
	github.com/google/go-cmp v0.7.0 // indirect
	github.com/google/nftables v0.3.0 // indirect
	github.com/mdlayher/genetlink v1.3.2 // indirect
	github.com/mdlayher/netlink v1.7.3-0.20250113171957-fbb4dce95f42 // indirect
	github.com/mdlayher/socket v0.5.1 // indirect
	github.com/vishvananda/netns v0.0.5 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/crypto v0.46.0 // indirect
	golang.org/x/net v0.48.0 // indirect
	golang.org/x/sync v0.20.0 // indirect
	golang.zx2c4.com/wintun v0.0.0-20230126152724-0fa3db229ce2 // indirect
	golang.zx2c4.com/wireguard v0.0.0-20260522210424-ecfc5a8d5446 // indirect
)
