package iptables

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// The package has one rendering implementation: criteria and actions append
// their arguments, already in iptables-restore form, to a byte slice
// through a tokWriter. The Table writes a rule's text straight into the
// buffer it keeps for the chain; Rule.Args and the iptablesArgs methods
// split that same text back into arguments (splitTokens).

// tokWriter appends iptables-restore tokens to b, separated by one space
// and quoted where needed (appendQuoted).
type tokWriter struct {
	b []byte
	// start is where the current run of tokens begins in b: the first
	// token written at start gets no leading space. With start -1 every
	// token gets one (a fragment to splice into another run).
	start int
}

// sep writes the space before a token.
func (w *tokWriter) sep() {
	if len(w.b) > w.start {
		w.b = append(w.b, ' ')
	}
}

// tok writes s as one token.
func (w *tokWriter) tok(s string) {
	w.sep()
	w.b = appendQuoted(w.b, s)
}

// lit writes s, one of the package's option or target names, which never
// needs quoting, as one token.
func (w *tokWriter) lit(s string) {
	w.sep()
	w.b = append(w.b, s...)
}

// neg writes "!" when negate is set.
func (w *tokWriter) neg(negate bool) {
	if negate {
		w.lit("!")
	}
}

// uint writes x in decimal as one token.
func (w *tokWriter) uint(x uint64) {
	w.sep()
	w.b = strconv.AppendUint(w.b, x, 10)
}

// begin starts a token whose text the caller appends to w.b itself; end
// finishes it. It returns where the token's text starts.
func (w *tokWriter) begin() int {
	w.sep()
	return len(w.b)
}

// end finishes the token started at n by begin, quoting it if its text
// needs it.
func (w *tokWriter) end(n int) {
	if needsQuote(w.b[n:]) {
		text := string(w.b[n:])
		w.b = appendQuoted(w.b[:n], text)
	}
}

// splice writes a fragment written by a tokWriter with start -1 (every
// token preceded by a space).
func (w *tokWriter) splice(frag []byte) {
	if len(frag) == 0 {
		return
	}
	if len(w.b) == w.start {
		frag = frag[1:]
	}
	w.b = append(w.b, frag...)
}

// needsQuote reports whether a token must be written in double quotes:
// when it is empty or holds a blank, a quote or a backslash.
func needsQuote[T string | []byte](s T) bool {
	if len(s) == 0 {
		return true
	}
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ', '\t', '"', '\\', '\'':
			return true
		}
	}
	return false
}

// appendQuoted appends arg as one iptables-restore token: as is when it
// has no blank, quote or backslash, else in double quotes with quotes and
// backslashes escaped (iptables-restore reads backslash escapes only inside
// quotes).
func appendQuoted(b []byte, arg string) []byte {
	if !needsQuote(arg) {
		return append(b, arg...)
	}
	b = append(b, '"')
	for i := 0; i < len(arg); i++ {
		if c := arg[i]; c == '"' || c == '\\' {
			b = append(b, '\\')
		}
		b = append(b, arg[i])
	}
	return append(b, '"')
}

// splitTokens splits text written by a tokWriter back into its tokens,
// undoing the quoting of appendQuoted. Unquoted tokens share text's
// memory.
func splitTokens(text string) []string {
	if text == "" {
		return nil
	}
	out := make([]string, 0, strings.Count(text, " ")+1)
	for i := 0; i < len(text); i++ {
		if i < len(text) && text[i] == '"' {
			// A quoted token: up to the closing quote, with escapes.
			j, esc := i+1, false
			for j < len(text) && text[j] != '"' {
				if text[j] == '\\' {
					esc = true
					j++
				}
				j++
			}
			tok := text[i+1 : min(j, len(text))]
			if esc {
				var b strings.Builder
				for k := 0; k < len(tok); k++ {
					if tok[k] == '\\' && k+1 < len(tok) {
						k++
					}
					b.WriteByte(tok[k])
				}
				tok = b.String()
			}
			out = append(out, tok)
			i = j + 1 // the space after the closing quote
			continue
		}
		j := strings.IndexByte(text[i:], ' ')
		if j < 0 {
			j = len(text) - i
		}
		out = append(out, text[i:i+j])
		i += j
	}
	return out
}

