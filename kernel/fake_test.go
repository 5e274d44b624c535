//go:build linux

package kernel

import (
	"bytes"
	"cmp"
	"net/netip"
	"slices"
	"time"

	"golang.org/x/sys/unix"
)

// fakeKernel is a scripted transport: every request message sent is handed
// to onRequest, whose reply datagrams are queued for recv, as the kernel
// does synchronously inside sendmsg.
type fakeKernel struct {
	queue     [][]byte
	sends     [][]byte // copies of every datagram sent
	waits     int
	closed    bool
	sendErr   error
	recvErrs  []error // returned by recv, in order, before the queue
	onRequest func(h header, payload []byte) [][]byte
}

func (k *fakeKernel) send(b []byte) error {
	if k.closed {
		return unix.EBADF
	}
	if k.sendErr != nil {
		return k.sendErr
	}
	k.sends = append(k.sends, bytes.Clone(b))
	for buf := b; len(buf) > 0; {
		h, payload, rest, ok := nextMessage(buf)
		if !ok {
			break
		}
		if k.onRequest != nil {
			k.queue = append(k.queue, k.onRequest(h, payload)...)
		}
		buf = rest
	}
	return nil
}

func (k *fakeKernel) recv(b []byte) (int, error) {
	if len(k.recvErrs) > 0 {
		err := k.recvErrs[0]
		k.recvErrs = k.recvErrs[1:]
		return 0, err
	}
	if len(k.queue) == 0 {
		return 0, unix.EAGAIN
	}
	d := k.queue[0]
	k.queue = k.queue[1:]
	copy(b, d)
	return len(d), nil
}

func (k *fakeKernel) wait(time.Duration) error { k.waits++; return nil }

func (k *fakeKernel) close() error { k.closed = true; return nil }

// messages returns every request message sent, in order.
func (k *fakeKernel) messages() (hs []header) {
	for _, d := range k.sends {
		for buf := d; len(buf) > 0; {
			h, _, rest, ok := nextMessage(buf)
			if !ok {
				break
			}
			hs = append(hs, h)
			buf = rest
		}
	}
	return hs
}

