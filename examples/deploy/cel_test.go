package deploy

// A syntax check of CEL for the admission policy's expressions. The examples
// module has neither k8s.io/apiserver's CEL library nor github.com/google/cel-go
// in its module graph, and a test of four manifests is no reason to add them:
// this file parses CEL's grammar (the operators, member and index selection,
// calls, list and map literals, the optional-field forms) by recursive
// descent, and checks what a parser alone can: every identifier is one the
// admission environment declares or a macro binds, every function is one that
// environment has, has() takes a field selection. It does not type-check.

import (
	"fmt"
	"strings"
	"testing"
)

// celToken is one lexical token of a CEL expression.
type celToken struct {
	kind string // "ident", "string", "number", or the operator itself
	text string
	pos  int
}

// celOperators are CEL's operators and punctuation, longest first.
var celOperators = []string{"&&", "||", "==", "!=", "<=", ">=", ".?", "<", ">", "!", "?", ":", ".", ",", "(", ")", "[", "]", "{", "}", "+", "-", "*", "/", "%"}

// celLex splits src into tokens; strings keep their quotes in text.
func celLex(src string) ([]celToken, error) {
	var out []celToken
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case strings.HasPrefix(src[i:], "//"):
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case celStringStart(src, i):
			end, err := celString(src, i)
			if err != nil {
				return nil, err
			}
			out = append(out, celToken{"string", src[i:end], i})
			i = end
		case c == '_' || celLetter(c):
			j := i
			for j < len(src) && (src[j] == '_' || celLetter(src[j]) || celDigit(src[j])) {
				j++
			}
			out = append(out, celToken{"ident", src[i:j], i})
			i = j
		case celDigit(c):
			j := i + 1
			if c == '0' && j < len(src) && (src[j] == 'x' || src[j] == 'X') {
				j++
				for j < len(src) && strings.ContainsRune("0123456789abcdefABCDEF", rune(src[j])) {
					j++
				}
			} else {
				for j < len(src) && celDigit(src[j]) {
					j++
				}
				if j+1 < len(src) && src[j] == '.' && celDigit(src[j+1]) {
					for j++; j < len(src) && celDigit(src[j]); j++ {
					}
				}
				if j < len(src) && (src[j] == 'e' || src[j] == 'E') {
					j++
					if j < len(src) && (src[j] == '+' || src[j] == '-') {
						j++
					}
					for j < len(src) && celDigit(src[j]) {
						j++
					}
				}
			}
			if j < len(src) && (src[j] == 'u' || src[j] == 'U') {
				j++
			}
			out = append(out, celToken{"number", src[i:j], i})
			i = j
		default:
			op := ""
			for _, o := range celOperators {
				if strings.HasPrefix(src[i:], o) {
					op = o
					break
				}
			}
			if op == "" {
				return nil, fmt.Errorf("position %d: unexpected %q", i, c)
			}
			out = append(out, celToken{op, op, i})
			i += len(op)
		}
	}
	return out, nil
}

// celLetter and celDigit are the ASCII letters and digits of CEL's
// identifiers and numbers.
func celLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func celDigit(c byte) bool  { return c >= '0' && c <= '9' }

// celStringStart reports whether a string literal starts at i: a quote, or
// up to two of the prefixes r (raw) and b (bytes) before one.
func celStringStart(src string, i int) bool {
	j := i
	for j < len(src) && j-i < 2 && strings.ContainsRune("rRbB", rune(src[j])) {
		j++
	}
	return j < len(src) && (src[j] == '\'' || src[j] == '"')
}

// celString returns the end of the string literal that starts at i: an
// optional r/b prefix, then '…', "…" or their tripled forms.
func celString(src string, i int) (int, error) {
	start := i
	raw := false
	for src[i] != '\'' && src[i] != '"' {
		raw = raw || src[i] == 'r' || src[i] == 'R'
		i++
	}
	quote := string(src[i])
	if strings.HasPrefix(src[i:], strings.Repeat(quote, 3)) {
		quote = strings.Repeat(quote, 3)
	}
	for j := i + len(quote); j < len(src); j++ {
		switch {
		case src[j] == '\\' && !raw:
			j++
		case strings.HasPrefix(src[j:], quote):
			return j + len(quote), nil
		case src[j] == '\n' && len(quote) == 1:
			return 0, fmt.Errorf("position %d: string not closed on its line", start)
		}
	}
	return 0, fmt.Errorf("position %d: string not closed", start)
}