// ruleRender collects the rendering of one rule for one IP version. It is
// reused from rule to rule (reset), so rendering a chain allocates little.
type ruleRender struct {
	v IPVersion
	// at is where the rule is declared, for the criteria and actions the
	// kernel allows in some tables and chains only; zero for a rule
	// rendered alone (Rule.Args).
	at placement
	// Header criteria, rendered first in this order (iptables-save's).
	src, dst netArg
	in, out  ifaceArg
	proto    protoArg
	// mods holds the other criteria's tokens, in order (start -1: each
	// token preceded by a space).
	mods tokWriter

	// protoNum is the rule's protocol, from its ProtoMatch or implied by
	// an ICMP criterion; protoNeg says the ProtoMatch is negated, and
	// protoCriterion that the Match has a ProtoMatch.
	protoNum       Proto
	protoNeg       bool
	protoCriterion bool

	// srcPorts and dstPorts record a PortMatch per direction; sport and
	// dport are the single-range ones, which share one protocol match
	// inserted into mods at byte offset portAt.
	srcPorts, dstPorts bool
	sport, dport       portArg
	portAt             int

	// crit is working space: the rule's criteria, dereferenced.
	crit []Criterion
	// w is where appendRestore writes the rule (a field, so that passing
	// it to an action does not move it to the heap).
	w tokWriter
}

// netArg is a rendered -s or -d criterion.
type netArg struct {
	set, neg bool
	p        netip.Prefix
}

// ifaceArg is a rendered -i or -o criterion.
type ifaceArg struct {
	set, neg bool
	name     string
}

// protoArg is a rendered -p criterion.
type protoArg struct {
	set, neg bool
	p        Proto
}

// portArg is a rendered --sport or --dport option.
type portArg struct {
	set, neg bool
	r        PortRange
}

// placement is where a rule is declared: its table, and the built-in chain
// it is in ("" for an owned chain, which the kernel checks against the
// built-in chains that reach it only when the rule is written).
type placement struct {
	table, chain string
}

// reset prepares st for a rule of version v declared at at, keeping its
// buffers.
func (st *ruleRender) reset(v IPVersion, at placement) {
	mods, crit := st.mods.b[:0], st.crit[:0]
	*st = ruleRender{v: v, at: at, mods: tokWriter{b: mods, start: -1}, crit: crit}
}

// allowed checks what (a target or an option) against where the rule is
// declared: the kernel accepts it only in table (any when "") and only in
// the built-in chains chains (any when none), or in the chains they call.
func (st *ruleRender) allowed(what, table string, chains ...string) error {
	if table != "" && st.at.table != "" && st.at.table != table {
		return errRulef("%s is allowed only in the %s table, not in %s", what, table, st.at.table)
	}
	if len(chains) > 0 && st.at.chain != "" && !slices.Contains(chains, st.at.chain) {
		return errRulef("%s is not allowed in %s (only in %s)", what, st.at.chain, strings.Join(chains, ", "))
	}
	return nil
}

// renderMatch renders the criteria of m into st.
func (st *ruleRender) renderMatch(m Match) error {
	defer clear(st.crit) // do not keep the caller's criteria alive
	for i, c := range m {
		c, err := derefValue(c, "criterion")
		if err != nil {
			return fmt.Errorf("%w (criterion %d)", err, i)
		}
		st.crit = append(st.crit, c)
		if p, ok := c.(ProtoMatch); ok {
			if st.protoCriterion {
				return errRulef("more than one protocol criterion (criterion %d)", i)
			}
			st.protoCriterion, st.protoNum, st.protoNeg = true, p.Proto, p.Negate
		}
	}
	for i, c := range st.crit {
		var err error
		if cr, ok := c.(criterionRenderer); ok {
			err = cr.render(st)
		} else {
			err = writeArgs(&st.mods, c.iptablesArgs, st.v)
		}
		if err != nil {
			return fmt.Errorf("%w (criterion %d)", err, i)
		}
	}
	return nil
}

// criterionRenderer is implemented by the package's criteria: render
// checks the criterion against the rule rendered so far and adds its
// arguments to st.
type criterionRenderer interface {
	render(st *ruleRender) error
}

