package objfail

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/nodeplane/nodeplane/dataplane"
)

func TestSet(t *testing.T) {
	b := dataplane.Backoff{Initial: time.Second, Max: time.Minute}
	now := time.Unix(1000, 0)
	reason := errors.New("refused")
	s := Set[int, error]{}
	a := s.Fail("a", 1, 1, b, now, reason)
	a.Err = errors.New("a")
	if s.Due(now) {
		t.Fatal("due at once")
	}
	if !s.Due(a.Retry.Due) {
		t.Fatal("not due at Retry.Due")
	}
	a2 := s.Fail("a", 2, 2, b, now, reason)
	if a2 != a || a.Hold != 2 || a.Apply != 2 || a.Retry.Failures != 2 {
		t.Fatalf("second failure: %+v", a)
	}
	s.Fail("w", 1, 1, b, now, reason).Err = errors.New("w")
	s.Fail("x", 1, 2, b, now, reason).Err = errors.New("x")
	broken := map[string]error{"x": errors.New("x broken"), "y": errors.New("y")}

	texts := func(errl []error) []string {
		var out []string
		for _, e := range errl {
			out = append(out, e.Error())
		}
		slices.Sort(out)
		return out
	}
	errl, waiting := s.Errors(broken, 2)
	if got, want := texts(errl), []string{"a", "w", "x broken", "y"}; !slices.Equal(got, want) || waiting != 1 {
		t.Fatalf("Errors = %q, %d; want %q, 1 (x once, as broken)", got, waiting, want)
	}
	if n := s.Failing(broken); n != len(errl) {
		t.Fatalf("Failing = %d, want %d: as many objects as Errors lists", n, len(errl))
	}
	p := Partial(errl, waiting)
	if p.Failed != 3 || p.Waiting != 1 || len(p.Errs) != 4 || !errors.Is(p, dataplane.ErrPartial) {
		t.Fatalf("Partial = %+v", p)
	}
}
