package proxy

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"slices"

	"github.com/nodeplane/nodeplane/cluster"
)

// MaglevOptions turn on Maglev consistent hashing for the connections
// that arrive from outside the node (on a host interface: node ports,
// external and load-balancer IPs). Each service with such frontends, of
// externalTrafficPolicy Cluster and without session affinity, gets, per
// family, a lookup table of TableSize slots that every node computes alike
// from the service's backends; a new connection's slot is a hash of the
// client's address, port and protocol. So a client's connection reaches
// the same backend whichever node a load balancer in front sends it to —
// also when that choice changes mid-connection — and a backend that comes
// or goes moves only about 1/N of the clients (N backends). The other
// connections (pods, the node's own processes, externalTrafficPolicy
// Local, session affinity) pick as before.
//
// Every node must run the same TableSize and see the same backends for
// their tables to agree. A table takes TableSize entries of the Maglev
// map per service and family.
type MaglevOptions struct {
	// Enabled turns the tables on.
	Enabled bool
	// TableSize is the number of slots of every table, one of
	// MaglevTableSizes; zero means DefaultMaglevTableSize. The spread over
	// backends is even to within about N/TableSize: keep it well above
	// 100 times the largest number of backends of a service. A service
	// with more backends than TableSize gets no table (its backends are
	// picked at random).
	TableSize uint32
	// Entries sizes the map that holds the tables (no memory is taken
	// before an entry is written); zero means DefaultMaglevEntries. A
	// service whose tables do not fit waits, whole (ErrMapFull). While the
	// tables are off the map has a single entry.
	Entries uint32
}

// MaglevTableSizes are the table sizes MaglevOptions.TableSize may take:
// primes, as the algorithm needs.
var MaglevTableSizes = []uint32{251, 509, 1021, 2039, 4093, 8191, 16381, 32749, 65521}

// Maglev defaults.
const (
	DefaultMaglevTableSize = 1021
	DefaultMaglevEntries   = 262144
)

// withDefaults checks o and fills in its defaults.
func (o MaglevOptions) withDefaults() (MaglevOptions, error) {
	o.TableSize = orDefault(o.TableSize, DefaultMaglevTableSize)
	o.Entries = orDefault(o.Entries, DefaultMaglevEntries)
	if !slices.Contains(MaglevTableSizes, o.TableSize) {
		return o, fmt.Errorf("%w: Maglev TableSize %d is not one of %v", ErrInvalidOptions, o.TableSize, MaglevTableSizes)
	}
	return o, nil
}

// maglevTables returns the Maglev tables of service s with entries e, per
// family (nil for a family without backends), or none: the tables are
// off, the service has no frontend for clients outside the cluster (no
// node port, external or load-balancer IP), or it has
// externalTrafficPolicy Local or session affinity.
func (p *Proxy) maglevTables(s cluster.Service, e entries) [2][]beVal {
	var tables [2][]beVal
	outside := s.NodePort != 0 || len(s.ExternalIPs) > 0 || len(s.LoadBalancerIPs) > 0
	if !p.o.Maglev.Enabled || !outside || s.ExternalTrafficLocal || e.affinity != 0 {
		return tables
	}
	for fam := range tables {
		// More backends than slots: some would get none; the family's
		// backends are picked at random instead.
		// (Traffic from outside is spread over the backends after the
		// local-only ones.)
		if bs := e.backends[fam][e.localOnly[fam]:]; len(bs) <= int(p.o.Maglev.TableSize) {
			tables[fam] = maglevTable(bs, e.local[fam]-e.localOnly[fam], p.o.Maglev.TableSize)
		}
	}
	return tables
}

// mgKey is a slot of a service's Maglev table (np_maglev_key).
type mgKey struct {
	SvcID uint32
	Slot  uint32
}

// beLocal marks a backend of this node in a Maglev table (np_be_val.flags).
const beLocal uint16 = 0x1

// maglevTable returns the Maglev table of size m (a prime) over backends,
// whose first local are this node's: per slot, the backend with beLocal
// set on a local one. The table depends only on the set of backends (not
// on their order, nor on which are local), so that every node computes the
// same one.
func maglevTable(backends []beVal, local uint32, m uint32) []beVal {
	if len(backends) == 0 {
		return nil
	}
	bs := make([]beVal, len(backends))
	for i, b := range backends {
		b.Flags = 0
		if uint32(i) < local {
			b.Flags = beLocal
		}
		bs[i] = b
	}
	// The algorithm's preference lists are walked in a fixed order: the
	// backends' addresses and ports.
	slices.SortFunc(bs, func(a, b beVal) int {
		if c := slices.Compare(a.Addr[:], b.Addr[:]); c != 0 {
			return c
		}
		return slices.Compare(a.Port[:], b.Port[:])
	})
	offset := make([]uint64, len(bs))
	skip := make([]uint64, len(bs))
	for i, b := range bs {
		offset[i] = maglevNameHash(b, 'o') % uint64(m)
		skip[i] = maglevNameHash(b, 's')%uint64(m-1) + 1
	}
	owner := make([]int32, m)
	for i := range owner {
		owner[i] = -1
	}
	next := make([]uint64, len(bs))
	for filled := uint32(0); ; {
		for i := range bs {
			// Backend i's next preferred slot that is still free.
			c := (offset[i] + next[i]*skip[i]) % uint64(m)
			for owner[c] >= 0 {
				next[i]++
				c = (offset[i] + next[i]*skip[i]) % uint64(m)
			}
			owner[c] = int32(i)
			next[i]++
			if filled++; filled == m {
				table := make([]beVal, m)
				for s, o := range owner {
					table[s] = bs[o]
				}
				return table
			}
		}
	}
}

// maglevNameHash hashes a backend's address and port with a salt, for its
// offset ('o') and skip ('s') in the table.
func maglevNameHash(b beVal, salt byte) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte{salt})
	_, _ = h.Write(b.Addr[:])
	_, _ = h.Write(b.Port[:])
	return h.Sum64()
}

// maglevHash is the program's np_maglev_hash: the hash of a client's
// address (16 bytes, IPv4 mapped), port (network byte order, as the
// packet carries it) and protocol whose remainder by the table size is
// its slot.
func maglevHash(addr [16]byte, port [2]byte, proto uint8) uint32 {
	h := uint32(0x9e3779b9)
	for i := range 4 {
		h ^= binary.LittleEndian.Uint32(addr[4*i:])
		h *= 0x85ebca6b
		h ^= h >> 13
	}
	sport := uint32(binary.LittleEndian.Uint16(port[:]))
	h ^= sport<<8 | uint32(proto)
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}