// celNode is a node of the parsed expression, as much of it as the checks
// need.
type celNode struct {
	kind string // "ident", "select", "call", "index", "literal", "list", "map", "op"
	name string // identifier, field or function name
	// recv is the operand of a select or index, the receiver of a member
	// call; nil for a global call.
	recv *celNode
	args []*celNode
	pos  int
}

// celParser parses tokens by CEL's grammar (cel-spec's langdef.md).
type celParser struct {
	toks []celToken
	i    int
}

// celReserved are words CEL keeps from identifiers.
var celReserved = map[string]bool{"as": true, "break": true, "const": true, "continue": true, "else": true, "for": true,
	"function": true, "if": true, "import": true, "let": true, "loop": true, "package": true, "namespace": true,
	"return": true, "var": true, "void": true, "while": true, "in": true}

func (p *celParser) peek() celToken {
	if p.i < len(p.toks) {
		return p.toks[p.i]
	}
	return celToken{kind: "end", pos: -1}
}

func (p *celParser) accept(kind string) bool {
	if p.peek().kind == kind {
		p.i++
		return true
	}
	return false
}

func (p *celParser) expect(kind string) (celToken, error) {
	t := p.peek()
	if t.kind != kind {
		return t, fmt.Errorf("position %d: want %q, have %q", t.pos, kind, t.text)
	}
	p.i++
	return t, nil
}

// celParse parses one whole expression.
func celParse(src string) (*celNode, error) {
	toks, err := celLex(src)
	if err != nil {
		return nil, err
	}
	p := &celParser{toks: toks}
	n, err := p.expr()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != "end" {
		return nil, fmt.Errorf("position %d: unexpected %q after the expression", t.pos, t.text)
	}
	return n, nil
}

// expr = or ["?" or ":" expr]
func (p *celParser) expr() (*celNode, error) {
	cond, err := p.binary(0)
	if err != nil {
		return nil, err
	}
	if !p.accept("?") {
		return cond, nil
	}
	yes, err := p.binary(0)
	if err != nil {
		return nil, err
	}
	if _, err := p.expect(":"); err != nil {
		return nil, err
	}
	no, err := p.expr()
	if err != nil {
		return nil, err
	}
	return &celNode{kind: "op", name: "?:", args: []*celNode{cond, yes, no}, pos: cond.pos}, nil
}

// celLevels are the binary operators by precedence, loosest first.
var celLevels = [][]string{{"||"}, {"&&"}, {"<", "<=", ">=", ">", "==", "!=", "in"}, {"+", "-"}, {"*", "/", "%"}}

// binary parses the operators of level and tighter, left-associative.
func (p *celParser) binary(level int) (*celNode, error) {
	if level == len(celLevels) {
		return p.unary()
	}
	left, err := p.binary(level + 1)
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		op := ""
		for _, o := range celLevels[level] {
			if t.text == o && (t.kind == o || (o == "in" && t.kind == "ident")) {
				op = o
			}
		}
		if op == "" {
			return left, nil
		}
		p.i++
		right, err := p.binary(level + 1)
		if err != nil {
			return nil, err
		}
		left = &celNode{kind: "op", name: op, args: []*celNode{left, right}, pos: t.pos}
	}
}

// unary = member | "!"{"!"} member | "-"{"-"} member
func (p *celParser) unary() (*celNode, error) {
	if t := p.peek(); t.kind == "!" || t.kind == "-" {
		p.i++
		n, err := p.unary()
		if err != nil {
			return nil, err
		}
		return &celNode{kind: "op", name: t.kind, args: []*celNode{n}, pos: t.pos}, nil
	}
	return p.member()
}

