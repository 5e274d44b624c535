package markbits

import (
	"bytes"
	"fmt"
	"log/slog"
	"math/bits"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// checkLayout verifies the invariants every layout must satisfy for opts.
func checkLayout(t testing.TB, l Layout, opts LayoutOptions) {
	t.Helper()
	mask := opts.Mask
	if mask == 0 {
		mask = DefaultMask
	}
	require.Equal(t, mask, l.Mask)
	singles := []uint32{l.Accept, l.Pass, l.Scratch0, l.Scratch1}
	if opts.WireGuard {
		singles = append(singles, l.WireGuard)
	} else {
		require.Zero(t, l.WireGuard)
	}
	require.Len(t, l.Extra, len(opts.Extra))
	for _, name := range opts.Extra {
		singles = append(singles, l.Extra[name])
	}
	var union uint32
	prev := uint32(0)
	for i, bit := range singles {
		require.Equal(t, 1, bits.OnesCount32(bit), "single bit %d is %#x", i, bit)
		require.Greater(t, bit, prev, "single bits are allocated lowest first, in order")
		require.Zero(t, union&bit)
		prev = bit
		union |= bit
	}
	require.NotZero(t, l.Endpoint.Mask)
	require.Zero(t, union&l.Endpoint.Mask)
	union |= l.Endpoint.Mask
	require.Equal(t, union, l.Owned())

	var foreign uint32
	for _, b := range opts.Reserved {
		foreign |= b
	}
	require.Equal(t, opts.BPFReserved, l.BPF)
	require.Zero(t, l.Owned()&(opts.BPFReserved|foreign), "owned bits never include reserved ones")
	require.Equal(t, mask&^opts.BPFReserved&^foreign, l.Owned(), "every other bit of the mask is used")
	require.Equal(t, foreign&mask, l.ReservedInMask())
}

func TestNewLayoutDefault(t *testing.T) {
	l, err := NewLayout(LayoutOptions{})
	require.NoError(t, err)
	checkLayout(t, l, LayoutOptions{})

	// 0xffff0000 has bits 16..31: four single bits take 16..19 and the
	// endpoint block gets the 12 bits 20..31.
	assert.Equal(t, uint32(1<<16), l.Accept)
	assert.Equal(t, uint32(1<<17), l.Pass)
	assert.Equal(t, uint32(1<<18), l.Scratch0)
	assert.Equal(t, uint32(1<<19), l.Scratch1)
	assert.Equal(t, 12, l.Endpoint.Size())
	assert.Equal(t, DefaultMask, l.Owned())
}

func TestNewLayoutShapes(t *testing.T) {
	tests := []struct {
		name string
		opts LayoutOptions
	}{
		{"default", LayoutOptions{}},
		{"wireguard", LayoutOptions{WireGuard: true}},
		{"kube-proxy outside default mask", LayoutOptions{Reserved: map[string]uint32{"kube-proxy": KubeProxyMarks}}},
		{"kube-proxy inside low mask", LayoutOptions{Mask: 0x0000ffff, Reserved: map[string]uint32{"kube-proxy": KubeProxyMarks}}},
		{"bpf", LayoutOptions{WireGuard: true, BPFReserved: 0x1ff00000}},
		{"extras", LayoutOptions{WireGuard: true, Extra: []string{"drop", "masq"}}},
		{"non-contiguous mask", LayoutOptions{Mask: 0x0f0f0f0f, WireGuard: true}},
		{"exact fit", LayoutOptions{Mask: 0x0000001f}},
		{"everything", LayoutOptions{
			Mask: 0xffffffff, WireGuard: true, Extra: []string{"drop"}, BPFReserved: 0x1ff00000,
			Reserved: map[string]uint32{"kube-proxy": KubeProxyMarks, "other": 0x00000003}, MinEndpointBits: 8,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := NewLayout(tt.opts)
			require.NoError(t, err)
			checkLayout(t, l, tt.opts)
			if tt.opts.MinEndpointBits > 0 {
				assert.GreaterOrEqual(t, l.Endpoint.Size(), tt.opts.MinEndpointBits)
			}
		})
	}
}

func TestNewLayoutBPFMode(t *testing.T) {
	// Removing the BPF programs' bits 20..28 from the default mask leaves
	// bits 16..19 and 29..31. The four fixed bits take 16..19, WireGuard takes
	// 29 and the endpoint block gets 30 and 31.
	opts := LayoutOptions{WireGuard: true, BPFReserved: 0x1ff00000}
	l, err := NewLayout(opts)
	require.NoError(t, err)
	checkLayout(t, l, opts)
	assert.Equal(t, uint32(1<<19), l.Scratch1)
	assert.Equal(t, uint32(1<<29), l.WireGuard)
	assert.Equal(t, uint32(1<<30|1<<31), l.Endpoint.Mask)
	assert.Zero(t, l.ReservedInMask(), "BPF bits are the agent's own, not foreign")

	// One more required bit no longer fits.
	_, err = NewLayout(LayoutOptions{WireGuard: true, BPFReserved: 0x1ff00000, MinEndpointBits: 3})
	require.ErrorIs(t, err, ErrExhausted)
}

func TestNewLayoutKubeProxyInsideMask(t *testing.T) {
	opts := LayoutOptions{Mask: 0x0000ffff, WireGuard: true, Reserved: map[string]uint32{"kube-proxy": KubeProxyMarks}}
	l, err := NewLayout(opts)
	require.NoError(t, err)
	checkLayout(t, l, opts)
	assert.Equal(t, KubeProxyMarks, l.ReservedInMask())
	assert.Zero(t, l.Owned()&KubeProxyMarks)
	// Bits 0..4 are the single bits, 5..13 the endpoint block.
	assert.Equal(t, uint32(1<<4), l.WireGuard)
	assert.Equal(t, uint32(0x00003fe0), l.Endpoint.Mask)
}

func TestNewLayoutErrors(t *testing.T) {
	tests := []struct {
		name string
		opts LayoutOptions
		want error
	}{
		{"mask too small", LayoutOptions{Mask: 0x0000000f}, ErrExhausted},
		{"mask too small with wireguard", LayoutOptions{Mask: 0x0000001f, WireGuard: true}, ErrExhausted},
		{"mask too small for min endpoint", LayoutOptions{Mask: 0x000000ff, MinEndpointBits: 5}, ErrExhausted},
		{"reservations eat the mask", LayoutOptions{Mask: 0x000000ff, Reserved: map[string]uint32{"x": 0x0000000f}}, ErrExhausted},
		{"bpf eats the mask", LayoutOptions{Mask: 0x000000ff, BPFReserved: 0x000000f0}, ErrExhausted},
		{"bpf outside mask", LayoutOptions{BPFReserved: 0x0000ff00}, ErrOutsideMask},
		{"bpf partly outside mask", LayoutOptions{BPFReserved: 0x00018000}, ErrOutsideMask},
		{"reservation overlaps bpf", LayoutOptions{BPFReserved: 0x01000000, Reserved: map[string]uint32{"x": 0x03000000}}, ErrOverlap},
		{"reservations overlap", LayoutOptions{Reserved: map[string]uint32{"x": 0x00000003, "y": 0x00000002}}, ErrOverlap},
		{"empty reservation", LayoutOptions{Reserved: map[string]uint32{"x": 0}}, ErrEmptyMask},
		{"empty reservation name", LayoutOptions{Reserved: map[string]uint32{"": 1}}, ErrInvalidOwner},
		{"reservation named like ours", LayoutOptions{Reserved: map[string]uint32{OwnerAccept: 1}}, ErrInvalidOwner},
		{"reservation named bpf", LayoutOptions{Reserved: map[string]uint32{OwnerBPF: 1}}, ErrInvalidOwner},
		{"reservation named mask", LayoutOptions{Reserved: map[string]uint32{"mask": 1}}, ErrInvalidOwner},
		{"reservation named like extra", LayoutOptions{Extra: []string{"drop"}, Reserved: map[string]uint32{"drop": 1}}, ErrInvalidOwner},
		{"empty extra name", LayoutOptions{Extra: []string{""}}, ErrInvalidOwner},
		{"extra named like ours", LayoutOptions{Extra: []string{OwnerEndpoint}}, ErrInvalidOwner},
		{"extra wireguard without wireguard", LayoutOptions{Extra: []string{OwnerWireGuard}}, ErrInvalidOwner},
		{"duplicate extra", LayoutOptions{Extra: []string{"drop", "drop"}}, ErrInvalidOwner},
		{"negative min endpoint", LayoutOptions{MinEndpointBits: -1}, ErrInvalidSize},
		{"min endpoint above 32", LayoutOptions{MinEndpointBits: 33}, ErrInvalidSize},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := NewLayout(tt.opts)
			require.ErrorIs(t, err, tt.want)
			assert.NotEmpty(t, err.Error())
			assert.Equal(t, Layout{}, l)
		})
	}
}

