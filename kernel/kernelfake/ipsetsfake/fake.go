// Size: a fake of the ipset binary: its command and restore parser and the kernel's set semantics it emulates belong together.

package ipsetsfake

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/nodeplane/nodeplane/command"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/netfilter"
)

// Version is the ipset version the fake claims in its messages.
const Version = "v7.17"

// Messages of the real kernel and binary that the fake reproduces.
const (
	MsgNotExist    = "The set with the given name does not exist"
	MsgExists      = "Set cannot be created: set with the same name already exists"
	MsgInUse       = "Set cannot be destroyed: it is in use by a kernel component"
	MsgAlreadyIn   = "Element cannot be added to the set: it's already added"
	MsgNotIn       = "Element cannot be deleted from the set: it's not added"
	MsgTypeSwap    = "The sets cannot be swapped: their type does not match"
	MsgHashFull    = "Hash is full, cannot add more elements"
	MsgOutOfRange  = "Element is out of the range of the set"
	MsgBadCIDR     = "The value of the CIDR parameter of the IP address is invalid"
	MsgUnsupported = "Kernel error received: set type not supported"
	// MsgNullElement is refused for the unspecified address in a hash:ip
	// set.
	MsgNullElement = "Null-valued element, cannot be stored in a hash type of set"
	// MsgInvalidArgument is the kernel's refusal of the unspecified
	// address in a hash:ip,port set.
	MsgInvalidArgument = "Kernel error received: Invalid argument"
	// MsgInjected is the default message of an injected failure.
	MsgInjected = "Kernel error received: injected failure"
)

// Kernel is an in-memory ipset kernel with the command-line interface of
// the ipset binary. It is safe for concurrent use.
type Kernel struct {
	mu          sync.Mutex
	sets        map[string]*set
	seq         int
	calls       []Call
	failNext    []failNext
	failLines   []failLine
	unsupported map[netfilter.SetType]bool
}

type set struct {
	name     string
	typ      netfilter.SetType
	family   ipfamily.Family
	maxelem  int
	hashsize int
	rng      netfilter.PortRange
	counters bool
	members  map[netfilter.Member]struct{}
	// raw holds entries the ipsets package cannot represent (ICMP entries
	// of a hash:ip,port set, added by hand), as written.
	raw  map[string]struct{}
	refs int
	seq  int
}

type failNext struct {
	n      int
	sub    string
	stderr string
}

type failLine struct {
	substr string
	msg    string
}

// Call is one recorded invocation of the fake.
type Call struct {
	// Args are the arguments after the binary's name, such as
	// ["restore"] or ["save", "np4-a"].
	Args []string
	// Stdin is the standard input the call read (the restore script).
	Stdin string
	// Err is the error the call returned, or nil.
	Err error
}

// New returns an empty Kernel: no sets, no failures armed.
func New() *Kernel {
	return &Kernel{sets: map[string]*set{}, unsupported: map[netfilter.SetType]bool{}}
}

// SetUnsupported makes the fake reject creating sets of the given types as
// a kernel built without them does ("set type not supported"), replacing
// the previous list. The real kernel of this project's test machines lacks
// hash:net,net.
func (k *Kernel) SetUnsupported(types ...netfilter.SetType) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.unsupported = map[netfilter.SetType]bool{}
	for _, t := range types {
		k.unsupported[t] = true
	}
}

// SetReferences sets the number of kernel references (iptables rules
// matching the set) held on name. A set with references cannot be
// destroyed. References stay with the name across a swap, as in the
// kernel.
func (k *Kernel) SetReferences(name string, n int) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	s := k.sets[name]
	if s == nil {
		return fmt.Errorf("ipsetsfake: %s: %s", name, MsgNotExist)
	}
	if n < 0 {
		return fmt.Errorf("ipsetsfake: negative reference count %d", n)
	}
	s.refs = n
	return nil
}

// FailNext makes the next n invocations of subcommand sub ("restore",
// "save", "list", "destroy", …; "" for any) fail with exit status 1 and
// stderr (MsgInjected when empty), before changing anything.
func (k *Kernel) FailNext(n int, sub, stderr string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if stderr == "" {
		stderr = MsgInjected
	}
	k.failNext = append(k.failNext, failNext{n: n, sub: sub, stderr: stderr})
}