// tlv returns an NLMSGERR_ATTR_MSG attribute, or nothing for "".
func tlv(msg string) []byte {
	if msg == "" {
		return nil
	}
	b := appendAttrHeader(nil, unix.NLMSGERR_ATTR_MSG, len(msg)+1)
	b = append(append(b, msg...), 0)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// finish fills in a message's length.
func finish(b []byte) []byte { ne.PutUint32(b, uint32(len(b))); return b }

// ackMsg is a capped NLMSG_ERROR for request seq: code 0 is an ack.
func ackMsg(seq uint32, code int32, msg string) []byte {
	flags := uint16(unix.NLM_F_CAPPED)
	if msg != "" {
		flags |= unix.NLM_F_ACK_TLVS
	}
	b := appendHeader(nil, unix.NLMSG_ERROR, flags, seq)
	b = ne.AppendUint32(b, uint32(code))
	b = appendHeader(b, unix.RTM_NEWROUTE, 0, seq) // the request's header
	return finish(append(b, tlv(msg)...))
}

// uncappedAck is an NLMSG_ERROR that echoes the whole request.
func uncappedAck(req []byte, code int32, msg string) []byte {
	flags := uint16(0)
	if msg != "" {
		flags |= unix.NLM_F_ACK_TLVS
	}
	b := appendHeader(nil, unix.NLMSG_ERROR, flags, ne.Uint32(req[8:]))
	b = ne.AppendUint32(b, uint32(code))
	b = append(b, req...)
	return finish(append(b, tlv(msg)...))
}

// doneMsg ends a dump.
func doneMsg(seq uint32, flags uint16, code int32, msg string) []byte {
	flags |= unix.NLM_F_MULTI
	if msg != "" {
		flags |= unix.NLM_F_ACK_TLVS
	}
	b := appendHeader(nil, unix.NLMSG_DONE, flags, seq)
	b = ne.AppendUint32(b, uint32(code))
	return finish(append(b, tlv(msg)...))
}

// routeMsg is an RTM_NEWROUTE dump message for r.
func routeMsg(seq uint32, flags uint16, r *Route) []byte {
	b := appendRouteMsg(nil, OpReplace, seq, r)
	ne.PutUint16(b[4:], unix.RTM_NEWROUTE)
	ne.PutUint16(b[6:], unix.NLM_F_MULTI|flags)
	return b
}

// routeKey identifies a route in routeStore.
type routeKey struct {
	family   Family
	table    uint32
	dst      netip.Prefix
	priority uint32
}

func keyOf(r *Route) routeKey {
	t := r.Table
	if t == 0 {
		t = unix.RT_TABLE_MAIN
	}
	return routeKey{r.Family, t, r.Dst, r.Priority}
}

// routeStore is an in-memory route table behind a fakeKernel: it applies
// RTM_NEWROUTE / RTM_DELROUTE like the kernel (EEXIST, ESRCH), fails the
// destinations in fail, and answers dumps.
type routeStore struct {
	routes map[routeKey]Route
	fail   map[netip.Prefix]unix.Errno
	// failMsg is the extended-ack message sent with a failure.
	failMsg string
	// intr is how many of the next dumps are marked interrupted.
	intr int
	// perDatagram is how many routes a dump datagram holds.
	perDatagram int
	// honorFilter makes dumps send only the requested table (strict mode);
	// a missing table is then ENOENT.
	honorFilter bool
	// dumps counts dump requests.
	dumps int
}

func newRouteStore() *routeStore {
	return &routeStore{routes: map[routeKey]Route{}, fail: map[netip.Prefix]unix.Errno{}, perDatagram: 3}
}

// kernel returns a fakeKernel backed by s.
func (s *routeStore) kernel() *fakeKernel {
	return &fakeKernel{onRequest: s.handle}
}

func (s *routeStore) handle(h header, payload []byte) [][]byte {
	switch h.typ {
	case unix.RTM_NEWROUTE, unix.RTM_DELROUTE:
		var r Route
		if ok, err := decodeRoute(payload, &r); err != nil || !ok {
			return [][]byte{ackMsg(h.seq, -int32(unix.EINVAL), "bad route")}
		}
		if errno, ok := s.fail[r.Dst]; ok {
			return [][]byte{ackMsg(h.seq, -int32(errno), s.failMsg)}
		}
		k := keyOf(&r)
		_, exists := s.routes[k]
		switch {
		case h.typ == unix.RTM_DELROUTE && !exists:
			return [][]byte{ackMsg(h.seq, -int32(unix.ESRCH), "")}
		case h.typ == unix.RTM_DELROUTE:
			delete(s.routes, k)
		case exists && h.flags&unix.NLM_F_EXCL != 0:
			return [][]byte{ackMsg(h.seq, -int32(unix.EEXIST), "")}
		default:
			s.routes[k] = r
		}
		return [][]byte{ackMsg(h.seq, 0, "")}
	case unix.RTM_GETROUTE:
		return s.dump(h, payload)
	}
	return [][]byte{ackMsg(h.seq, -int32(unix.EOPNOTSUPP), "")}
}

func (s *routeStore) dump(h header, payload []byte) [][]byte {
	s.dumps++
	family, _ := familyOfAF(payload[0])
	var table uint32
	var oif int
	for a := payload[rtmsgLen:]; len(a) > 0; {
		t, v, rest, ok := nextAttr(a)
		if !ok || len(v) < 4 {
			return [][]byte{ackMsg(h.seq, -int32(unix.EINVAL), "bad dump request")}
		}
		switch t {
		case unix.RTA_TABLE:
			table = ne.Uint32(v)
		case unix.RTA_OIF:
			oif = int(ne.Uint32(v))
		}
		a = rest
	}
	var keys []routeKey
	for k, r := range s.routes {
		if k.family == family && (!s.honorFilter || ((table == 0 || k.table == table) && (oif == 0 || r.Uses(oif)))) {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b routeKey) int {
		return cmp.Or(cmp.Compare(a.table, b.table), a.dst.Addr().Compare(b.dst.Addr()), cmp.Compare(a.dst.Bits(), b.dst.Bits()))
	})
	var flags uint16
	if s.intr > 0 {
		s.intr--
		flags = unix.NLM_F_DUMP_INTR
	}
	if s.honorFilter && table != 0 && len(keys) == 0 {
		return [][]byte{doneMsg(h.seq, 0, -int32(unix.ENOENT), "FIB table does not exist")}
	}
	var out [][]byte
	var cur []byte
	for i, k := range keys {
		r := s.routes[k]
		f := uint16(0)
		if i == len(keys)/2 {
			f = flags // the change happens mid-dump
		}
		cur = append(cur, routeMsg(h.seq, f, &r)...)
		if (i+1)%s.perDatagram == 0 {
			out, cur = append(out, cur), nil
		}
	}
	return append(out, append(cur, doneMsg(h.seq, flags, 0, "")...))
}