func TestNewLayoutExhaustedMessage(t *testing.T) {
	_, err := NewLayout(LayoutOptions{Mask: 0x000000ff, WireGuard: true, BPFReserved: 0x3, Reserved: map[string]uint32{"x": 0x4}})
	require.ErrorIs(t, err, ErrExhausted)
	// The message gives what an operator needs to fix the configuration.
	msg := err.Error()
	for _, want := range []string{"0x000000ff", "5 free bits", "0x00000003", "0x00000004", "needs 6"} {
		assert.Contains(t, msg, want)
	}
}

func TestNewLayoutDoesNotAliasOptions(t *testing.T) {
	opts := LayoutOptions{Mask: 0x0000ffff, Reserved: map[string]uint32{"kube-proxy": KubeProxyMarks}}
	l, err := NewLayout(opts)
	require.NoError(t, err)
	opts.Reserved["kube-proxy"] = 0x1
	assert.Equal(t, KubeProxyMarks, l.Reserved["kube-proxy"])
}

func TestLayoutAllocations(t *testing.T) {
	opts := LayoutOptions{
		WireGuard: true, Extra: []string{"drop"}, BPFReserved: 0x0f000000,
		Reserved: map[string]uint32{"kube-proxy": KubeProxyMarks},
	}
	l, err := NewLayout(opts)
	require.NoError(t, err)
	got := l.Allocations()

	byOwner := map[string]Allocation{}
	var union uint32
	for i, al := range got {
		if i > 0 {
			assert.Less(t, bits.TrailingZeros32(got[i-1].Bits), bits.TrailingZeros32(al.Bits), "ordered by lowest bit")
		}
		byOwner[al.Owner] = al
		union |= al.Bits
	}
	assert.Equal(t, Allocation{Owner: OwnerAccept, Bits: l.Accept}, byOwner[OwnerAccept])
	assert.Equal(t, Allocation{Owner: OwnerWireGuard, Bits: l.WireGuard}, byOwner[OwnerWireGuard])
	assert.Equal(t, Allocation{Owner: "drop", Bits: l.Extra["drop"]}, byOwner["drop"])
	assert.Equal(t, Allocation{Owner: OwnerEndpoint, Bits: l.Endpoint.Mask}, byOwner[OwnerEndpoint])
	assert.Equal(t, Allocation{Owner: OwnerBPF, Bits: 0x0f000000, Reserved: true}, byOwner[OwnerBPF])
	assert.Equal(t, Allocation{Owner: "kube-proxy", Bits: KubeProxyMarks, Reserved: true}, byOwner["kube-proxy"])
	assert.Len(t, got, 9)
	assert.Equal(t, DefaultMask|KubeProxyMarks, union)
}

