package iptablesfake

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/nodeplane/nodeplane/ipfamily"
)

// spec is a rule in canonical form: the arguments after "-A CHAIN", as
// iptables-save would print them.
type spec struct {
	args   []string
	text   string // args joined and quoted as iptables-save prints them
	target string // the -j or -g argument
	isGoto bool
}

// standardTargets are built into iptables; everything else after -j must be
// a chain of the table or a known extension target.
var standardTargets = map[string]bool{"ACCEPT": true, "DROP": true, "RETURN": true, "QUEUE": true}

// extensionTargets are the extension targets the fake accepts after -j.
var extensionTargets = map[string]bool{
	"MARK": true, "CONNMARK": true, "MASQUERADE": true, "SNAT": true, "DNAT": true,
	"REDIRECT": true, "LOG": true, "NFLOG": true, "REJECT": true, "CT": true,
	"NOTRACK": true, "TPROXY": true, "TCPMSS": true, "DSCP": true, "TOS": true,
	"CLASSIFY": true, "SET": true, "TRACE": true, "NFQUEUE": true, "AUDIT": true,
	"CHECKSUM": true, "TTL": true, "HL": true, "SECMARK": true, "CONNSECMARK": true,
	"NETMAP": true, "TEE": true, "IDLETIMER": true, "LED": true, "SYNPROXY": true,
}

// headerOrder is the order in which iptables-save prints the criteria kept
// in the rule's IP header.
var headerOrder = []string{"-s", "-d", "-i", "-o", "-p", "-f"}

// headerAlias maps every spelling of a header option to its short form.
var headerAlias = map[string]string{
	"-s": "-s", "--source": "-s", "--src": "-s",
	"-d": "-d", "--destination": "-d", "--dst": "-d",
	"-i": "-i", "--in-interface": "-i",
	"-o": "-o", "--out-interface": "-o",
	"-p": "-p", "--protocol": "-p",
	"-f": "-f", "--fragment": "-f",
}

// protoOptions are the options of the implicit protocol matches that
// iptables loads when -p is given and one of them follows without -m.
var protoOptions = map[string]map[string]bool{
	"tcp":  {"--sport": true, "--dport": true, "--source-port": true, "--destination-port": true, "--tcp-flags": true, "--syn": true, "--tcp-option": true},
	"udp":  {"--sport": true, "--dport": true, "--source-port": true, "--destination-port": true},
	"sctp": {"--sport": true, "--dport": true, "--source-port": true, "--destination-port": true, "--chunk-types": true},
	"icmp": {"--icmp-type": true},
	"icmp6": {
		"--icmpv6-type": true,
	},
}

// matchOptions are the options of the matches the fake knows; an option
// met inside one of these matches that it does not own starts the implicit
// protocol match. Options of unknown matches all belong to them.
var matchOptions = map[string]map[string]bool{
	"comment":   {"--comment": true},
	"mark":      {"--mark": true},
	"conntrack": {"--ctstate": true, "--ctstatus": true, "--ctproto": true, "--ctorigsrc": true, "--ctorigdst": true, "--ctreplsrc": true, "--ctrepldst": true, "--ctorigsrcport": true, "--ctorigdstport": true, "--ctreplsrcport": true, "--ctrepldstport": true, "--ctexpire": true, "--ctdir": true},
	"set":       {"--match-set": true, "--return-nomatch": true, "--update-counters": true, "--update-subcounters": true, "--packets-eq": true, "--packets-lt": true, "--packets-gt": true, "--bytes-eq": true, "--bytes-lt": true, "--bytes-gt": true},
	"multiport": {"--dports": true, "--sports": true, "--ports": true, "--destination-ports": true, "--source-ports": true},
	"addrtype":  {"--src-type": true, "--dst-type": true, "--limit-iface-in": true, "--limit-iface-out": true},
	"tcp":       protoOptions["tcp"],
	"udp":       protoOptions["udp"],
	"sctp":      protoOptions["sctp"],
	"icmp":      protoOptions["icmp"],
	"icmp6":     protoOptions["icmp6"],
}

// optionAlias maps long option spellings to the ones iptables-save prints.
var optionAlias = map[string]string{
	"--source-port": "--sport", "--destination-port": "--dport",
	"--source-ports": "--sports", "--destination-ports": "--dports",
}