// actionRenderer is implemented by the package's actions: render checks
// the action against the rendered criteria st and writes its arguments
// to w.
type actionRenderer interface {
	render(st *ruleRender, w *tokWriter) error
}

// writeArgs writes the arguments that args returns for v, for a criterion
// or action that is not one of the package's own.
func writeArgs(w *tokWriter, args func(IPVersion) ([]string, error), v IPVersion) error {
	a, err := args(v)
	if err != nil {
		return err
	}
	for _, s := range a {
		w.tok(s)
	}
	return nil
}

// appendMatch writes the rendered criteria to w: the header criteria,
// then the others with the shared port match at its place. It returns the
// length of the header criteria's text.
func (st *ruleRender) appendMatch(w *tokWriter) int {
	st.src.write(w, "-s")
	st.dst.write(w, "-d")
	st.in.write(w, "-i")
	st.out.write(w, "-o")
	if st.proto.set {
		w.neg(st.proto.neg)
		w.lit("-p")
		writeProto(w, st.proto.p)
	}
	cut := len(w.b) - w.start
	mods := st.mods.b
	if !st.sport.set && !st.dport.set {
		w.splice(mods)
		return cut
	}
	w.splice(mods[:st.portAt])
	w.lit("-m")
	writeProto(w, st.protoNum)
	st.sport.write(w, "--sport")
	st.dport.write(w, "--dport")
	w.splice(mods[st.portAt:])
	return cut
}

func (a *netArg) write(w *tokWriter, opt string) {
	if !a.set {
		return
	}
	w.neg(a.neg)
	w.lit(opt)
	n := w.begin()
	w.b = a.p.AppendTo(w.b)
	w.end(n)
}

func (a *ifaceArg) write(w *tokWriter, opt string) {
	if !a.set {
		return
	}
	w.neg(a.neg)
	w.lit(opt)
	w.tok(a.name)
}

func (a *portArg) write(w *tokWriter, opt string) {
	if !a.set {
		return
	}
	w.neg(a.neg)
	w.lit(opt)
	w.sep()
	w.b = a.r.appendTo(w.b, ':')
}

// module writes "-m name [!] opt" to the criteria.
func (st *ruleRender) module(name string, negate bool, opt string) {
	st.mods.lit("-m")
	st.mods.lit(name)
	st.mods.neg(negate)
	st.mods.lit(opt)
}

// writeProto writes a protocol as iptables names it (Proto.String).
func writeProto(w *tokWriter, p Proto) {
	if n := p.name(); n != "" {
		w.lit(n)
		return
	}
	w.uint(uint64(p))
}

// appendRestore appends the rule's arguments for version v to dst in
// iptables-restore form (tokens separated by one space, quoted where
// needed): header criteria (-s, -d, -i, -o, -p), the other criteria in
// order, the comments, then the action. It returns the grown dst and the
// length of the header criteria's text (where the Table puts its hash
// comment). Declared at a table and chain (at), it also checks the
// targets and options the kernel allows only in some of them. st is
// working space. On error dst is returned unchanged.
func (r Rule) appendRestore(dst []byte, v IPVersion, at placement, st *ruleRender) ([]byte, int, error) {
	if !v.Valid() {
		return dst, 0, errRulef("unknown IP version %v", v)
	}
	action, err := normalizeAction(r.Action)
	if err != nil {
		return dst, 0, err
	}
	st.reset(v, at)
	if err := st.renderMatch(r.Match); err != nil {
		return dst, 0, err
	}
	for i, c := range r.Comments {
		if err := validateComment(c); err != nil {
			return dst, 0, fmt.Errorf("%w (comment %d)", err, i)
		}
	}
	st.w = tokWriter{b: dst, start: len(dst)}
	w := &st.w
	cut := st.appendMatch(w)
	for _, c := range r.Comments {
		w.lit("-m")
		w.lit("comment")
		w.lit("--comment")
		w.tok(c)
	}
	if ar, ok := action.(actionRenderer); ok {
		err = ar.render(st, w)
	} else {
		err = writeArgs(w, action.iptablesArgs, v)
	}
	b := w.b
	st.w = tokWriter{}
	if err != nil {
		return dst, 0, err
	}
	return b, cut, nil
}
