//go:build linux

package nlutil

import (
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"syscall"
	"unsafe"

	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// groups are the rtnetlink multicast groups of each kind.
var groups = [...][]uint{
	{unix.RTNLGRP_LINK},
	{unix.RTNLGRP_IPV4_IFADDR, unix.RTNLGRP_IPV6_IFADDR},
	{unix.RTNLGRP_IPV4_ROUTE, unix.RTNLGRP_IPV6_ROUTE},
}

// netlinkSubscribe is the real subscribeFunc: one NETLINK_ROUTE socket in
// the namespace, joined to the groups of every kind, read by one goroutine
// while another closes it once done is closed or the reader has failed.
func netlinkSubscribe(kinds Kinds, done <-chan struct{}, cfg subConfig, onErr func(error)) (subscription, error) {
	var gs []uint
	for i, g := range groups {
		if kinds&(1<<i) != 0 {
			gs = append(gs, g...)
		}
	}
	target := netns.None()
	if cfg.namespace != nil {
		target = *cfg.namespace
	}
	s, err := nl.SubscribeAt(target, netns.None(), unix.NETLINK_ROUTE, gs...)
	if err != nil {
		return subscription{}, err
	}
	if err := s.SetReceiveBufferSize(cfg.rcvbuf, cfg.force); err != nil {
		s.Close()
		return subscription{}, err
	}
	var mu sync.Mutex // guards closed and the descriptor's use by barrier
	closed := false
	readerDone, socketClosed := make(chan struct{}), make(chan struct{})
	go func() {
		select {
		case <-done:
		case <-readerDone:
		}
		mu.Lock()
		closed = true
		s.Close() // ends a Receive in progress
		mu.Unlock()
		close(socketClosed)
	}()
	out := make(chan Event)
	go func() {
		defer close(out)
		defer func() {
			close(readerDone)
			<-socketClosed
		}()
		for {
			msgs, from, err := s.Receive()
			if err != nil {
				onErr(err)
				return
			}
			if from.Pid != nl.PidKernel {
				continue
			}
			for i := range msgs {
				ev, ok := eventOf(&msgs[i], onErr)
				if !ok {
					continue
				}
				select {
				case out <- ev:
				case <-done:
					return
				}
			}
		}
	}()
	barrier := func(seq uint32) error {
		mu.Lock()
		defer mu.Unlock()
		if closed {
			return net.ErrClosed
		}
		return sendNoop(s.GetFd(), seq)
	}
	return subscription{events: out, barrier: barrier}, nil
}

// sendNoop sends the kernel an NLMSG_NOOP request asking for an
// acknowledgement: the kernel does nothing but queue an NLMSG_ERROR with
// error 0 and sequence number seq behind the messages already queued.
func sendNoop(fd int, seq uint32) error {
	var b [unix.NLMSG_HDRLEN]byte
	h := (*unix.NlMsghdr)(unsafe.Pointer(&b[0]))
	*h = unix.NlMsghdr{Len: unix.NLMSG_HDRLEN, Type: unix.NLMSG_NOOP, Flags: unix.NLM_F_REQUEST | unix.NLM_F_ACK, Seq: seq}
	for {
		err := unix.Sendto(fd, b[:], 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
		if err != unix.EINTR {
			return err
		}
	}
}

// eventOf turns one received message into an event: a Msg of a kind
// watched (link messages of the AF_BRIDGE family left out), or a Barrier
// whose ID is the acknowledged sequence number. ok is false for anything
// else; an error message is reported to onErr.
func eventOf(m *syscall.NetlinkMessage, onErr func(error)) (Event, bool) {
	switch m.Header.Type {
	case unix.RTM_NEWLINK, unix.RTM_DELLINK:
		// The kernel sends AF_BRIDGE link messages to the link group
		// about a bridge port's state; the RTM_DELLINK when a port leaves
		// its bridge means nothing about the link itself, which a
		// consumer would take for a deletion.
		if len(m.Data) == 0 || m.Data[0] == unix.AF_BRIDGE {
			return Event{}, false
		}
	case unix.RTM_NEWADDR, unix.RTM_DELADDR, unix.RTM_NEWROUTE, unix.RTM_DELROUTE:
	case unix.NLMSG_ERROR:
		if len(m.Data) < 4 {
			return Event{}, false
		}
		if code := int32(binary.NativeEndian.Uint32(m.Data)); code != 0 {
			onErr(fmt.Errorf("nlutil: netlink error message for request %d: %w", m.Header.Seq, unix.Errno(-code)))
			return Event{}, false
		}
		return Event{Barrier: &Barrier{ID: uint64(m.Header.Seq)}}, true
	default:
		return Event{}, false
	}
	return Event{Msg: &Message{Header: unix.NlMsghdr(m.Header), Data: m.Data}}, true
}