// ctStateOrder is the order in which iptables-save prints conntrack states.
var ctStateOrder = []string{"INVALID", "NEW", "RELATED", "ESTABLISHED", "UNTRACKED", "SNAT", "DNAT"}

// icmpTypes and icmp6Types map the type names iptables-save prints as
// numbers.
var icmpTypes = map[string]string{
	"echo-reply": "0", "pong": "0", "destination-unreachable": "3", "source-quench": "4",
	"redirect": "5", "echo-request": "8", "ping": "8", "router-advertisement": "9",
	"router-solicitation": "10", "time-exceeded": "11", "ttl-exceeded": "11",
	"parameter-problem": "12", "timestamp-request": "13", "timestamp-reply": "14",
	"network-unreachable": "3/0", "host-unreachable": "3/1", "protocol-unreachable": "3/2",
	"port-unreachable": "3/3", "fragmentation-needed": "3/4",
}
var icmp6Types = map[string]string{
	"destination-unreachable": "1", "packet-too-big": "2", "time-exceeded": "3", "ttl-exceeded": "3",
	"parameter-problem": "4", "echo-request": "128", "ping": "128", "echo-reply": "129", "pong": "129",
	"router-solicitation": "133", "router-advertisement": "134", "neighbour-solicitation": "135",
	"neighbor-solicitation": "135", "neighbour-advertisement": "136", "neighbor-advertisement": "136",
	"redirect": "137", "no-route": "1/0", "communication-prohibited": "1/1", "address-unreachable": "1/3",
	"port-unreachable": "1/4",
}

// protoNames maps protocol numbers and aliases to the names iptables-save
// prints.
var protoNames = map[string]string{
	"6": "tcp", "17": "udp", "1": "icmp", "132": "sctp", "58": "ipv6-icmp", "icmpv6": "ipv6-icmp",
	"47": "gre", "50": "esp", "51": "ah", "4": "ipencap", "41": "ipv6", "136": "udplite",
}

// quotedOptions are the options whose value iptables-save prints with
// xtables_save_string: quoted unless it is only letters, digits, "_" and
// "-".
var quotedOptions = map[string]bool{"--comment": true, "--log-prefix": true, "--nflog-prefix": true, "--string": true, "--helper": true}