func TestLayoutString(t *testing.T) {
	l, err := NewLayout(LayoutOptions{
		WireGuard: true, Extra: []string{"drop"}, BPFReserved: 0x0f000000,
		Reserved: map[string]uint32{"kube-proxy": KubeProxyMarks, "low": 0x00010000},
	})
	require.NoError(t, err)
	s := l.String()
	hex := func(v uint32) string { return fmt.Sprintf("0x%08x", v) }
	for _, want := range []string{
		"mask=" + hex(DefaultMask),
		"accept=" + hex(l.Accept),
		"pass=" + hex(l.Pass),
		"scratch0=" + hex(l.Scratch0),
		"scratch1=" + hex(l.Scratch1),
		"wireguard=" + hex(l.WireGuard),
		"drop=" + hex(l.Extra["drop"]),
		"endpoint=" + l.Endpoint.String(),
		"bpf=0x0f000000",
		"reserved:kube-proxy=0x0000c000 (outside mask)",
		"reserved:low=0x00010000 (0x00010000 in mask)",
	} {
		assert.Contains(t, s, want)
	}

	plain, err := NewLayout(LayoutOptions{})
	require.NoError(t, err)
	assert.NotContains(t, plain.String(), "wireguard", "disabled WireGuard is left out")
	assert.NotContains(t, plain.String(), "bpf")
	assert.NotContains(t, plain.String(), "reserved")

	assert.NotPanics(t, func() { _ = Layout{}.String() })
}

func TestLayoutLogValue(t *testing.T) {
	l, err := NewLayout(LayoutOptions{WireGuard: true})
	require.NoError(t, err)
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("marks", "layout", l)
	out := buf.String()
	assert.Contains(t, out, fmt.Sprintf("layout.accept=0x%08x", l.Accept))
	assert.Contains(t, out, fmt.Sprintf("layout.wireguard=0x%08x", l.WireGuard))
	assert.Contains(t, out, fmt.Sprintf("layout.mask=0x%08x", DefaultMask))
}
