package iptables

import (
	"strconv"
	"strings"
)

// The package has one rendering implementation (render.go): criteria and
// actions append their arguments, already in iptables-restore form, to a
// byte slice through a tokWriter. The Table writes a rule's text straight
// into the buffer it keeps for the chain; RuleArgs splits that same text
// back into arguments (splitTokens).

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
