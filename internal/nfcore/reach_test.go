package nfcore

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// graph is a toy table: chain → targets in rule order; chains not in the
// map are undeclared; names starting with "foreign" are not ours.
type graph map[string][]string

func (g graph) walk(roots ...string) (map[string]bool, []Break, []string) {
	var breaks []Break
	var visits []string
	reached := Reach(Graph{
		Targets:  func(dst []string, name string) []string { return append(dst, g[name]...) },
		Declared: func(name string) bool { _, ok := g[name]; return ok },
		Foreign:  func(name string) bool { return strings.HasPrefix(name, "foreign") },
		Visit:    func(name string) { visits = append(visits, name) },
	}, roots, func(b Break) { breaks = append(breaks, b) })
	return reached, breaks, visits
}

func TestReachExamples(t *testing.T) {
	g := graph{
		"a": {"b", "foreign-x", "c"},
		"b": {"d", "missing"},
		"c": {"a"}, // closes a → c → a
		"d": {},
		"e": {"d"}, // not reached
	}
	reached, breaks, visits := g.walk("a")
	assert.Equal(t, map[string]bool{"a": true, "b": true, "c": true, "d": true}, reached)
	assert.Equal(t, []Break{
		{Chain: "b", Target: "missing", Reason: BreakUnknown},
		{Chain: "c", Target: "a", Reason: BreakLoop},
	}, breaks)
	assert.Equal(t, []string{"a", "b", "d", "c"}, visits, "depth first, in rule order, each once")

	// A second root that reaches what the first did walks only what is new.
	reached, breaks, visits = g.walk("a", "e")
	assert.True(t, reached["e"])
	assert.Len(t, breaks, 2)
	assert.Equal(t, []string{"a", "b", "d", "c", "e"}, visits)

	// A self-jump is a loop; a chain reached twice is walked once.
	reached, breaks, _ = graph{"s": {"s", "t", "t"}, "t": {}}.walk("s")
	assert.Equal(t, map[string]bool{"s": true, "t": true}, reached)
	assert.Equal(t, []Break{{Chain: "s", Target: "s", Reason: BreakLoop}}, breaks)
	assert.Equal(t, "loop", BreakLoop.String())
	assert.Equal(t, "unknown chain", BreakUnknown.String())
}

// TestReachDeep walks a chain of jumps far deeper than a goroutine stack
// would take recursively.
func TestReachDeep(t *testing.T) {
	const n = 200000
	g := graph{}
	for i := range n {
		g[fmt.Sprint(i)] = []string{fmt.Sprint(i + 1)}
	}
	g[fmt.Sprint(n)] = []string{"0"}
	reached, breaks, _ := g.walk("0")
	assert.Len(t, reached, n+1)
	assert.Equal(t, []Break{{Chain: fmt.Sprint(n), Target: "0", Reason: BreakLoop}}, breaks)
}

// TestReachRandom checks Reach against plain reachability on random
// tables: it reaches exactly the chains reachable from the roots, reports
// every jump to an undeclared chain of ours from a reached chain, and the
// jumps it leaves (those not reported as loops) form no cycle, while
// every reported loop jump does close a cycle.
func TestReachRandom(t *testing.T) {
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 7))
		n := 1 + rng.IntN(12)
		name := func(i int) string { return fmt.Sprintf("c%d", i) }
		g := graph{}
		for i := range n {
			var ts []string
			for range rng.IntN(4) {
				switch r := rng.IntN(10); {
				case r == 0:
					ts = append(ts, "foreign-"+name(rng.IntN(3)))
				case r == 1:
					ts = append(ts, "missing-"+name(rng.IntN(3)))
				default:
					ts = append(ts, name(rng.IntN(n)))
				}
			}
			g[name(i)] = ts
		}
		var roots []string
		for range 1 + rng.IntN(3) {
			roots = append(roots, name(rng.IntN(n)))
		}
		reached, breaks, visits := g.walk(roots...)

		want := map[string]bool{}
		var todo []string
		todo = append(todo, roots...)
		for len(todo) > 0 {
			c := todo[len(todo)-1]
			todo = todo[:len(todo)-1]
			if want[c] {
				continue
			}
			want[c] = true
			for _, tg := range g[c] {
				if _, ok := g[tg]; ok {
					todo = append(todo, tg)
				}
			}
		}
		require.Equal(t, want, reached, "seed %d", seed)
		sorted := slices.Clone(visits)
		slices.Sort(sorted)
		require.Len(t, slices.Compact(sorted), len(visits), "seed %d: a chain visited twice", seed)

		var unknown, wantUnknown []string
		loops := map[[2]string]int{}
		for _, b := range breaks {
			if b.Reason == BreakUnknown {
				unknown = append(unknown, b.Chain+">"+b.Target)
			} else {
				loops[[2]string{b.Chain, b.Target}]++
			}
		}
		for c := range reached {
			for _, tg := range g[c] {
				if strings.HasPrefix(tg, "missing") {
					wantUnknown = append(wantUnknown, c+">"+tg)
				}
			}
		}
		slices.Sort(unknown)
		slices.Sort(wantUnknown)
		require.Equal(t, wantUnknown, unknown, "seed %d", seed)

		// The jumps kept are acyclic: remove, per chain, as many jumps to a
		// target as were reported as loops.
		kept := graph{}
		for c := range reached {
			left := maps.Clone(loops)
			for _, tg := range g[c] {
				if k := [2]string{c, tg}; left[k] > 0 {
					left[k]--
					continue
				}
				if _, ok := g[tg]; ok {
					kept[c] = append(kept[c], tg)
				}
			}
		}
		require.False(t, cyclic(kept), "seed %d: jumps left form a loop: %v", seed, kept)
		for k := range loops {
			require.True(t, path(g, k[1], k[0]), "seed %d: %v reported as a loop but %s does not reach %s", seed, k, k[1], k[0])
		}
	}
}

// cyclic reports whether g has a cycle (Kahn's algorithm).
func cyclic(g graph) bool {
	in := map[string]int{}
	for c, ts := range g {
		in[c] += 0
		for _, tg := range ts {
			in[tg]++
		}
	}
	var q []string
	for c, d := range in {
		if d == 0 {
			q = append(q, c)
		}
	}
	seen := 0
	for len(q) > 0 {
		c := q[0]
		q = q[1:]
		seen++
		for _, tg := range g[c] {
			if in[tg]--; in[tg] == 0 {
				q = append(q, tg)
			}
		}
	}
	return seen != len(in)
}

// path reports whether from reaches to through declared chains.
func path(g graph, from, to string) bool {
	seen := map[string]bool{}
	todo := []string{from}
	for len(todo) > 0 {
		c := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if c == to {
			return true
		}
		if seen[c] {
			continue
		}
		seen[c] = true
		todo = append(todo, g[c]...)
	}
	return false
}