// canonical turns rule arguments (after "-A CHAIN") into the form
// iptables-save prints for the rules nodeplane emits and the common
// hand-written ones: header criteria first and normalised (addresses
// masked with a prefix length, protocol names), the implicit protocol match
// made explicit, option aliases, conntrack states, marks and ICMP types
// normalised, REJECT's default made explicit. Anything it does not know is
// kept as given. It checks what the rule names outside itself, as iptables
// does when it parses a rule: -j needs a built-in target, a known extension
// or an existing chain, -g an existing chain (chainExists), and the set of
// a set match must be one the rule can match (setUsable returns why not).
func canonical(args []string, v ipfamily.Family, chainExists func(string) bool, setUsable func(string) error) (spec, error) {
	type headerItem struct {
		neg   bool
		value string
	}
	header := map[string]headerItem{}
	var rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		neg := false
		if a == "!" && i+1 < len(args) {
			if _, ok := headerAlias[args[i+1]]; ok {
				neg = true
				i++
				a = args[i]
			}
		}
		opt, ok := headerAlias[a]
		if !ok {
			if strings.HasPrefix(a, "-t") && (a == "-t" || a == "--table") {
				return spec{}, fmt.Errorf("the -t option cannot be used inside a rule")
			}
			rest = append(rest, a)
			continue
		}
		if _, dup := header[opt]; dup {
			return spec{}, fmt.Errorf("multiple %s flags not allowed", opt)
		}
		if opt == "-f" {
			header[opt] = headerItem{neg: neg}
			continue
		}
		if i+1 >= len(args) {
			return spec{}, fmt.Errorf("option %q requires an argument", a)
		}
		i++
		val := args[i]
		switch opt {
		case "-s", "-d":
			p, err := parseNet(val, v)
			if err != nil {
				return spec{}, err
			}
			val = p
		case "-p":
			val = strings.ToLower(val)
			if n, ok := protoNames[val]; ok {
				val = n
			}
			if val == "0" {
				val = "all"
			}
		}
		header[opt] = headerItem{neg: neg, value: val}
	}
	var out []string
	for _, opt := range headerOrder {
		h, ok := header[opt]
		if !ok || (opt == "-p" && h.value == "all" && !h.neg) {
			continue
		}
		if h.neg {
			out = append(out, "!")
		}
		out = append(out, opt)
		if opt != "-f" {
			out = append(out, h.value)
		}
	}
	proto := header["-p"].value
	implicit := proto
	if proto == "ipv6-icmp" {
		implicit = "icmp6"
	}

	var sp spec
	match := ""
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		switch {
		case a == "-m" || a == "--match":
			if i+1 >= len(rest) {
				return spec{}, fmt.Errorf("-m requires an argument")
			}
			i++
			match = rest[i]
			out = append(out, "-m", match)
			continue
		case a == "-j" || a == "--jump" || a == "-g" || a == "--goto":
			if i+1 >= len(rest) {
				return spec{}, fmt.Errorf("%s requires an argument", a)
			}
			sp.target = rest[i+1]
			sp.isGoto = a == "-g" || a == "--goto"
			tail, err := canonicalTarget(rest[i+1:], sp.isGoto, v, chainExists)
			if err != nil {
				return spec{}, err
			}
			if sp.isGoto {
				out = append(out, "-g")
			} else {
				out = append(out, "-j")
			}
			out = append(out, tail...)
			i = len(rest)
			continue
		}
		// An option, possibly negated, with its values up to the next option.
		neg := false
		if a == "!" && i+1 < len(rest) {
			neg = true
			i++
			a = rest[i]
		}
		if !strings.HasPrefix(a, "-") {
			return spec{}, fmt.Errorf("bad argument %q", a)
		}
		if owned := matchOptions[match]; (match == "" || owned != nil && !owned[a]) && protoOptions[implicit][a] {
			match = implicit
			out = append(out, "-m", implicit)
		}
		if alias, ok := optionAlias[a]; ok {
			a = alias
		}
		var vals []string
		for i+1 < len(rest) && !isOptionStart(rest, i+1) {
			i++
			vals = append(vals, rest[i])
		}
		if match == "set" && a == "--match-set" && len(vals) > 0 {
			if err := setUsable(vals[0]); err != nil {
				return spec{}, err
			}
		}
		vals = canonicalValues(match, a, vals, v)
		if neg {
			out = append(out, "!")
		}
		if a == "--syn" {
			out = append(out, "--tcp-flags", "FIN,SYN,RST,ACK", "SYN")
			continue
		}
		out = append(out, a)
		out = append(out, vals...)
	}
	sp.args = out
	sp.text = saveText(out)
	return sp, nil
}

// isOptionStart reports whether rest[i] starts a new option (and is not a
// value such as a negative number, which iptables does not take anyway).
func isOptionStart(rest []string, i int) bool {
	a := rest[i]
	if a == "!" {
		return i+1 < len(rest) && strings.HasPrefix(rest[i+1], "-")
	}
	return strings.HasPrefix(a, "-") && len(a) > 1
}

// canonicalValues normalises the values of one match option.
func canonicalValues(match, opt string, vals []string, v ipfamily.Family) []string {
	switch {
	case opt == "--ctstate" && len(vals) == 1:
		states := strings.Split(strings.ToUpper(vals[0]), ",")
		slices.SortStableFunc(states, func(a, b string) int { return stateRank(a) - stateRank(b) })
		return []string{strings.Join(slices.Compact(states), ",")}
	case opt == "--mark" && len(vals) == 1:
		return []string{hexMark(vals[0], false)}
	case opt == "--icmp-type" && len(vals) == 1:
		if n, ok := icmpTypes[vals[0]]; ok {
			return []string{n}
		}
	case opt == "--icmpv6-type" && len(vals) == 1:
		if n, ok := icmp6Types[vals[0]]; ok {
			return []string{n}
		}
	}
	return vals
}

func stateRank(s string) int {
	if i := slices.Index(ctStateOrder, s); i >= 0 {
		return i
	}
	return len(ctStateOrder)
}