// member = primary {"." ["?"] IDENT ["(" [args] ")"] | "[" ["?"] expr "]"}
func (p *celParser) member() (*celNode, error) {
	n, err := p.primary()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		switch t.kind {
		case ".", ".?":
			p.i++
			f, err := p.expect("ident")
			if err != nil {
				return nil, err
			}
			if celReserved[f.text] {
				return nil, fmt.Errorf("position %d: %q is reserved", f.pos, f.text)
			}
			if t.kind == "." && p.accept("(") {
				args, err := p.list(")")
				if err != nil {
					return nil, err
				}
				n = &celNode{kind: "call", name: f.text, recv: n, args: args, pos: f.pos}
				continue
			}
			n = &celNode{kind: "select", name: f.text, recv: n, pos: f.pos}
		case "[":
			p.i++
			p.accept("?")
			idx, err := p.expr()
			if err != nil {
				return nil, err
			}
			if _, err := p.expect("]"); err != nil {
				return nil, err
			}
			n = &celNode{kind: "index", recv: n, args: []*celNode{idx}, pos: t.pos}
		default:
			return n, nil
		}
	}
}

// primary = ["."] IDENT ["(" [args] ")"] | "(" expr ")" | "[" [list] "]" |
// "{" [map] "}" | literal
func (p *celParser) primary() (*celNode, error) {
	t := p.peek()
	switch t.kind {
	case "string", "number":
		p.i++
		return &celNode{kind: "literal", pos: t.pos}, nil
	case "(":
		p.i++
		n, err := p.expr()
		if err != nil {
			return nil, err
		}
		_, err = p.expect(")")
		return n, err
	case "[":
		p.i++
		elems, err := p.list("]")
		return &celNode{kind: "list", args: elems, pos: t.pos}, err
	case "{":
		p.i++
		var kv []*celNode
		for !p.accept("}") {
			p.accept("?")
			k, err := p.expr()
			if err != nil {
				return nil, err
			}
			if _, err := p.expect(":"); err != nil {
				return nil, err
			}
			v, err := p.expr()
			if err != nil {
				return nil, err
			}
			kv = append(kv, k, v)
			if !p.accept(",") {
				if _, err := p.expect("}"); err != nil {
					return nil, err
				}
				break
			}
		}
		return &celNode{kind: "map", args: kv, pos: t.pos}, nil
	case ".", "ident":
		p.i++
		if t.kind == "." {
			var err error
			if t, err = p.expect("ident"); err != nil {
				return nil, err
			}
		}
		switch t.text {
		case "true", "false", "null":
			return &celNode{kind: "literal", pos: t.pos}, nil
		}
		if celReserved[t.text] {
			return nil, fmt.Errorf("position %d: %q is reserved", t.pos, t.text)
		}
		if p.accept("(") {
			args, err := p.list(")")
			return &celNode{kind: "call", name: t.text, args: args, pos: t.pos}, err
		}
		return &celNode{kind: "ident", name: t.text, pos: t.pos}, nil
	}
	return nil, fmt.Errorf("position %d: unexpected %q", t.pos, t.text)
}

// list parses comma-separated expressions up to and including end; a
// trailing comma is allowed, as are "?" optional elements.
func (p *celParser) list(end string) ([]*celNode, error) {
	var out []*celNode
	for !p.accept(end) {
		p.accept("?")
		n, err := p.expr()
		if err != nil {
			return nil, err
		}
		out = append(out, n)
		if !p.accept(",") {
			if _, err := p.expect(end); err != nil {
				return nil, err
			}
			break
		}
	}
	return out, nil
}

// celAdmissionVariables are the variables a ValidatingAdmissionPolicy's
// expressions may use.
var celAdmissionVariables = map[string]bool{"object": true, "oldObject": true, "request": true, "params": true,
	"namespaceObject": true, "authorizer": true, "variables": true}

// celMacros bind their first argument in the others.
var celMacros = map[string]bool{"all": true, "exists": true, "exists_one": true, "map": true, "filter": true}