// FailLine makes every command line (of a restore script, or a command
// given as arguments) that contains substr fail with msg (MsgInjected when
// empty), until ClearFailures. A restore stops at that line; the lines
// before it stay applied, as when the kernel refuses a line.
func (k *Kernel) FailLine(substr, msg string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if msg == "" {
		msg = MsgInjected
	}
	k.failLines = append(k.failLines, failLine{substr: substr, msg: msg})
}

// ClearFailures disarms FailNext and FailLine.
func (k *Kernel) ClearFailures() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.failNext, k.failLines = nil, nil
}

// Calls returns the recorded invocations, oldest first.
func (k *Kernel) Calls() []Call {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.calls)
}

// ResetCalls forgets the recorded invocations.
func (k *Kernel) ResetCalls() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.calls = nil
}

// CountCalls returns how many recorded invocations had sub as their first
// argument ("" counts all).
func (k *Kernel) CountCalls(sub string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := 0
	for _, c := range k.calls {
		if sub == "" || (len(c.Args) > 0 && c.Args[0] == sub) {
			n++
		}
	}
	return n
}

// Names returns the names of the sets, in creation order (as `ipset list
// -name`).
func (k *Kernel) Names() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.namesLocked()
}

func (k *Kernel) namesLocked() []string {
	all := make([]*set, 0, len(k.sets))
	for _, s := range k.sets {
		all = append(all, s)
	}
	slices.SortFunc(all, func(a, b *set) int { return a.seq - b.seq })
	out := make([]string, len(all))
	for i, s := range all {
		out[i] = s.name
	}
	return out
}

// Members returns the members of name as ipset writes them, sorted, and
// whether the set exists.
func (k *Kernel) Members(name string) ([]string, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	s := k.sets[name]
	if s == nil {
		return nil, false
	}
	return s.sortedMembers(), true
}

// Family returns the family of the set name (zero for a bitmap:port set,
// which has none) and whether the set exists: what iptables asks the
// kernel about a set that a rule matches (see iptablesfake.Kernel.UseSets).
func (k *Kernel) Family(name string) (ipfamily.Family, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	s := k.sets[name]
	if s == nil {
		return 0, false
	}
	return s.family, true
}

// Header returns the create line of name, as `ipset save` writes it, and
// whether the set exists.
func (k *Kernel) Header(name string) (string, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	s := k.sets[name]
	if s == nil {
		return "", false
	}
	return s.createLine(), true
}

// Save returns what `ipset save` prints for every set.
func (k *Kernel) Save() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var b bytes.Buffer
	for _, name := range k.namesLocked() {
		k.sets[name].save(&b)
	}
	return b.String()
}

func (s *set) sortedMembers() []string {
	ms := make([]netfilter.Member, 0, len(s.members))
	for m := range s.members {
		ms = append(ms, m)
	}
	slices.SortFunc(ms, netfilter.Member.Compare)
	out := make([]string, len(ms), len(ms)+len(s.raw))
	for i, m := range ms {
		out[i] = kernelText(s.typ, m)
	}
	raw := make([]string, 0, len(s.raw))
	for r := range s.raw {
		raw = append(raw, r)
	}
	slices.Sort(raw)
	return append(out, raw...)
}

func (s *set) header() string {
	if s.typ == netfilter.BitmapPort {
		return "range " + strconv.Itoa(int(s.rng.First)) + "-" + strconv.Itoa(int(s.rng.Last))
	}
	counters := ""
	if s.counters {
		counters = " counters"
	}
	return fmt.Sprintf("family %s hashsize %d maxelem %d%s bucketsize 12 initval 0x%08x", familyName(s.family), s.hashsize, s.maxelem, counters, 0x5eed0000+s.seq)
}

func (s *set) createLine() string {
	return "create " + s.name + " " + string(s.typ) + " " + s.header()
}

