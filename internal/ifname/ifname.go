package ifname

import (
	"fmt"
	"regexp"
	"slices"
)

// Compile compiles every pattern in order. It returns nil when patterns is
// empty. A pattern that does not compile fails the whole call with an error
// that names field and the pattern (`<field> pattern "<p>": ...`) and wraps
// the *syntax.Error of package regexp/syntax; callers add their own
// sentinel errors with fmt.Errorf("%w: %w", sentinel, err).
func Compile(field string, patterns []string) ([]*regexp.Regexp, error) {
	if len(patterns) == 0 {
		return nil, nil
	}
	res := make([]*regexp.Regexp, 0, len(patterns))
	for _, p := range patterns {
		re, err := regexp.Compile(p)
		if err != nil {
			return nil, fmt.Errorf("%s pattern %q: %w", field, p, err)
		}
		res = append(res, re)
	}
	return res, nil
}

// MatchAny reports whether any of res matches name. It is false when res is
// empty.
func MatchAny(res []*regexp.Regexp, name string) bool {
	return slices.ContainsFunc(res, func(re *regexp.Regexp) bool { return re.MatchString(name) })
}

// Filter selects interface names by an include list and an exclude list of
// regular expressions. The zero Filter matches every name. A Filter is
// immutable and safe for concurrent use.
type Filter struct {
	include []*regexp.Regexp
	exclude []*regexp.Regexp
}

// NewFilter compiles include and exclude into a Filter. A bad pattern
// returns the error of Compile, naming the field "Include" or "Exclude".
func NewFilter(include, exclude []string) (Filter, error) {
	inc, err := Compile("Include", include)
	if err != nil {
		return Filter{}, err
	}
	exc, err := Compile("Exclude", exclude)
	if err != nil {
		return Filter{}, err
	}
	return Filter{include: inc, exclude: exc}, nil
}

// Matches reports whether name passes the filter: it matches an include
// pattern (or there are none) and no exclude pattern.
func (f Filter) Matches(name string) bool {
	if len(f.include) > 0 && !MatchAny(f.include, name) {
		return false
	}
	return !MatchAny(f.exclude, name)
}
