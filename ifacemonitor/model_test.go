//go:build linux

package ifacemonitor

import (
	"context"
	"testing"

	"github.com/nodeplane/nodeplane/internal/nlutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// newDirect returns a run driven by the test itself, without goroutines:
// events applied with handle form one batch, reported by flush.
func newDirect(t *testing.T, opts Options) (*run, *recorder) {
	t.Helper()
	rec := newRecorder()
	rec.hook(&opts)
	m, err := newMonitor(opts, nlutil.Links|nlutil.Addrs)
	require.NoError(t, err)
	r := newRun(m, context.Background(), nil, nil)
	r.subscribed = m.kinds
	return r, rec
}

func batch(r *run, evs ...nlutil.Event) {
	for _, ev := range evs {
		r.handle(ev)
	}
	r.flush()
}

func newLink(l fakeLink) nlutil.Event { return linkEvent(l, unix.RTM_NEWLINK) }
func delLink(l fakeLink) nlutil.Event { return linkEvent(l, unix.RTM_DELLINK) }

// Changes within one batch are reported as the state after the batch, with
// names released before they are taken.
func TestBatchSemantics(t *testing.T) {
	a := fakeLink{index: 1, name: "a", adminUp: true, carrier: true, mtu: 1500, kind: "veth"}
	b := fakeLink{index: 2, name: "b", mtu: 1500, kind: "veth"}
	renamed := func(l fakeLink, name string) fakeLink { l.name = name; return l }
	tests := []struct {
		name  string
		batch []nlutil.Event
		want  []string
	}{
		{
			name:  "swap through a temporary name",
			batch: []nlutil.Event{newLink(renamed(a, "tmp")), newLink(renamed(b, "a")), newLink(renamed(a, "b"))},
			want: []string{
				"link a #1 gone mtu=1500 veth",
				"link b #2 gone mtu=1500 veth",
				"link a #2 down mtu=1500 veth from=b",
				"link b #1 up mtu=1500 veth from=a",
			},
		},
		{
			name:  "delete and recreate",
			batch: []nlutil.Event{delLink(a), newLink(fakeLink{index: 7, name: "a", mtu: 1400, kind: "veth"})},
			want:  []string{"link a #1 gone mtu=1500 veth", "link a #7 down mtu=1400 veth"},
		},
		{
			name:  "created and deleted within the batch",
			batch: []nlutil.Event{newLink(fakeLink{index: 9, name: "c", kind: "veth"}), delLink(fakeLink{index: 9, name: "c"})},
		},
		{
			name:  "rename there and back",
			batch: []nlutil.Event{newLink(renamed(a, "z")), newLink(a)},
		},
		{
			name:  "several changes of one link",
			batch: []nlutil.Event{newLink(fakeLink{index: 2, name: "b", adminUp: true, carrier: true, mtu: 1500, kind: "veth"}), newLink(fakeLink{index: 2, name: "b", adminUp: true, carrier: true, mtu: 9000, kind: "veth"})},
			want:  []string{"link b #2 up mtu=9000 veth"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, rec := newDirect(t, Options{})
			batch(r, newLink(a), newLink(b))
			rec.take()
			batch(r, tc.batch...)
			assert.Equal(t, tc.want, rec.take())
			assert.Empty(t, rec.contractErrors())
		})
	}
}

// While stale events replay, two links may hold one name in the model; the
// one already reported keeps it, the other waits until it is released.
func TestDuplicateNameIsMasked(t *testing.T) {
	r, rec := newDirect(t, Options{})
	five := fakeLink{index: 5, name: "y", mtu: 1500, kind: "veth"}
	six := fakeLink{index: 6, name: "x", mtu: 1500, kind: "veth"}
	batch(r, newLink(five), newLink(six))
	rec.take()

	stale := five
	stale.name = "x"
	batch(r, newLink(stale))
	assert.Equal(t, []string{"link y #5 gone mtu=1500 veth"}, rec.take(), "x stays with #6")
	batch(r, newLink(five))
	assert.Equal(t, []string{"link y #5 down mtu=1500 veth"}, rec.take())
	batch(r, newLink(six))
	assert.Empty(t, rec.take())

	// A real conflict resolved by deleting the reported holder: the
	// masked link takes the name.
	batch(r, newLink(stale))
	rec.take()
	batch(r, delLink(six))
	assert.Equal(t, []string{"link x #6 gone mtu=1500 veth", "link x #5 down mtu=1500 veth"}, rec.take())
	assert.Empty(t, rec.contractErrors())
}

// Addresses of a link the model has not seen yet wait for it; a dump drops
// those of links that do not exist.
func TestOrphanAddresses(t *testing.T) {
	r, rec := newDirect(t, Options{})
	p1, p2 := mustPrefix("10.0.0.1/32"), mustPrefix("10.0.0.2/32")
	batch(r, addrEvent(4, p1, true), addrEvent(4, p2, true), addrEvent(4, p2, false), addrEvent(8, p1, false))
	assert.Empty(t, rec.take())
	assert.Len(t, r.orphans, 1)

	batch(r, newLink(fakeLink{index: 4, name: "late", mtu: 1500, kind: "veth"}))
	assert.Equal(t, []string{"link late #4 down mtu=1500 veth", "addrs late [10.0.0.1/32]"}, rec.take())
	assert.Empty(t, r.orphans)

	batch(r, addrEvent(9, p1, true))
	r.applyAddrList(nil)
	r.flush()
	assert.Equal(t, []string{"addrs late []"}, rec.take())
	assert.Empty(t, r.orphans)
}
