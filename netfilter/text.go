package netfilter

import (
	"fmt"
	"strconv"

	"github.com/nodeplane/nodeplane/internal/textform"
)

// String returns the hook's name, such as "PREROUTING".
func (h Hook) String() string { return string(h) }

// MarshalText returns String's text (encoding.TextMarshaler).
func (h Hook) MarshalText() ([]byte, error) { return []byte(h.String()), nil }

// UnmarshalText sets h to the hook whose String is text, such as "FORWARD"
// (encoding.TextUnmarshaler). Any other text is an error, and h is left as
// it was.
func (h *Hook) UnmarshalText(text []byte) error {
	v, err := textform.Parse(text, HookPrerouting, HookInput, HookForward, HookOutput, HookPostrouting)
	if err == nil {
		*h = v
	}
	return err
}

// MarshalText returns String's text: "src" or "dst" (encoding.TextMarshaler).
func (d Direction) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText sets d to the direction whose String is text: "src" or
// "dst" (encoding.TextUnmarshaler). Any other text is an error, and d is
// left as it was.
func (d *Direction) UnmarshalText(text []byte) error {
	v, err := textform.Parse(text, Src, Dst)
	if err == nil {
		*d = v
	}
	return err
}

// namedProtos are the protocols Proto.String names; it writes every other
// one as its number.
var namedProtos = []Proto{ProtoICMP, ProtoTCP, ProtoUDP, ProtoESP, ProtoAH, ProtoICMPv6, ProtoSCTP, ProtoUDPLite}

// MarshalText returns String's text: a name such as "tcp" or
// "ipv6-icmp", or the number of a protocol without one, such as "47"
// (encoding.TextMarshaler).
func (p Proto) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText sets p to the protocol whose String is text: one of the
// names String gives, or a decimal number from 0 to 255
// (encoding.TextUnmarshaler). Any other text is an error, and p is left as
// it was.
func (p *Proto) UnmarshalText(text []byte) error {
	v, err := textform.Parse(text, namedProtos...)
	if err != nil {
		n, nerr := strconv.ParseUint(string(text), 10, 8)
		if nerr != nil {
			return fmt.Errorf("%w, or a protocol number from 0 to 255", err)
		}
		v = Proto(n)
	}
	*p = v
	return nil
}

// addrTypeText and ctStateText parse what AddrType.String and
// CTState.String write.
var (
	addrTypeText = textform.Flags[AddrType]{Names: addrTypeNames[:], Sep: ","}
	ctStateText  = textform.Flags[CTState]{Names: ctStateNames[:], Sep: ","}
)

// MarshalText returns String's text, such as "UNICAST,LOCAL"
// (encoding.TextMarshaler); unknown bits do not unmarshal.
func (t AddrType) MarshalText() ([]byte, error) { return t.AppendText(nil) }

// UnmarshalText sets t to the address types named in text, such as
// "UNICAST,LOCAL": names as String writes them joined by "," in any order,
// or the empty text for none (encoding.TextUnmarshaler). Any other text is
// an error, and t is left as it was.
func (t *AddrType) UnmarshalText(text []byte) error {
	v, err := addrTypeText.Parse(text)
	if err == nil {
		*t = v
	}
	return err
}

// MarshalText returns String's text, such as "NEW,ESTABLISHED"
// (encoding.TextMarshaler); unknown bits do not unmarshal.
func (s CTState) MarshalText() ([]byte, error) { return s.AppendText(nil) }

// UnmarshalText sets s to the states named in text, such as
// "NEW,ESTABLISHED": names as String writes them joined by "," in any
// order, or the empty text for none (encoding.TextUnmarshaler). Any other
// text is an error, and s is left as it was.
func (s *CTState) UnmarshalText(text []byte) error {
	v, err := ctStateText.Parse(text)
	if err == nil {
		*s = v
	}
	return err
}

// logLevelNames are the syslog names of the levels, LogLevelDefault first.
var logLevelNames = [...]string{"default", "emerg", "alert", "crit", "err", "warning", "notice", "info", "debug"}

// String returns the level's syslog name, such as "warning" or "debug",
// or "default" for LogLevelDefault.
func (l LogLevel) String() string {
	if int(l) < len(logLevelNames) {
		return logLevelNames[l]
	}
	return "LogLevel(" + strconv.Itoa(int(l)) + ")"
}

// MarshalText returns String's text (encoding.TextMarshaler).
func (l LogLevel) MarshalText() ([]byte, error) { return []byte(l.String()), nil }

// UnmarshalText sets l to the level whose String is text, such as "info"
// (encoding.TextUnmarshaler). Any other text is an error, and l is left as
// it was.
func (l *LogLevel) UnmarshalText(text []byte) error {
	v, err := textform.Parse(text, LogLevelDefault, LogLevelEmerg, LogLevelAlert, LogLevelCrit, LogLevelErr,
		LogLevelWarning, LogLevelNotice, LogLevelInfo, LogLevelDebug)
	if err == nil {
		*l = v
	}
	return err
}

// rejectWiths are the RejectWith constants, in order.
var rejectWiths = []RejectWith{RejectPortUnreachable, RejectTCPReset, RejectAdminProhibited, RejectNetUnreachable,
	RejectHostUnreachable, RejectProtoUnreachable, RejectNetProhibited, RejectHostProhibited, RejectNoRoute,
	RejectAddrUnreachable, RejectPolicyFail, RejectRejectRoute}

// MarshalText returns String's text, such as "tcp-reset"
// (encoding.TextMarshaler).
func (w RejectWith) MarshalText() ([]byte, error) { return []byte(w.String()), nil }

// UnmarshalText sets w to the reply whose String is text, such as
// "admin-prohibited" (encoding.TextUnmarshaler). Any other text is an
// error, and w is left as it was.
func (w *RejectWith) UnmarshalText(text []byte) error {
	v, err := textform.Parse(text, rejectWiths...)
	if err == nil {
		*w = v
	}
	return err
}
