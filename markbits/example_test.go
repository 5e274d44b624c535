package markbits_test

import (
	"errors"
	"fmt"

	"github.com/nodeplane/nodeplane/markbits"
)

func ExampleNew() {
	a, err := markbits.New(0xffff0000)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("mask 0x%08x, %d bits free\n", a.Mask(), a.Available())

	_, err = markbits.New(0)
	fmt.Println(errors.Is(err, markbits.ErrEmptyMask))
	// Output:
	// mask 0xffff0000, 16 bits free
	// true
}

func ExampleAllocator_NextBit() {
	a, _ := markbits.New(0x00000300)
	for _, owner := range []string{"accept", "pass", "drop"} {
		bit, err := a.NextBit(owner)
		if err != nil {
			fmt.Println(owner, "->", errors.Is(err, markbits.ErrExhausted))
			continue
		}
		fmt.Printf("%s -> 0x%08x\n", owner, bit)
	}
	// Output:
	// accept -> 0x00000100
	// pass -> 0x00000200
	// drop -> true
}

func ExampleAllocator_Block() {
	a, _ := markbits.New(0x0f0f0000)
	_, _ = a.NextBit("accept")
	// Bit 16 is taken; the block is the next five bits, across the gap.
	blk, _ := a.Block("endpoint", 5)
	fmt.Println(blk, "holds", blk.Capacity(), "numbers")
	// Output: 0x030e0000 (5 bits) holds 32 numbers
}

func ExampleAllocator_BlockAll() {
	a, _ := markbits.New(0xffff0000)
	for _, owner := range []string{"accept", "pass"} {
		_, _ = a.NextBit(owner)
	}
	rest, _ := a.BlockAll("endpoint")
	fmt.Println(rest, a.Available())
	// Output: 0xfffc0000 (14 bits) 0
}

func ExampleAllocator_Reserve() {
	// An agent told to use the low 16 bits keeps clear of kube-proxy's bits.
	a, _ := markbits.New(0x0000ffff)
	if err := a.Reserve("kube-proxy", markbits.KubeProxyMarks); err != nil {
		fmt.Println(err)
		return
	}
	rest, _ := a.BlockAll("endpoint")
	fmt.Println(rest)

	err := a.Reserve("other", 0x00008000)
	fmt.Println(errors.Is(err, markbits.ErrOverlap))
	owner, _ := a.Owner(0x00008000)
	fmt.Println(owner)
	// Output:
	// 0x00003fff (14 bits)
	// true
	// kube-proxy
}

func ExampleAllocator_Release() {
	a, _ := markbits.New(0x000000f0)
	first, _ := a.NextBit("tunnel")
	fmt.Printf("released 0x%02x\n", a.Release("tunnel"))
	again, _ := a.NextBit("other")
	fmt.Println(first == again)
	// Output:
	// released 0x10
	// true
}

func ExampleAllocator_ReleaseBits() {
	a, _ := markbits.New(0x0000000f)
	_, _ = a.Block("endpoint", 4)
	fmt.Printf("released 0x%x, endpoint keeps 0x%x\n", a.ReleaseBits(0x9), a.Bits("endpoint"))
	// Output: released 0x9, endpoint keeps 0x6
}

func ExampleAllocator_Allocations() {
	a, _ := markbits.New(0x000f0000)
	_, _ = a.NextBit("accept")
	_, _ = a.Block("endpoint", 2)
	_ = a.Reserve("kube-proxy", markbits.KubeProxyMarks)
	for _, al := range a.Allocations() {
		fmt.Printf("%-10s 0x%08x reserved=%t\n", al.Owner, al.Bits, al.Reserved)
	}
	fmt.Printf("ours 0x%08x, free 0x%08x\n", a.Allocated(), a.Free())
	// Output:
	// kube-proxy 0x0000c000 reserved=true
	// accept     0x00010000 reserved=false
	// endpoint   0x00060000 reserved=false
	// ours 0x00070000, free 0x00080000
}

func ExampleNewBlock() {
	blk, err := markbits.NewBlock(0x80000001)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(blk.Size(), blk.Capacity())
	// Output: 2 4
}

func ExampleBlock_Mark() {
	// The number's bits are scattered over the block's bits, lowest first,
	// skipping the gap between the two nibbles.
	blk := markbits.Block{Mask: 0x0f0f0000}
	mark, _ := blk.Mark(0xab)
	fmt.Printf("0x%08x\n", mark)

	_, err := blk.Mark(256)
	fmt.Println(errors.Is(err, markbits.ErrOutOfRange))
	// Output:
	// 0x0a0b0000
	// true
}

func ExampleBlock_Number() {
	blk := markbits.Block{Mask: 0x0f0f0000}
	// Bits outside the block (here 0x0000c000) are ignored.
	fmt.Printf("0x%x\n", blk.Number(0x0a0bc000))
	// Output: 0xab
}

func ExampleNewLayout() {
	layout, err := markbits.NewLayout(markbits.LayoutOptions{
		WireGuard: true,
		Reserved:  map[string]uint32{"kube-proxy": markbits.KubeProxyMarks},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(layout)
	fmt.Printf("clear 0x%08x\n", layout.Owned())

	_, err = markbits.NewLayout(markbits.LayoutOptions{Mask: 0x0000000f})
	fmt.Println(errors.Is(err, markbits.ErrExhausted))
	// Output:
	// mask=0xffff0000 accept=0x00010000 pass=0x00020000 scratch0=0x00040000 scratch1=0x00080000 wireguard=0x00100000 endpoint=0xffe00000 (11 bits) reserved:kube-proxy=0x0000c000 (outside mask)
	// clear 0xffff0000
	// true
}

func ExampleNewLayout_bpf() {
	// The BPF programs' bits must lie inside the mask and are removed first.
	layout, err := markbits.NewLayout(markbits.LayoutOptions{BPFReserved: 0x1ff00000})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(layout.Endpoint, layout.ReservedInMask())

	_, err = markbits.NewLayout(markbits.LayoutOptions{BPFReserved: 0x0000ff00})
	fmt.Println(errors.Is(err, markbits.ErrOutsideMask))
	// Output:
	// 0xe0000000 (3 bits) 0
	// true
}

func ExampleLayout_ReservedInMask() {
	layout, _ := markbits.NewLayout(markbits.LayoutOptions{
		Mask:     0x0000ffff,
		Reserved: map[string]uint32{"kube-proxy": markbits.KubeProxyMarks},
	})
	fmt.Printf("0x%08x avoided, endpoint %v\n", layout.ReservedInMask(), layout.Endpoint)
	// Output: 0x0000c000 avoided, endpoint 0x00003ff0 (10 bits)
}
