package ifname

import (
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCompile(t *testing.T) {
	res, err := Compile("Include", []string{`^eth`, `^ens[0-9]+$`})
	require.NoError(t, err)
	require.Len(t, res, 2)
	assert.Equal(t, `^eth`, res[0].String(), "order is kept")
	assert.Equal(t, `^ens[0-9]+$`, res[1].String())

	for _, patterns := range [][]string{nil, {}} {
		res, err := Compile("Include", patterns)
		require.NoError(t, err)
		assert.Nil(t, res, "no patterns: nil, %#v", patterns)
	}
}

func TestCompileError(t *testing.T) {
	tests := []struct {
		field    string
		patterns []string
		bad      string
		code     syntax.ErrorCode
	}{
		{"Include", []string{"eth("}, "eth(", syntax.ErrMissingParen},
		{"Exclude", []string{"ok", "[z-a]", "("}, "[z-a]", syntax.ErrInvalidCharRange},
		{"interface", []string{"a", "*"}, "*", syntax.ErrMissingRepeatArgument},
	}
	for _, tc := range tests {
		t.Run(tc.field, func(t *testing.T) {
			res, err := Compile(tc.field, tc.patterns)
			require.Error(t, err)
			assert.Nil(t, res)
			assert.Contains(t, err.Error(), fmt.Sprintf("%s pattern %q: ", tc.field, tc.bad),
				"names the field and the first bad pattern")
			assert.Regexp(t, `^`+regexp.QuoteMeta(tc.field)+` pattern `, err.Error(), "nothing before the field name")

			var reErr *syntax.Error
			require.ErrorAs(t, err, &reErr, "wraps the regexp/syntax error")
			assert.Equal(t, tc.code, reErr.Code)

			sentinel := errors.New("caller: invalid")
			wrapped := fmt.Errorf("%w: %w", sentinel, err)
			assert.ErrorIs(t, wrapped, sentinel)
			assert.ErrorIs(t, wrapped, err)
			require.ErrorAs(t, wrapped, &reErr, "the regexp error survives the caller's wrapping")
			assert.Equal(t, "caller: invalid: "+err.Error(), wrapped.Error())
		})
	}
}

func TestMatchAny(t *testing.T) {
	res, err := Compile("x", []string{`^eth`, `^tunl0$`})
	require.NoError(t, err)
	tests := []struct {
		name string
		want bool
	}{
		{"eth0", true},
		{"tunl0", true},
		{"tunl00", false},
		{"veth0", false},
		{"", false},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, MatchAny(res, tc.name), "%q", tc.name)
	}
	assert.False(t, MatchAny(nil, "eth0"), "no patterns match nothing")
	assert.False(t, MatchAny(nil, ""))

	unanchored, err := Compile("x", []string{`eth`})
	require.NoError(t, err)
	assert.True(t, MatchAny(unanchored, "veth0"), "patterns are not anchored")
}

func TestFilter(t *testing.T) {
	tests := []struct {
		include, exclude []string
		name             string
		want             bool
	}{
		{name: "eth0", want: true},
		{name: "", want: true},
		{include: []string{"^eth"}, name: "eth0", want: true},
		{include: []string{"^eth"}, name: "veth0", want: false},
		{include: []string{"^eth"}, name: "", want: false},
		{include: []string{"^eth", "^ens"}, name: "ens3", want: true},
		{include: []string{"^eth", "^ens"}, name: "lo", want: false},
		{exclude: []string{"^kube-ipvs0$"}, name: "kube-ipvs0", want: false},
		{exclude: []string{"^kube-ipvs0$"}, name: "kube-ipvs00", want: true},
		{exclude: []string{"^lo$", "^docker"}, name: "docker0", want: false},
		{include: []string{"^eth"}, exclude: []string{"^eth1$"}, name: "eth1", want: false},
		{include: []string{"^eth"}, exclude: []string{"^eth1$"}, name: "eth2", want: true},
		{include: []string{"^eth"}, exclude: []string{"^eth1$"}, name: "ens1", want: false},
		{include: []string{"."}, exclude: []string{"."}, name: "eth0", want: false},
		{include: []string{}, exclude: []string{}, name: "anything", want: true},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%v-%v-%s", tc.include, tc.exclude, tc.name), func(t *testing.T) {
			f, err := NewFilter(tc.include, tc.exclude)
			require.NoError(t, err)
			assert.Equal(t, tc.want, f.Matches(tc.name))
		})
	}
}

func TestFilterZeroValue(t *testing.T) {
	var f Filter
	for _, name := range []string{"", "eth0", "lo", "kube-ipvs0"} {
		assert.True(t, f.Matches(name), "%q", name)
	}
}

func TestNewFilterError(t *testing.T) {
	f, err := NewFilter([]string{"eth("}, []string{"[z-a]"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `Include pattern "eth("`, "include is checked first")
	assert.True(t, f.Matches("x"), "a failed NewFilter returns the zero Filter")

	_, err = NewFilter([]string{"^eth"}, []string{"ok", "[z-a]"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `Exclude pattern "[z-a]"`)
	var reErr *syntax.Error
	require.ErrorAs(t, err, &reErr)
	assert.Equal(t, syntax.ErrInvalidCharRange, reErr.Code)
}