// celFunctions are the functions and methods of Kubernetes' CEL environment
// an expression here may call: the standard ones and those of its
// extension libraries (strings, lists, optionals, regex, URLs, IPs,
// quantities, authorizer).
var celFunctions = map[string]bool{
	"has": true, "size": true, "int": true, "uint": true, "double": true, "string": true, "bytes": true, "bool": true,
	"duration": true, "timestamp": true, "type": true, "dyn": true, "matches": true,
	"startsWith": true, "endsWith": true, "contains": true, "charAt": true, "indexOf": true, "lastIndexOf": true,
	"lowerAscii": true, "upperAscii": true, "replace": true, "split": true, "substring": true, "trim": true,
	"join": true, "find": true, "findAll": true, "isSorted": true, "sum": true, "min": true, "max": true,
	"orValue": true, "hasValue": true, "value": true, "or": true, "optMap": true, "optFlatMap": true,
	"url": true, "isURL": true, "ip": true, "isIP": true, "cidr": true, "isCIDR": true,
	"quantity": true, "isQuantity": true, "format": true, "quote": true,
	"check": true, "allowed": true, "reason": true, "errored": true, "error": true,
	"path": true, "group": true, "resource": true, "subresource": true, "namespace": true, "name": true,
	"serviceAccount": true,
}

// celCheck parses src and checks its names.
func celCheck(src string) error {
	n, err := celParse(src)
	if err != nil {
		return err
	}
	return celNames(n, map[string]bool{})
}

// celNames checks that n uses only declared or bound identifiers and known
// functions, and that has() selects a field.
func celNames(n *celNode, bound map[string]bool) error {
	switch n.kind {
	case "ident":
		if !celAdmissionVariables[n.name] && !bound[n.name] {
			return fmt.Errorf("position %d: undeclared %q", n.pos, n.name)
		}
		return nil
	case "call":
		if n.recv != nil && celMacros[n.name] {
			if err := celNames(n.recv, bound); err != nil {
				return err
			}
			if len(n.args) < 2 || len(n.args) > 3 || n.args[0].kind != "ident" {
				return fmt.Errorf("position %d: %s(var, …) binds one identifier", n.pos, n.name)
			}
			inner := map[string]bool{n.args[0].name: true}
			for k := range bound {
				inner[k] = true
			}
			for _, a := range n.args[1:] {
				if err := celNames(a, inner); err != nil {
					return err
				}
			}
			return nil
		}
		if !celFunctions[n.name] {
			return fmt.Errorf("position %d: unknown function %q", n.pos, n.name)
		}
		if n.name == "has" && n.recv == nil && (len(n.args) != 1 || n.args[0].kind != "select") {
			return fmt.Errorf("position %d: has() takes one field selection", n.pos)
		}
	}
	if n.recv != nil {
		if err := celNames(n.recv, bound); err != nil {
			return err
		}
	}
	for _, a := range n.args {
		if err := celNames(a, bound); err != nil {
			return err
		}
	}
	return nil
}

func TestCELCheck(t *testing.T) {
	good := []string{
		"object.metadata.name == 'a'",
		"has(object.spec) && object.spec.replicas <= 5",
		"object.metadata.labels.all(k, k.startsWith('a/') || k in oldObject.metadata.labels)",
		"request.userInfo.extra['x'][0] == object.metadata.name",
		"!has(object.metadata.annotations) ? [] : [1, 2,]",
		`{'a': 1, "b": 2}.size() > 0 && -1 < 0x1F && 1.5e3 > 2u`,
		"object.metadata.?labels.orValue({}).exists(l, l == 'x')",
		"object.spec.containers.map(c, c.name).filter(n, n.endsWith(r'\\d')).size() == 0",
		"variables.x || (params != null ? params.y : false) // a comment",
		`'''a 'quoted' word''' + "it's" + rb'\d' + "é"`,
	}
	for _, s := range good {
		if err := celCheck(s); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
	bad := []string{
		"",
		"object.metadata.name ==",
		"(object.metadata.name == 'a'",
		"object.metadata.name == 'a",
		"objet.metadata.name == 'a'",
		"object.metadata.labels.all(k, j == 'a')",
		"object.metadata.name.startwith('a')",
		"has(object)",
		"object.metadata.name = 'a'",
		"object.metadata.name == 'a' 'b'",
		"object.if",
		"[1, 2",
		"{'a' 1}",
		"object.x ? object.y",
		"br'\\d' == object.x x",
		"object.metadata.name == #",
	}
	for _, s := range bad {
		if err := celCheck(s); err == nil {
			t.Errorf("%q: no error", s)
		}
	}
}
