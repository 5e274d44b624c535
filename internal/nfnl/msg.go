package nfnl

import (
	"fmt"
)

// Table is an nf_tables table.
type Table struct {
	// Name is the table's name.
	Name string
	// Flags are NFT_TABLE_F_* (dormant, owner…).
	Flags uint32
	// Handle is the kernel's handle of the table (dumps only).
	Handle uint64
	// Use is the table's use count (dumps only).
	Use uint32
}

// Append appends t's attributes: name and flags, and in a dump reply
// (full) its handle and use count.
func (t *Table) Append(w *Writer, full bool) {
	w.Str(TableName, t.Name)
	w.U32(TableFlags, t.Flags)
	if full {
		w.U32(TableUse, t.Use)
		w.U64(TableHandle, t.Handle)
	}
}

// ParseTable parses a table message's attributes.
func ParseTable(b []byte) (Table, error) {
	var t Table
	a := NewAttrs(b)
	for a.Next() {
		switch a.Type() {
		case TableName:
			t.Name = a.Str()
		case TableFlags:
			t.Flags = a.U32()
		case TableHandle:
			t.Handle = a.U64()
		case TableUse:
			t.Use = a.U32()
		}
	}
	return t, wrap("table", a.Err())
}

func wrap(what string, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// Hook is a base chain's hook.
type Hook struct {
	// Num is the hook (NF_INET_*).
	Num uint32
	// Priority orders the base chains of a hook.
	Priority int32
}

// Chain is an nf_tables chain; Hook is set for a base chain.
type Chain struct {
	// Table and Name name the chain.
	Table, Name string
	// Handle is the kernel's handle of the chain.
	Handle uint64
	// Hook, Policy and Type are a base chain's.
	Hook   *Hook
	Policy *uint32
	Type   string
	// Use counts the references to the chain and its rules (dumps only).
	Use uint32
	// Flags are NFT_CHAIN_* flags (dumps only).
	Flags uint32
	// ID names a chain created in the same transaction.
	ID uint32
}

// Append appends c's attributes; a dump reply (full) also carries its
// handle, use count and flags.
func (c *Chain) Append(w *Writer, full bool) {
	w.Str(ChainTable, c.Table)
	if c.Name != "" {
		w.Str(ChainName, c.Name)
	}
	if c.Handle != 0 && (full || c.Name == "") {
		w.U64(ChainHandle, c.Handle)
	}
	if c.Hook != nil {
		n := w.Open(ChainHook)
		w.U32(HookNum, c.Hook.Num)
		w.U32(HookPriority, uint32(c.Hook.Priority))
		w.Close(n)
	}
	if c.Policy != nil {
		w.U32(ChainPolicy, *c.Policy)
	}
	if c.Type != "" {
		w.Str(ChainType, c.Type)
	}
	if c.ID != 0 {
		w.U32(ChainID, c.ID)
	}
	if full {
		w.U32(ChainUse, c.Use)
		w.U32(ChainFlags, c.Flags)
	}
}

// ParseChain parses a chain message's attributes.
func ParseChain(b []byte) (Chain, error) {
	var c Chain
	a := NewAttrs(b)
	for a.Next() {
		switch a.Type() {
		case ChainTable:
			c.Table = a.Str()
		case ChainName:
			c.Name = a.Str()
		case ChainHandle:
			c.Handle = a.U64()
		case ChainHook:
			h := &Hook{}
			n := NewAttrs(a.Value())
			for n.Next() {
				switch n.Type() {
				case HookNum:
					h.Num = n.U32()
				case HookPriority:
					h.Priority = int32(n.U32())
				}
			}
			if err := n.Err(); err != nil {
				return c, wrap("chain hook", err)
			}
			c.Hook = h
		case ChainPolicy:
			p := a.U32()
			c.Policy = &p
		case ChainType:
			c.Type = a.Str()
		case ChainUse:
			c.Use = a.U32()
		case ChainFlags:
			c.Flags = a.U32()
		case ChainID:
			c.ID = a.U32()
		}
	}
	return c, wrap("chain", a.Err())
}

// Rule is an nf_tables rule. Exprs is the payload of NFTA_RULE_EXPRESSIONS
// (a list of NFTA_LIST_ELEM), kept encoded.
type Rule struct {
	// Table and Chain name where the rule is.
	Table, Chain string
	// Handle is the rule's handle.
	Handle uint64
	// Position is the handle of the rule a new rule goes after (with
	// NLM_F_APPEND) or before.
	Position uint64
	// ID names a rule of a transaction; PositionID is the ID of the rule
	// of the same transaction a new rule goes after or before.
	ID, PositionID uint32
	// ChainID names a chain of the same transaction.
	ChainID uint32
	// Exprs is the payload of NFTA_RULE_EXPRESSIONS.
	Exprs []byte
	// UserData is the rule's user data (its comment).
	UserData []byte
}

// Append appends r's attributes.
func (r *Rule) Append(w *Writer) {
	w.Str(RuleTable, r.Table)
	if r.Chain != "" {
		w.Str(RuleChain, r.Chain)
	}
	if r.ChainID != 0 {
		w.U32(RuleChainID, r.ChainID)
	}
	if r.Handle != 0 {
		w.U64(RuleHandle, r.Handle)
	}
	if r.Position != 0 {
		w.U64(RulePosition, r.Position)
	}
	if r.PositionID != 0 {
		w.U32(RulePositionID, r.PositionID)
	}
	if r.Exprs != nil {
		n := w.Open(RuleExprs)
		w.Raw(r.Exprs)
		w.Close(n)
	}
	if r.UserData != nil {
		w.Bytes(RuleUserData, r.UserData)
	}
	if r.ID != 0 {
		w.U32(RuleID, r.ID)
	}
}

// ParseRule parses a rule message's attributes; Exprs and UserData point
// into b.
func ParseRule(b []byte) (Rule, error) {
	var r Rule
	a := NewAttrs(b)
	for a.Next() {
		switch a.Type() {
		case RuleTable:
			r.Table = a.Str()
		case RuleChain:
			r.Chain = a.Str()
		case RuleHandle:
			r.Handle = a.U64()
		case RulePosition:
			r.Position = a.U64()
		case RuleID:
			r.ID = a.U32()
		case RulePositionID:
			r.PositionID = a.U32()
		case RuleChainID:
			r.ChainID = a.U32()
		case RuleExprs:
			r.Exprs = a.Value()
		case RuleUserData:
			r.UserData = a.Value()
		}
	}
	return r, wrap("rule", a.Err())
}

// Set is an nf_tables set or map.
type Set struct {
	// Table and Name name the set.
	Table, Name string
	// Flags are NFT_SET_* flags.
	Flags uint32
	// KeyType and KeyLen are the key's datatype and length.
	KeyType, KeyLen uint32
	// DataType and DataLen are a map's data's.
	DataType, DataLen uint32
	// ID names a set of the same transaction.
	ID uint32
	// Handle is the kernel's handle of the set.
	Handle uint64
	// Fields are the lengths of a concatenation's fields (NFTA_SET_DESC_CONCAT).
	Fields []uint32
	// Size is NFTA_SET_DESC_SIZE (0: none).
	Size     uint32
	UserData []byte
}

// Append appends s's attributes; a dump reply (full) carries its handle.
func (s *Set) Append(w *Writer, full bool) {
	w.Str(SetTable, s.Table)
	w.Str(SetName, s.Name)
	w.U32(SetFlags, s.Flags)
	w.U32(SetKeyType, s.KeyType)
	w.U32(SetKeyLen, s.KeyLen)
	if s.Flags&SetMap != 0 {
		w.U32(SetDataType, s.DataType)
		w.U32(SetDataLen, s.DataLen)
	}
	if s.Size != 0 || len(s.Fields) > 0 {
		d := w.Open(SetDesc)
		if s.Size != 0 {
			w.U32(DescSize, s.Size)
		}
		if len(s.Fields) > 0 {
			c := w.Open(DescConcat)
			for _, f := range s.Fields {
				e := w.Open(ListElem)
				w.U32(FieldLen, f)
				w.Close(e)
			}
			w.Close(c)
		}
		w.Close(d)
	}
	if s.ID != 0 {
		w.U32(SetID, s.ID)
	}
	if s.UserData != nil {
		w.Bytes(SetUserData, s.UserData)
	}
	if full {
		w.U64(SetHandle, s.Handle)
	}
}

// ParseSet parses a set message's attributes; Fields is allocated, UserData
// points into b.
func ParseSet(b []byte) (Set, error) {
	var s Set
	a := NewAttrs(b)
	for a.Next() {
		switch a.Type() {
		case SetTable:
			s.Table = a.Str()
		case SetName:
			s.Name = a.Str()
		case SetFlags:
			s.Flags = a.U32()
		case SetKeyType:
			s.KeyType = a.U32()
		case SetKeyLen:
			s.KeyLen = a.U32()
		case SetDataType:
			s.DataType = a.U32()
		case SetDataLen:
			s.DataLen = a.U32()
		case SetID:
			s.ID = a.U32()
		case SetHandle:
			s.Handle = a.U64()
		case SetUserData:
			s.UserData = a.Value()
		case SetDesc:
			d := NewAttrs(a.Value())
			for d.Next() {
				switch d.Type() {
				case DescSize:
					s.Size = d.U32()
				case DescConcat:
					c := NewAttrs(d.Value())
					for c.Next() {
						f := NewAttrs(c.Value())
						for f.Next() {
							if f.Type() == FieldLen {
								s.Fields = append(s.Fields, f.U32())
							}
						}
						if err := f.Err(); err != nil {
							return s, wrap("set field", err)
						}
					}
					if err := c.Err(); err != nil {
						return s, wrap("set concat", err)
					}
				}
			}
			if err := d.Err(); err != nil {
				return s, wrap("set desc", err)
			}
		}
	}
	return s, wrap("set", a.Err())
}

// Verdict is the data of a verdict map element (or a rule's verdict).
type Verdict struct {
	// Code is the verdict (NF_ACCEPT, NFT_JUMP…).
	Code int32
	// Chain is a jump's or goto's chain.
	Chain string
}

// String returns the verdict as nft writes it: "accept", "drop",
// "return", "jump c", "goto c"; any other code as "verdict N".
func (v Verdict) String() string {
	switch v.Code {
	case VerdictAccept:
		return "accept"
	case VerdictDrop:
		return "drop"
	case VerdictReturn:
		return "return"
	case VerdictJump:
		return "jump " + v.Chain
	case VerdictGoto:
		return "goto " + v.Chain
	}
	return fmt.Sprintf("verdict %d", v.Code)
}

// Elem is one set element. Key, KeyEnd and Data point into the message
// they were parsed from.
type Elem struct {
	// Key is the element's key; KeyEnd the end of its range in a set of
	// concatenated ranges.
	Key, KeyEnd []byte
	// Flags are NFT_SET_ELEM_* flags (the end of a range).
	Flags uint32
	// Data is a data map's value, Verdict a verdict map's.
	Data    []byte
	Verdict *Verdict
	// Offset is where the element's NFTA_LIST_ELEM starts in its message
	// (from the message header), for parsed elements.
	Offset int
}

// AppendElem appends one element as an NFTA_LIST_ELEM of an open
// NFTA_SET_ELEM_LIST_ELEMENTS.
func (w *Writer) AppendElem(e *Elem) {
	appendElem(w, e.Key, e.KeyEnd, e.Flags, e.Verdict, e.Data)
}

// AppendElemString is AppendElem for a key (and key end, when not "")
// held in strings, without allocating.
func (w *Writer) AppendElemString(key, keyEnd string, flags uint32, verdict *Verdict) {
	appendElem(w, key, keyEnd, flags, verdict, "")
}

// appendElem appends the element of key, keyEnd (none when empty), flags
// and verdict or data (none when nil, or empty).
func appendElem[S string | []byte](w *Writer, key, keyEnd S, flags uint32, verdict *Verdict, data S) {
	n := w.Open(ListElem)
	if flags != 0 {
		w.U32(ElemFlags, flags)
	}
	k := w.Open(ElemKey)
	bytesAttr(w, DataValue, key)
	w.Close(k)
	if len(keyEnd) > 0 {
		k := w.Open(ElemKeyEnd)
		bytesAttr(w, DataValue, keyEnd)
		w.Close(k)
	}
	switch {
	case verdict != nil:
		d := w.Open(ElemData)
		v := w.Open(DataVerdict)
		w.U32(VerdictCode, uint32(verdict.Code))
		if verdict.Chain != "" {
			w.Str(VerdictChain, verdict.Chain)
		}
		w.Close(v)
		w.Close(d)
	case len(data) > 0:
		d := w.Open(ElemData)
		bytesAttr(w, DataValue, data)
		w.Close(d)
	}
	w.Close(n)
}

// ElemList is the header of a set element message: its table and set
// (by name, or by ID for a set of the same transaction).
type ElemList struct {
	// Table and Set name the set; SetID one of the same transaction.
	Table, Set string
	SetID      uint32
	// Elems is the payload of NFTA_SET_ELEM_LIST_ELEMENTS, and ElemsOffset
	// where it starts in the message (from the message header).
	Elems       []byte
	ElemsOffset int
}

// AppendHeader appends the table and set of an element message; the caller
// then opens ElemListElems and appends the elements.
func (l *ElemList) AppendHeader(w *Writer) {
	w.Str(ElemListTable, l.Table)
	if l.Set != "" {
		w.Str(ElemListSet, l.Set)
	}
	if l.SetID != 0 {
		w.U32(ElemListSetID, l.SetID)
	}
}

// ParseElemList parses an element message's attributes (b, starting
// base bytes after the message header).
func ParseElemList(b []byte, base int) (ElemList, error) {
	var l ElemList
	a := NewAttrs(b)
	for a.Next() {
		switch a.Type() {
		case ElemListTable:
			l.Table = a.Str()
		case ElemListSet:
			l.Set = a.Str()
		case ElemListSetID:
			l.SetID = a.U32()
		case ElemListElems:
			l.Elems = a.Value()
		}
	}
	if l.Elems != nil {
		l.ElemsOffset = base + (cap(b) - cap(l.Elems))
	}
	return l, wrap("element list", a.Err())
}

// ForEachElem calls fn for each element of an element list's Elems; the
// elements' slices point into it. Offsets are relative to the message
// header when l came from ParseElemList.
func (l *ElemList) ForEachElem(fn func(e *Elem) error) error {
	a := NewAttrs(l.Elems)
	var e Elem
	for a.Next() {
		e = Elem{Offset: l.ElemsOffset + (cap(l.Elems) - cap(a.Value())) - 4}
		if err := parseElem(a.Value(), &e); err != nil {
			return err
		}
		if err := fn(&e); err != nil {
			return err
		}
	}
	return wrap("elements", a.Err())
}

func parseElem(b []byte, e *Elem) error {
	a := NewAttrs(b)
	for a.Next() {
		switch a.Type() {
		case ElemFlags:
			e.Flags = a.U32()
		case ElemKey, ElemKeyEnd:
			var v []byte
			k := NewAttrs(a.Value())
			for k.Next() {
				if k.Type() == DataValue {
					v = k.Value()
				}
			}
			if err := k.Err(); err != nil {
				return wrap("element key", err)
			}
			if a.Type() == ElemKey {
				e.Key = v
			} else {
				e.KeyEnd = v
			}
		case ElemData:
			d := NewAttrs(a.Value())
			for d.Next() {
				switch d.Type() {
				case DataValue:
					e.Data = d.Value()
				case DataVerdict:
					v, err := ParseVerdict(d.Value())
					if err != nil {
						return err
					}
					e.Verdict = &v
				}
			}
			if err := d.Err(); err != nil {
				return wrap("element data", err)
			}
		}
	}
	return wrap("element", a.Err())
}

// ParseVerdict parses the payload of an NFTA_DATA_VERDICT.
func ParseVerdict(b []byte) (Verdict, error) {
	var v Verdict
	a := NewAttrs(b)
	for a.Next() {
		switch a.Type() {
		case VerdictCode:
			v.Code = int32(a.U32())
		case VerdictChain:
			v.Chain = a.Str()
		}
	}
	return v, wrap("verdict", a.Err())
}

// ParseGen parses NFT_MSG_NEWGEN's payload: the generation ID.
func ParseGen(b []byte) (uint32, error) {
	var id uint32
	a := NewAttrs(b)
	for a.Next() {
		if a.Type() == GenID {
			id = a.U32()
		}
	}
	return id, wrap("generation", a.Err())
}