func (s *set) save(b *bytes.Buffer) {
	b.WriteString(s.createLine())
	b.WriteByte('\n')
	for _, m := range s.sortedMembers() {
		b.WriteString("add ")
		b.WriteString(s.name)
		b.WriteByte(' ')
		b.WriteString(m)
		if s.counters {
			b.WriteString(" packets 0 bytes 0")
		}
		b.WriteByte('\n')
	}
}

func (s *set) list(b *bytes.Buffer, terse bool) {
	fmt.Fprintf(b, "Name: %s\nType: %s\nRevision: 1\nHeader: %s\nSize in memory: %d\nReferences: %d\nNumber of entries: %d\n",
		s.name, s.typ, s.header(), 200+40*s.len(), s.refs, s.len())
	if terse {
		return
	}
	b.WriteString("Members:\n")
	for _, m := range s.sortedMembers() {
		b.WriteString(m)
		if s.counters {
			b.WriteString(" packets 0 bytes 0")
		}
		b.WriteByte('\n')
	}
}

// cmdError is a failure of one command: its message, and the restore line
// it happened on (0 outside a restore). A bare message is printed without
// the "ipset vX: " prefix, as `ipset test` prints its answer.
type cmdError struct {
	msg  string
	line int
	exit int
	bare bool
}

