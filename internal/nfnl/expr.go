package nfnl

// WalkExprs calls fn with the name and data of each expression of a rule's
// NFTA_RULE_EXPRESSIONS payload, in order.
func WalkExprs(exprs []byte, fn func(name string, data []byte) error) error {
	a := NewAttrs(exprs)
	for a.Next() {
		var name string
		var data []byte
		e := NewAttrs(a.Value())
		for e.Next() {
			switch e.Type() {
			case ExprName:
				name = exprName(e.Value())
			case ExprData:
				data = e.Value()
			}
		}
		if err := e.Err(); err != nil {
			return wrap("expression", err)
		}
		if err := fn(name, data); err != nil {
			return err
		}
	}
	return wrap("expressions", a.Err())
}

// exprNames are the expressions of the kernel by name, so that walking
// expressions allocates no name.
var exprNames = map[string]string{}

func init() {
	for _, n := range []string{
		"bitwise", "byteorder", "cmp", "connlimit", "counter", "ct", "dup", "dynset", "exthdr",
		"fib", "flow_offload", "fwd", "hash", "immediate", "inner", "last", "limit", "log",
		"lookup", "masq", "match", "meta", "nat", "notrack", "numgen", "objref", "osf",
		"payload", "queue", "quota", "range", "redir", "reject", "rt", "socket", "synproxy",
		"target", "tproxy", "tunnel", "xfrm",
	} {
		exprNames[n] = n
	}
}

// exprName is the NUL-terminated name b as a string, allocated only for a
// name the kernel does not know.
func exprName(b []byte) string {
	for i, c := range b {
		if c == 0 {
			b = b[:i]
			break
		}
	}
	if n, ok := exprNames[string(b)]; ok {
		return n
	}
	return string(b)
}

// ImmediateVerdict returns the verdict an immediate expression's data
// loads into the verdict register, if it does.
func ImmediateVerdict(data []byte) (Verdict, bool, error) {
	var v Verdict
	verdict, dregVerdict := false, false
	a := NewAttrs(data)
	for a.Next() {
		switch a.Type() {
		case ImmediateDreg:
			dregVerdict = a.U32() == RegVerdict
		case ImmediateData:
			d := NewAttrs(a.Value())
			for d.Next() {
				if d.Type() == DataVerdict {
					var err error
					if v, err = ParseVerdict(d.Value()); err != nil {
						return v, false, err
					}
					verdict = true
				}
			}
			if err := d.Err(); err != nil {
				return v, false, wrap("immediate data", err)
			}
		}
	}
	return v, verdict && dregVerdict, wrap("immediate", a.Err())
}

// Lookup is what a lookup expression refers to.
type Lookup struct {
	// Set names the set looked up; SetID one of the same transaction.
	Set   string
	SetID uint32
	// Sreg is the first register of the key, Dreg where a map's data goes
	// (when HasDreg).
	Sreg, Dreg uint32
	HasDreg    bool
	// Flags are NFT_LOOKUP_F_* (inverted lookup).
	Flags uint32
}

// ParseLookup parses a lookup expression's data.
func ParseLookup(data []byte) (Lookup, error) {
	var l Lookup
	a := NewAttrs(data)
	for a.Next() {
		switch a.Type() {
		case LookupSet:
			l.Set = a.Str()
		case LookupSetID:
			l.SetID = a.U32()
		case LookupSreg:
			l.Sreg = a.U32()
		case LookupDreg:
			l.Dreg, l.HasDreg = a.U32(), true
		case LookupFlags:
			l.Flags = a.U32()
		}
	}
	return l, wrap("lookup", a.Err())
}

// ParseCounter parses a counter expression's data.
func ParseCounter(data []byte) (packets, bytes uint64, err error) {
	a := NewAttrs(data)
	for a.Next() {
		switch a.Type() {
		case CounterPackets:
			packets = a.U64()
		case CounterBytes:
			bytes = a.U64()
		}
	}
	return packets, bytes, wrap("counter", a.Err())
}