// canonicalTarget normalises "-j TARGET opts…" (tail starts at TARGET).
func canonicalTarget(tail []string, isGoto bool, v ipfamily.Family, chainExists func(string) bool) ([]string, error) {
	name := tail[0]
	opts := append([]string(nil), tail[1:]...)
	switch {
	case isGoto:
		if !chainExists(name) {
			return nil, paramProblem("goto '%s' is not a chain", name)
		}
		if len(opts) > 0 {
			return nil, fmt.Errorf("unknown arguments after -g %s", name)
		}
	case standardTargets[name] || chainExists(name):
		if len(opts) > 0 {
			return nil, fmt.Errorf("unknown arguments after -j %s", name)
		}
	case extensionTargets[name]:
	default:
		return nil, paramProblem("Couldn't load target `%s':No such file or directory\n", name)
	}
	switch name {
	case "MARK":
		if len(opts) == 2 {
			switch opts[0] {
			case "--set-mark":
				opts = []string{"--set-xmark", hexMark(opts[1], true)}
			case "--set-xmark":
				opts = []string{"--set-xmark", hexMark(opts[1], true)}
			case "--or-mark":
				m := hexMark(opts[1], false)
				opts = []string{"--set-xmark", m + "/" + m}
			}
		}
	case "REJECT":
		if len(opts) == 0 {
			if v == ipfamily.IPv6 {
				opts = []string{"--reject-with", "icmp6-port-unreachable"}
			} else {
				opts = []string{"--reject-with", "icmp-port-unreachable"}
			}
		}
	}
	return append([]string{name}, opts...), nil
}

// hexMark prints a mark (or mark/mask) in hex; a missing mask is the full
// mask when full is set.
func hexMark(s string, full bool) string {
	value, mask, hasMask := strings.Cut(s, "/")
	num := func(x string) string {
		n, err := strconv.ParseUint(x, 0, 32)
		if err != nil {
			return x
		}
		return fmt.Sprintf("%#x", n)
	}
	switch {
	case hasMask:
		return num(value) + "/" + num(mask)
	case full:
		return num(value) + "/0xffffffff"
	}
	return num(value)
}

// parseNet parses an address or prefix for -s/-d and prints it as
// iptables-save does: the network address with its prefix length.
func parseNet(s string, v ipfamily.Family) (string, error) {
	var p netip.Prefix
	if strings.Contains(s, "/") {
		var err error
		if p, err = netip.ParsePrefix(s); err != nil {
			return "", fmt.Errorf("host/network `%s' not found", s)
		}
	} else {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return "", fmt.Errorf("host/network `%s' not found", s)
		}
		p = netip.PrefixFrom(a, a.BitLen())
	}
	if p.Addr().Is4() != (v == ipfamily.IPv4) || p.Addr().Is4In6() {
		return "", fmt.Errorf("host/network `%s' is not an %v address", s, v)
	}
	return p.Masked().String(), nil
}

// saveText joins canonical arguments as iptables-save prints them.
func saveText(args []string) string {
	var b strings.Builder
	for i, a := range args {
		if i > 0 {
			b.WriteByte(' ')
		}
		if i > 0 && quotedOptions[args[i-1]] {
			b.WriteString(saveString(a))
			continue
		}
		b.WriteString(a)
	}
	return b.String()
}

// saveString prints a string value the way xtables_save_string does.
func saveString(s string) string {
	plain := s != ""
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			plain = false
			break
		}
	}
	if plain {
		return s
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '"' || c == '\\' || c == '\'' {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	b.WriteByte('"')
	return b.String()
}

// tokenize splits a restore input line into arguments the way
// iptables-restore does: blanks separate, double quotes group, and inside
// quotes a backslash escapes the next character.
func tokenize(line string) ([]string, error) {
	var out []string
	var cur strings.Builder
	inQuote, escaped, have := false, false, false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case inQuote && escaped:
			cur.WriteByte(c)
			escaped = false
		case inQuote && c == '\\':
			escaped = true
		case inQuote && c == '"':
			inQuote = false
		case inQuote:
			cur.WriteByte(c)
		case c == '"':
			inQuote, have = true, true
		case c == ' ' || c == '\t' || c == '\r':
			if have {
				out = append(out, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteByte(c)
			have = true
		}
	}
	if inQuote {
		return nil, fmt.Errorf("unterminated quoted string")
	}
	if have {
		out = append(out, cur.String())
	}
	return out, nil
}