// Run runs an ipset command against the fake. name must be "ipset" (or a
// path to it). Failures are *command.Error values with exit status 1 (2
// for a usage error) and stderr worded as the real binary words it.
func (k *Kernel) Run(ctx context.Context, stdin io.Reader, name string, args ...string) ([]byte, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	var input []byte
	if stdin != nil {
		var err error
		if input, err = io.ReadAll(stdin); err != nil {
			return nil, &command.Error{Argv: argv(name, args), ExitCode: -1, Err: err}
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	out, cerr := k.run(ctx, name, args, input)
	var err error
	if cerr != nil {
		stderr := "ipset " + Version + ": "
		if cerr.bare {
			stderr = ""
		}
		if cerr.line > 0 {
			stderr += "Error in line " + strconv.Itoa(cerr.line) + ": "
		}
		stderr += cerr.msg + "\n"
		code := cerr.exit
		if code == 0 {
			code = 1
		}
		err = &command.Error{Argv: argv(name, args), ExitCode: code, Stdout: out, Stderr: []byte(stderr),
			Err: fmt.Errorf("exit status %d", code)}
	}
	k.calls = append(k.calls, Call{Args: slices.Clone(args), Stdin: string(input), Err: err})
	return out, err
}

func argv(name string, args []string) []string { return append([]string{name}, args...) }

func (k *Kernel) run(ctx context.Context, name string, args []string, input []byte) ([]byte, *cmdError) {
	if path.Base(name) != "ipset" {
		return nil, &cmdError{msg: "ipsetsfake: only the ipset binary is emulated, not " + name, exit: 127}
	}
	if err := ctx.Err(); err != nil {
		return nil, &cmdError{msg: err.Error(), exit: -1}
	}
	if len(args) == 0 {
		return nil, &cmdError{msg: "No command specified.", exit: 2}
	}
	for i := range k.failNext {
		f := &k.failNext[i]
		if f.n > 0 && (f.sub == "" || f.sub == args[0]) {
			f.n--
			return nil, &cmdError{msg: f.stderr}
		}
	}
	if args[0] != "restore" {
		if err := k.failOn(strings.Join(args, " ")); err != nil {
			return nil, err
		}
	}
	var out bytes.Buffer
	switch args[0] {
	case "restore":
		exist := false
		for _, a := range args[1:] {
			if a != "-exist" && a != "-!" {
				return nil, &cmdError{msg: "restore: unknown argument " + a, exit: 2}
			}
			exist = true
		}
		return nil, k.restore(input, exist)
	case "list":
		return k.listCmd(&out, args[1:])
	case "save":
		if len(args) > 2 {
			return nil, &cmdError{msg: "save: too many arguments", exit: 2}
		}
		return k.saveCmd(&out, args[1:])
	default:
		exist := false
		var fields []string
		for _, a := range args {
			if a == "-exist" || a == "-!" {
				exist = true
				continue
			}
			fields = append(fields, a)
		}
		return nil, k.exec(fields, exist)
	}
}

func (k *Kernel) failOn(line string) *cmdError {
	for _, f := range k.failLines {
		if strings.Contains(line, f.substr) {
			return &cmdError{msg: f.msg}
		}
	}
	return nil
}

func (k *Kernel) listCmd(out *bytes.Buffer, args []string) ([]byte, *cmdError) {
	terse, names, save := false, false, false
	var target []string
	for i := 0; i < len(args); i++ {
		switch a := args[i]; a {
		case "-name", "-n":
			names = true
		case "-terse", "-t":
			terse = true
		case "-o", "-output":
			if i+1 >= len(args) || args[i+1] != "save" {
				return nil, &cmdError{msg: "list: only -o save is emulated", exit: 2}
			}
			save = true
			i++
		default:
			if strings.HasPrefix(a, "-") {
				return nil, &cmdError{msg: "list: unknown option " + a, exit: 2}
			}
			target = append(target, a)
		}
	}
	if len(target) > 1 {
		return nil, &cmdError{msg: "list: too many arguments", exit: 2}
	}
	if save {
		return k.saveCmd(out, target)
	}
	sets, err := k.selected(target)
	if err != nil {
		return nil, err
	}
	for i, s := range sets {
		if names {
			out.WriteString(s.name)
			out.WriteByte('\n')
			continue
		}
		if i > 0 {
			out.WriteByte('\n')
		}
		s.list(out, terse)
	}
	return out.Bytes(), nil
}

func (k *Kernel) saveCmd(out *bytes.Buffer, target []string) ([]byte, *cmdError) {
	sets, err := k.selected(target)
	if err != nil {
		return nil, err
	}
	for _, s := range sets {
		s.save(out)
	}
	return out.Bytes(), nil
}

// selected returns the named set, or every set in list order.
func (k *Kernel) selected(target []string) ([]*set, *cmdError) {
	if len(target) == 1 {
		s := k.sets[target[0]]
		if s == nil {
			return nil, &cmdError{msg: MsgNotExist}
		}
		return []*set{s}, nil
	}
	var out []*set
	for _, name := range k.namesLocked() {
		out = append(out, k.sets[name])
	}
	return out, nil
}

// restore runs a restore script line by line; it stops at the first
// failing line, leaving the earlier lines applied. That is what ipset
// 7.17 does when the kernel refuses a line. A line refused in user space
// (a syntax error, a set that does not exist) also loses the lines the
// binary had not yet sent: it sends the adds (or deletes) of consecutive
// lines on one set in batches. The fake keeps those lines.
func (k *Kernel) restore(input []byte, exist bool) *cmdError {
	sc := bufio.NewScanner(bytes.NewReader(input))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if err := k.failOn(line); err != nil {
			err.line = n
			return err
		}
		fields := strings.Fields(line)
		lineExist := exist
		kept := fields[:0]
		for _, f := range fields {
			if f == "-exist" || f == "-!" {
				lineExist = true
				continue
			}
			kept = append(kept, f)
		}
		if err := k.exec(kept, lineExist); err != nil {
			err.line = n
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return &cmdError{msg: err.Error(), line: n + 1}
	}
	return nil
}

// exec runs one command given as fields (without -exist).
func (k *Kernel) exec(f []string, exist bool) *cmdError {
	usage := func() *cmdError { return &cmdError{msg: "Syntax error: wrong number of arguments to " + f[0], exit: 2} }
	switch f[0] {
	case "create", "-N", "n":
		if len(f) < 3 {
			return usage()
		}
		return k.create(f[1], f[2], f[3:], exist)
	case "add", "-A", "a", "del", "-D", "d":
		if len(f) != 3 {
			return usage()
		}
		s := k.sets[f[1]]
		if s == nil {
			return &cmdError{msg: MsgNotExist}
		}
		isAdd := f[0] == "add" || f[0] == "-A" || f[0] == "a"
		m, err := s.parse(f[2])
		raw := err != nil && s.isRaw(f[2])
		if err != nil && !raw {
			return err
		}
		present := false
		if raw {
			_, present = s.raw[f[2]]
		} else {
			_, present = s.members[m]
		}
		if isAdd {
			switch {
			case present && exist:
				return nil
			case present:
				return &cmdError{msg: MsgAlreadyIn}
			case s.typ != netfilter.BitmapPort && s.len() >= s.maxelem:
				return &cmdError{msg: MsgHashFull}
			}
			if raw {
				s.raw[f[2]] = struct{}{}
			} else {
				s.members[m] = struct{}{}
			}
			s.grow()
			return nil
		}
		if !present {
			if exist {
				return nil
			}
			return &cmdError{msg: MsgNotIn}
		}
		if raw {
			delete(s.raw, f[2])
		} else {
			delete(s.members, m)
		}
		return nil
	case "test", "-T", "t":
		if len(f) != 3 {
			return usage()
		}
		s := k.sets[f[1]]
		if s == nil {
			return &cmdError{msg: MsgNotExist}
		}
		m, err := s.parse(f[2])
		if err != nil {
			return err
		}
		if _, ok := s.members[m]; !ok {
			return &cmdError{msg: f[2] + " is NOT in set " + f[1] + ".", bare: true}
		}
		return nil
	case "destroy", "-X", "x":
		switch len(f) {
		case 1:
			for _, s := range k.sets {
				if s.refs > 0 {
					return &cmdError{msg: MsgInUse}
				}
			}
			clear(k.sets)
			return nil
		case 2:
			s := k.sets[f[1]]
			if s == nil {
				return &cmdError{msg: MsgNotExist}
			}
			if s.refs > 0 {
				return &cmdError{msg: MsgInUse}
			}
			delete(k.sets, f[1])
			return nil
		}
		return usage()
	case "flush", "-F", "f":
		switch len(f) {
		case 1:
			for _, s := range k.sets {
				clear(s.members)
				clear(s.raw)
			}
			return nil
		case 2:
			s := k.sets[f[1]]
			if s == nil {
				return &cmdError{msg: MsgNotExist}
			}
			clear(s.members)
			clear(s.raw)
			return nil
		}
		return usage()
	case "swap", "-W", "w":
		if len(f) != 3 {
			return usage()
		}
		a, b := k.sets[f[1]], k.sets[f[2]]
		if a == nil || b == nil {
			return &cmdError{msg: MsgNotExist}
		}
		if a.typ != b.typ || a.family != b.family {
			return &cmdError{msg: MsgTypeSwap}
		}
		// The contents change places; names and references stay.
		a.typ, b.typ = b.typ, a.typ
		a.maxelem, b.maxelem = b.maxelem, a.maxelem
		a.hashsize, b.hashsize = b.hashsize, a.hashsize
		a.rng, b.rng = b.rng, a.rng
		a.counters, b.counters = b.counters, a.counters
		a.members, b.members = b.members, a.members
		a.raw, b.raw = b.raw, a.raw
		return nil
	case "rename", "-E", "e":
		if len(f) != 3 {
			return usage()
		}
		s := k.sets[f[1]]
		if s == nil {
			return &cmdError{msg: MsgNotExist}
		}
		if k.sets[f[2]] != nil {
			return &cmdError{msg: "Set cannot be created: set with the same name already exists"}
		}
		delete(k.sets, f[1])
		s.name = f[2]
		k.sets[f[2]] = s
		return nil
	}
	return &cmdError{msg: "No command specified: unknown argument " + f[0], exit: 2}
}

// create handles "create NAME TYPE OPTIONS".
func (k *Kernel) create(name, typ string, opts []string, exist bool) *cmdError {
	t := netfilter.SetType(typ)
	if !t.Valid() {
		return &cmdError{msg: "Syntax error: typename '" + typ + "' is unknown (not emulated by ipsetsfake)"}
	}
	if len(name) > netfilter.MaxNameLength {
		return &cmdError{msg: "Syntax error: setname '" + name + "' is longer than 31 characters", exit: 2}
	}
	s := &set{name: name, typ: t, family: ipfamily.IPv4, maxelem: 65536, hashsize: 1024, members: map[netfilter.Member]struct{}{}, raw: map[string]struct{}{}}
	if t == netfilter.BitmapPort {
		s.family = 0
	}
	hasRange := false
	for i := 0; i < len(opts); i++ {
		key := opts[i]
		if key == "counters" {
			s.counters = true
			continue
		}
		if i+1 >= len(opts) {
			return &cmdError{msg: "Syntax error: option " + key + " needs a value", exit: 2}
		}
		val := opts[i+1]
		i++
		switch {
		case key == "family" && t != netfilter.BitmapPort:
			switch val {
			case "inet":
				s.family = ipfamily.IPv4
			case "inet6":
				s.family = ipfamily.IPv6
			default:
				return &cmdError{msg: "Syntax error: unknown family " + val}
			}
		case (key == "maxelem" || key == "hashsize") && t != netfilter.BitmapPort:
			n, err := strconv.ParseUint(val, 10, 32)
			if err != nil {
				return &cmdError{msg: "Syntax error: '" + val + "' is invalid as number"}
			}
			if key == "maxelem" {
				s.maxelem = int(n)
			} else {
				s.hashsize = int(n)
			}
		case (key == "bucketsize" || key == "initval") && t != netfilter.BitmapPort:
			// Tuning of the hash that `ipset save` prints; the fake
			// chooses its own.
			if _, err := strconv.ParseUint(val, 0, 32); err != nil {
				return &cmdError{msg: "Syntax error: '" + val + "' is invalid as number"}
			}
		case key == "range" && t == netfilter.BitmapPort:
			lo, hi, ok := strings.Cut(val, "-")
			a, err1 := strconv.ParseUint(lo, 10, 16)
			b, err2 := strconv.ParseUint(hi, 10, 16)
			if !ok || err1 != nil || err2 != nil || a > b {
				return &cmdError{msg: "Syntax error: invalid port range " + val}
			}
			s.rng, hasRange = netfilter.PortRange{First: uint16(a), Last: uint16(b)}, true
		default:
			return &cmdError{msg: "Syntax error: option " + key + " is not emulated by ipsetsfake", exit: 2}
		}
	}
	if t == netfilter.BitmapPort && !hasRange {
		return &cmdError{msg: "Syntax error: Missing mandatory option: range"}
	}
	if k.unsupported[t] {
		return &cmdError{msg: MsgUnsupported}
	}
	if old := k.sets[name]; old != nil {
		if exist && old.typ == s.typ && old.family == s.family && old.maxelem == s.maxelem && old.rng == s.rng && old.counters == s.counters {
			return nil
		}
		return &cmdError{msg: MsgExists}
	}
	k.seq++
	s.seq = k.seq
	k.sets[name] = s
	return nil
}

// parse parses a member given to add or del, with the kernel's messages.
// Like the ipset binary it masks the host bits of a prefix (10.0.0.1/24
// is 10.0.0.0/24).
func (s *set) parse(text string) (netfilter.Member, *cmdError) {
	m, err := netfilter.ParseMember(s.typ, masked(s.typ, text))
	if err != nil {
		switch {
		case strings.Contains(text, "/0"):
			return m, &cmdError{msg: MsgBadCIDR}
		case s.typ == netfilter.HashIP && unspecified(text):
			return m, &cmdError{msg: MsgNullElement}
		case s.typ == netfilter.HashIPPort && unspecified(text[:max(0, strings.LastIndexByte(text, ','))]):
			return m, &cmdError{msg: MsgInvalidArgument}
		}
		return m, &cmdError{msg: "Syntax error: cannot parse " + text + ": " + err.Error()}
	}
	if s.typ == netfilter.BitmapPort {
		if !s.rng.Contains(m.Port()) {
			return m, &cmdError{msg: MsgOutOfRange}
		}
		return m, nil
	}
	if m.Is6() != (s.family == ipfamily.IPv6) {
		want := "IPv4"
		if s.family == ipfamily.IPv6 {
			want = "IPv6"
		}
		return m, &cmdError{msg: "Syntax error: cannot parse " + text + ": resolving to " + want + " address failed"}
	}
	return m, nil
}

// masked returns text with the host bits of its prefixes cleared, for the
// types that hold prefixes.
func masked(t netfilter.SetType, text string) string {
	if t != netfilter.HashNet && t != netfilter.HashNetNet {
		return text
	}
	parts := strings.Split(text, ",")
	for i, part := range parts {
		if p, err := netip.ParsePrefix(part); err == nil {
			parts[i] = p.Masked().String()
		}
	}
	return strings.Join(parts, ",")
}

// unspecified reports whether text is 0.0.0.0 or :: (with or without a
// full-length prefix).
func unspecified(text string) bool {
	text, _, _ = strings.Cut(text, "/")
	a, err := netip.ParseAddr(text)
	return err == nil && a.IsUnspecified()
}

// kernelText returns m as the kernel prints it in a set of type t: like
// Member.String, but with an IPv4-compatible IPv6 address (::a.b.c.d) in
// the dotted form glibc's inet_ntop uses.
func kernelText(t netfilter.SetType, m netfilter.Member) string {
	if !m.Is6() {
		return m.String()
	}
	switch t {
	case netfilter.HashIP, netfilter.HashNet:
		return prefixText(m.Prefix())
	case netfilter.HashIPPort:
		return addrText(m.Addr()) + "," + m.Protocol().String() + ":" + strconv.Itoa(int(m.Port()))
	case netfilter.HashNetNet:
		return prefixText(m.Prefix()) + "," + prefixText(m.Second())
	}
	return m.String()
}

func prefixText(p netip.Prefix) string {
	if p.IsSingleIP() {
		return addrText(p.Addr())
	}
	return addrText(p.Addr()) + "/" + strconv.Itoa(p.Bits())
}

func addrText(a netip.Addr) string {
	b := a.As16()
	if a.Is6() && !a.Is4In6() && [12]byte(b[:12]) == [12]byte{} && (b[12] != 0 || b[13] != 0) {
		return "::" + netip.AddrFrom4([4]byte(b[12:])).String()
	}
	return a.String()
}

// isRaw reports whether text is an entry of a hash:ip,port set with a
// protocol the ipsets package does not represent ("10.0.0.1,icmp:8/0").
func (s *set) isRaw(text string) bool {
	if s.typ != netfilter.HashIPPort {
		return false
	}
	i := strings.LastIndexByte(text, ',')
	if i < 0 {
		return false
	}
	a, err := netip.ParseAddr(text[:i])
	if err != nil || a.Is6() != (s.family == ipfamily.IPv6) {
		return false
	}
	proto, _, ok := strings.Cut(text[i+1:], ":")
	return ok && (proto == "icmp" || proto == "icmpv6" || proto == "udplite")
}

func (s *set) len() int { return len(s.members) + len(s.raw) }

// grow doubles the hash size as the kernel does when buckets fill up.
func (s *set) grow() {
	if s.typ == netfilter.BitmapPort {
		return
	}
	for s.len() > s.hashsize*4 {
		s.hashsize *= 2
	}
}

// errNotEmulated is returned for what the fake does not do.
var errNotEmulated = errors.New("ipsetsfake: not emulated")

var _ command.Runner = (*Kernel)(nil)

// Exec runs one ipset command given as arguments, as an administrator
// would at the command line (for example to simulate a foreign edit:
// Exec("add", "np4-a", "10.0.0.9")). It is Run without a context or stdin;
// a failure is a *command.Error.
func (k *Kernel) Exec(args ...string) error {
	if len(args) > 0 && args[0] == "restore" {
		return fmt.Errorf("%w: use Run for restore", errNotEmulated)
	}
	_, err := k.Run(context.Background(), nil, "ipset", args...)
	return err
}

// familyName returns the family as ipset writes it: "inet" or "inet6".
func familyName(f ipfamily.Family) string {
	if f == ipfamily.IPv6 {
		return "inet6"
	}
	return "inet"
}
