package proxy

// The Go mirrors of the socket reverse map of the connect-time programs
// (c/sock.c, structs np_sk_key and np_sk_val in c/nat.h): socket cookie and
// backend → the frontend the socket asked for. The programs alone write
// it; the Go side sizes it, and reads it in tests.

// skKey is a translated socket (its cookie) and the backend it talks to.
type skKey struct {
	Cookie uint64
	Addr   [16]byte
	Port   [2]byte
	Pad    uint16
	Pad2   uint32
}

// skVal is the frontend the socket asked for.
type skVal struct {
	Addr [16]byte
	Port [2]byte
	Pad  uint16
}

// Sizes of the C structs, in bytes.
const (
	skKeySize = 32
	skValSize = 20
)
