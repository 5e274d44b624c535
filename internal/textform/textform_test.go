package textform_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/internal/textform"
)

type color uint8

const (
	red color = iota + 1
	green
)

func (c color) String() string {
	switch c {
	case red:
		return "red"
	case green:
		return "green"
	}
	return fmt.Sprintf("color(%d)", uint8(c))
}

func TestParse(t *testing.T) {
	for _, c := range []color{red, green} {
		got, err := textform.Parse([]byte(c.String()), red, green)
		require.NoError(t, err)
		require.Equal(t, c, got)
	}
	for _, text := range []string{"Red", "RED", "", "color(1)", "blue"} {
		got, err := textform.Parse([]byte(text), red, green)
		require.EqualError(t, err, fmt.Sprintf(`textform_test: unknown color %q; valid: red, green`, text))
		require.Zero(t, got)
	}
}

type kinds uint8

var kindsText = textform.Flags[kinds]{Names: []string{"links", "addrs", "routes"}, Sep: "|", None: "none"}

func TestFlags(t *testing.T) {
	for v, text := range map[kinds]string{0: "none", 1: "links", 2: "addrs", 5: "links|routes", 7: "links|addrs|routes", 0x81: "links|0x80"} {
		require.Equal(t, text, kindsText.Format(v))
		if v&^7 != 0 {
			continue
		}
		got, err := kindsText.Parse([]byte(text))
		require.NoError(t, err, text)
		require.Equal(t, v, got, text)
	}
	got, err := kindsText.Parse([]byte("routes|links|links"))
	require.NoError(t, err, "any order, repeats allowed")
	require.Equal(t, kinds(5), got)
	for _, text := range []string{"", "Links", "links|", "links|none", "links,addrs", "links|0x80"} {
		_, err := kindsText.Parse([]byte(text))
		require.ErrorContains(t, err, `textform_test: unknown kinds "`, text)
		require.ErrorContains(t, err, `valid: links, addrs, routes joined by "|", or "none" for none`, text)
	}
	csv := textform.Flags[uint16]{Names: []string{"NEW", "ESTABLISHED"}, Sep: ","}
	require.Empty(t, csv.Format(0))
	got16, err := csv.Parse(nil)
	require.NoError(t, err, "an empty None is the empty text")
	require.Zero(t, got16)
	got16, err = csv.Parse([]byte("ESTABLISHED,NEW"))
	require.NoError(t, err)
	require.Equal(t, uint16(3), got16)
}

type report struct {
	Name string
	Err  error
}

func (r report) MarshalJSON() ([]byte, error) {
	type plain report
	return json.Marshal(struct {
		plain
		Err *string
	}{plain(r), textform.Error(r.Err)})
}

func TestError(t *testing.T) {
	require.Nil(t, textform.Error(nil))
	require.Equal(t, "boom", *textform.Error(errors.New("boom")))

	plain, err := json.Marshal(struct{ Err error }{errors.New("boom")})
	require.NoError(t, err)
	require.JSONEq(t, `{"Err":{}}`, string(plain), "what encoding/json does with an error")

	b, err := json.Marshal([]report{{"a", errors.New("boom")}, {"b", nil}})
	require.NoError(t, err)
	require.JSONEq(t, `[{"Name":"a","Err":"boom"},{"Name":"b","Err":null}]`, string(b))
}
