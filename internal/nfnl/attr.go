package nfnl

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrMalformed reports a message or attribute that does not parse.
var ErrMalformed = errors.New("malformed netlink message")

var (
	be = binary.BigEndian
	ne = binary.NativeEndian
)

// align rounds n up to the attribute alignment.
func align(n int) int { return (n + AttrAlign - 1) &^ (AttrAlign - 1) }

// Writer appends netlink messages to B. The zero Writer is ready to use;
// Reset keeps B's room.
type Writer struct {
	// B holds what was written.
	B []byte
}

// Reset empties the buffer.
func (w *Writer) Reset() { w.B = w.B[:0] }

// Len is the length of what was written.
func (w *Writer) Len() int { return len(w.B) }

// Begin starts a message of type typ with flags, sequence number seq and
// an nfgenmsg of family and resource id resID, and returns its offset for
// End.
func (w *Writer) Begin(typ, flags uint16, seq uint32, family uint8, resID uint16) int {
	start := len(w.B)
	w.B = append(w.B, make([]byte, HdrLen+GenLen)...)
	h := w.B[start:]
	ne.PutUint16(h[4:], typ)
	ne.PutUint16(h[6:], flags)
	ne.PutUint32(h[8:], seq)
	h[16] = family
	h[17] = NFNetlinkV0
	be.PutUint16(h[18:], resID)
	return start
}

// BeginRaw starts a message without an nfgenmsg (NLMSG_ERROR, NLMSG_DONE).
func (w *Writer) BeginRaw(typ, flags uint16, seq, pid uint32) int {
	start := len(w.B)
	w.B = append(w.B, make([]byte, HdrLen)...)
	h := w.B[start:]
	ne.PutUint16(h[4:], typ)
	ne.PutUint16(h[6:], flags)
	ne.PutUint32(h[8:], seq)
	ne.PutUint32(h[12:], pid)
	return start
}

// End sets the length of the message started at start.
func (w *Writer) End(start int) {
	ne.PutUint32(w.B[start:], uint32(len(w.B)-start))
}

// attr appends an attribute header for n bytes of payload and returns
// where the payload goes.
func (w *Writer) attr(t uint16, n int) int {
	start := len(w.B)
	total := align(4 + n)
	w.B = append(w.B, make([]byte, total)...)
	ne.PutUint16(w.B[start:], uint16(4+n))
	ne.PutUint16(w.B[start+2:], t)
	return start + 4
}

// Str appends a NUL-terminated string attribute.
func (w *Writer) Str(t uint16, s string) {
	p := w.attr(t, len(s)+1)
	copy(w.B[p:], s)
}

// U32 appends a big-endian 32-bit attribute.
func (w *Writer) U32(t uint16, v uint32) {
	p := w.attr(t, 4)
	be.PutUint32(w.B[p:], v)
}

// U64 appends a big-endian 64-bit attribute.
func (w *Writer) U64(t uint16, v uint64) {
	p := w.attr(t, 8)
	be.PutUint64(w.B[p:], v)
}

// Bytes appends a binary attribute.
func (w *Writer) Bytes(t uint16, v []byte) { bytesAttr(w, t, v) }

// bytesAttr appends a binary attribute held in a string or a slice.
func bytesAttr[S string | []byte](w *Writer, t uint16, v S) {
	p := w.attr(t, len(v))
	copy(w.B[p:], v)
}

// Raw appends bytes that are already attributes (aligned).
func (w *Writer) Raw(v []byte) { w.B = append(w.B, v...) }

// Open starts a nested attribute of type t and returns its offset for
// Close.
func (w *Writer) Open(t uint16) int {
	start := len(w.B)
	w.B = append(w.B, 0, 0, 0, 0)
	ne.PutUint16(w.B[start+2:], t|NestedFlag)
	return start
}

// Close sets the length of the nested attribute started at start.
func (w *Writer) Close(start int) {
	ne.PutUint16(w.B[start:], uint16(len(w.B)-start))
}

// NestLen is the length so far of the nested attribute started at start.
func (w *Writer) NestLen(start int) int { return len(w.B) - start }

// Truncate drops what was written from n on.
func (w *Writer) Truncate(n int) { w.B = w.B[:n] }

// Attrs iterates over the attributes of b:
//
//	for a := nfnl.NewAttrs(b); a.Next(); { switch a.Type() { … } }
//	if err := a.Err(); err != nil { … }
type Attrs struct {
	b   []byte
	t   uint16
	v   []byte
	err error
}

// NewAttrs returns an iterator over the attributes in b.
func NewAttrs(b []byte) Attrs { return Attrs{b: b} }

// Next moves to the next attribute; false at the end or on an error.
func (a *Attrs) Next() bool {
	if a.err != nil || len(a.b) == 0 {
		return false
	}
	if len(a.b) < 4 {
		a.err = fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(a.b))
		return false
	}
	n := int(ne.Uint16(a.b))
	if n < 4 || n > len(a.b) {
		a.err = fmt.Errorf("%w: attribute length %d of %d", ErrMalformed, n, len(a.b))
		return false
	}
	a.t = ne.Uint16(a.b[2:]) & TypeMask
	a.v = a.b[4:n]
	if m := align(n); m < len(a.b) {
		a.b = a.b[m:]
	} else {
		a.b = nil
	}
	return true
}

// Type is the current attribute's type, without the nested and byte-order
// flags.
func (a *Attrs) Type() uint16 { return a.t }

// Value is the current attribute's payload (a sub-slice of the input).
func (a *Attrs) Value() []byte { return a.v }

// Err is the first parse error.
func (a *Attrs) Err() error { return a.err }

