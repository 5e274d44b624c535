package wireguard

import (
	"bufio"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// The userspace device is configured in process through the cross-platform
// configuration protocol (the "UAPI" that wg(8) speaks over the control
// socket): key=value lines, keys in hex. encodeUAPI writes a set operation,
// parseUAPI reads a get operation's answer.

func encodeUAPI(w io.Writer, cfg DeviceConfig) error {
	bw := bufio.NewWriter(w)
	if cfg.PrivateKey != nil {
		fmt.Fprintf(bw, "private_key=%s\n", hexKey(*cfg.PrivateKey))
	}
	if cfg.ListenPort != nil {
		fmt.Fprintf(bw, "listen_port=%d\n", *cfg.ListenPort)
	}
	if cfg.FirewallMark != nil {
		fmt.Fprintf(bw, "fwmark=%d\n", *cfg.FirewallMark)
	}
	if cfg.ReplacePeers {
		bw.WriteString("replace_peers=true\n")
	}
	for i := range cfg.Peers {
		p := &cfg.Peers[i]
		fmt.Fprintf(bw, "public_key=%s\n", hexKey(p.PublicKey))
		if p.Remove {
			bw.WriteString("remove=true\n")
			continue
		}
		if p.UpdateOnly {
			bw.WriteString("update_only=true\n")
		}
		if p.Endpoint.IsValid() {
			fmt.Fprintf(bw, "endpoint=%s\n", p.Endpoint)
		}
		if p.PersistentKeepalive != nil {
			fmt.Fprintf(bw, "persistent_keepalive_interval=%d\n", int(p.PersistentKeepalive.Seconds()))
		}
		if p.ReplaceAllowedIPs {
			bw.WriteString("replace_allowed_ips=true\n")
		}
		for _, a := range p.AllowedIPs {
			fmt.Fprintf(bw, "allowed_ip=%s\n", a)
		}
	}
	return bw.Flush()
}

func parseUAPI(r io.Reader) (DeviceState, error) {
	var st DeviceState
	var peer *PeerState
	var hsSec, hsNsec int64
	flush := func() {
		if peer != nil {
			if hsSec != 0 || hsNsec != 0 {
				peer.LastHandshake = time.Unix(hsSec, hsNsec)
			}
			st.Peers = append(st.Peers, *peer)
		}
		peer, hsSec, hsNsec = nil, 0, 0
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			break
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return DeviceState{}, fmt.Errorf("%w: malformed UAPI line %q", ErrDevice, line)
		}
		var err error
		switch k {
		case "errno":
			if v != "0" {
				return DeviceState{}, fmt.Errorf("%w: errno=%s", ErrDevice, v)
			}
		case "private_key":
			var b [KeyLen]byte
			if b, err = parseHexKey(v); err == nil {
				st.PrivateKey = PrivateKey(b)
				st.PublicKey = st.PrivateKey.Public()
			}
		case "listen_port":
			st.ListenPort, err = strconv.Atoi(v)
		case "fwmark":
			var m uint64
			m, err = strconv.ParseUint(v, 10, 32)
			st.FirewallMark = uint32(m)
		case "public_key":
			flush()
			var b [KeyLen]byte
			if b, err = parseHexKey(v); err == nil {
				peer = &PeerState{PublicKey: PublicKey(b)}
			}
		default:
			if peer == nil {
				continue // a device key this package does not use
			}
			switch k {
			case "endpoint":
				peer.Endpoint, err = netip.ParseAddrPort(v)
			case "last_handshake_time_sec":
				hsSec, err = strconv.ParseInt(v, 10, 64)
			case "last_handshake_time_nsec":
				hsNsec, err = strconv.ParseInt(v, 10, 64)
			case "tx_bytes":
				peer.TransmitBytes, err = strconv.ParseInt(v, 10, 64)
			case "rx_bytes":
				peer.ReceiveBytes, err = strconv.ParseInt(v, 10, 64)
			case "persistent_keepalive_interval":
				var s int
				s, err = strconv.Atoi(v)
				peer.PersistentKeepalive = time.Duration(s) * time.Second
			case "allowed_ip":
				var p netip.Prefix
				if p, err = netip.ParsePrefix(v); err == nil {
					peer.AllowedIPs = append(peer.AllowedIPs, p)
				}
			}
		}
		if err != nil {
			return DeviceState{}, fmt.Errorf("%w: UAPI key %s: %w", ErrDevice, k, err)
		}
	}
	if err := sc.Err(); err != nil {
		return DeviceState{}, fmt.Errorf("%w: %w", ErrDevice, err)
	}
	flush()
	return st, nil
}