// Str is the payload as a string without its NUL terminator.
func (a *Attrs) Str() string {
	v := a.v
	for i, c := range v {
		if c == 0 {
			v = v[:i]
			break
		}
	}
	return string(v)
}

// U32 is the payload as a big-endian 32-bit number (0 if too short).
func (a *Attrs) U32() uint32 {
	if len(a.v) < 4 {
		a.fail("32-bit")
		return 0
	}
	return be.Uint32(a.v)
}

// U64 is the payload as a big-endian 64-bit number (0 if too short).
func (a *Attrs) U64() uint64 {
	if len(a.v) < 8 {
		a.fail("64-bit")
		return 0
	}
	return be.Uint64(a.v)
}

func (a *Attrs) fail(what string) {
	if a.err == nil {
		a.err = fmt.Errorf("%w: attribute %d too short for a %s value", ErrMalformed, a.t, what)
	}
}

// Msg is one netlink message of a datagram.
type Msg struct {
	// Type, Flags, Seq and PID are the header's fields.
	Type, Flags uint16
	Seq, PID    uint32
	// Family and ResID are the nfgenmsg's, for nf_tables messages.
	Family uint8
	ResID  uint16
	// Data is the payload after the header (and after the nfgenmsg for an
	// nf_tables message: the attributes).
	Data []byte
	// Raw is the whole message.
	Raw []byte
}

// IsNFT reports whether m is an nf_tables message (or a batch marker),
// which carries an nfgenmsg.
func (m *Msg) IsNFT() bool {
	return m.Type>>8 == SubsysNFTables || m.Type == BatchBegin || m.Type == BatchEnd
}

// ForEachMsg calls fn for each message of datagram b, in order, stopping
// at fn's first error. The messages' slices point into b.
func ForEachMsg(b []byte, fn func(m *Msg) error) error {
	var m Msg
	for len(b) > 0 {
		if len(b) < HdrLen {
			return fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(b))
		}
		n := int(ne.Uint32(b))
		if n < HdrLen || n > len(b) {
			return fmt.Errorf("%w: message length %d of %d", ErrMalformed, n, len(b))
		}
		m = Msg{Type: ne.Uint16(b[4:]), Flags: ne.Uint16(b[6:]), Seq: ne.Uint32(b[8:]), PID: ne.Uint32(b[12:]), Raw: b[:n], Data: b[HdrLen:n]}
		if m.IsNFT() {
			if n < HdrLen+GenLen {
				return fmt.Errorf("%w: nf_tables message of %d bytes", ErrMalformed, n)
			}
			m.Family, m.ResID, m.Data = b[16], be.Uint16(b[18:]), b[HdrLen+GenLen:n]
		}
		if err := fn(&m); err != nil {
			return err
		}
		if a := align(n); a < len(b) {
			b = b[a:]
		} else {
			b = nil
		}
	}
	return nil
}

// NLError is a parsed NLMSG_ERROR: the errno (0 for an acknowledgement),
// the header of the request it answers and, when the kernel gave them, the
// offset of the offending attribute in that request and a message.
type NLError struct {
	Errno  int32 // negative errno, or 0
	Seq    uint32
	Type   uint16
	Offset uint32 // 0: none
	Text   string
}

// ParseError parses the payload of an NLMSG_ERROR message with the header
// flags of that message.
func ParseError(flags uint16, data []byte) (NLError, error) {
	if len(data) < 4+HdrLen {
		return NLError{}, fmt.Errorf("%w: error message of %d bytes", ErrMalformed, len(data))
	}
	e := NLError{Errno: int32(ne.Uint32(data)), Type: ne.Uint16(data[8:]), Seq: ne.Uint32(data[12:])}
	if flags&FlagAckTLVs == 0 {
		return e, nil
	}
	rest := data[4+HdrLen:]
	if flags&FlagCapped == 0 {
		n := int(ne.Uint32(data[4:]))
		if n < HdrLen || align(n) > len(data)-4 {
			return e, nil
		}
		rest = data[4+align(n):]
	}
	for a := NewAttrs(rest); a.Next(); {
		switch a.Type() {
		case ErrAttrMsg:
			e.Text = a.Str()
		case ErrAttrOffs:
			if len(a.Value()) >= 4 {
				e.Offset = ne.Uint32(a.Value())
			}
		}
	}
	return e, nil
}

// AppendError appends an NLMSG_ERROR answering the request req (a whole
// message) with errno (negative, or 0 for an acknowledgement), capped
// (without the request's payload), with the offset of the offending
// attribute when offset is not 0, as the kernel does for a socket with
// NETLINK_CAP_ACK and NETLINK_EXT_ACK.
func (w *Writer) AppendError(req []byte, pid uint32, errno int32, offset uint32) {
	flags := uint16(FlagCapped)
	if offset != 0 {
		flags |= FlagAckTLVs
	}
	start := w.BeginRaw(MsgError, flags, ne.Uint32(req[8:]), pid)
	w.B = ne.AppendUint32(w.B, uint32(errno))
	w.B = append(w.B, req[:HdrLen]...)
	if offset != 0 {
		p := w.attr(ErrAttrOffs, 4)
		ne.PutUint32(w.B[p:], offset)
	}
	w.End(start)
}

// PutSeq sets the sequence number of the message at the start of m.
func PutSeq(m []byte, seq uint32) { ne.PutUint32(m[8:], seq) }

// IsBatch reports whether datagram b starts with a batch.
func IsBatch(b []byte) bool { return len(b) >= HdrLen && ne.Uint16(b[4:]) == BatchBegin }
