package command

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var testLineRE = regexp.MustCompile(`line (\d+) failed|Error in line (\d+):`)

func numbered(n int) []byte {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "line %d of the input\n", i)
	}
	return []byte(b.String())
}

func TestNewRestoreErrorTakesTheRunnersOutput(t *testing.T) {
	ce := &Error{Argv: []string{"ipset", "restore"}, ExitCode: 1, Stdout: []byte("out"),
		Stderr: []byte("ipset v7.17: Error in line 4: Hash is full\n"), Err: errors.New("exit status 1")}
	e := NewRestoreError([]string{"ipset", "restore"}, numbered(10), nil, ce, testLineRE)
	assert.Equal(t, 4, e.Line)
	assert.Equal(t, "out", string(e.Stdout), "the runner's stdout when Run returned none")
	assert.Equal(t, "ipset v7.17: Error in line 4: Hash is full", e.Message())
	assert.Equal(t, "line 4 of the input", e.FailedLine())
	assert.ErrorIs(t, e, ce)
	var got *Error
	require.ErrorAs(t, e, &got)
	assert.Equal(t, 1, got.ExitCode)

	// Run's own stdout wins; the line may be named on stdout alone.
	e = NewRestoreError([]string{"x"}, numbered(10), []byte("line 7 failed"), &Error{Err: errors.New("exit status 2")}, testLineRE)
	assert.Equal(t, 7, e.Line)
	assert.Equal(t, "line 7 failed", string(e.Stdout))

	// Another runner's error: its text is the message and is searched.
	e = NewRestoreError([]string{"x"}, numbered(3), nil, errors.New("x: line 2 failed: bad"), testLineRE)
	assert.Equal(t, 2, e.Line)
	assert.Empty(t, e.Stderr)
	assert.Equal(t, "x: line 2 failed: bad", e.Message())

	// No line named, or no way to find one.
	for _, re := range []*regexp.Regexp{testLineRE, nil} {
		e = NewRestoreError([]string{"x"}, numbered(3), nil, errors.New("signal: killed"), re)
		assert.Zero(t, e.Line)
		assert.Empty(t, e.FailedLine())
	}
	// A line number beyond the input quotes no line.
	e = NewRestoreError([]string{"x"}, numbered(3), nil, errors.New("line 9 failed"), testLineRE)
	assert.Equal(t, 9, e.Line)
	assert.Empty(t, e.FailedLine())
}

func TestRestoreErrorText(t *testing.T) {
	e := &RestoreError{Argv: []string{"iptables-nft-restore", "--noflush"}, Input: numbered(20), Line: 10,
		Stderr: []byte("iptables-nft-restore: line 10 failed:\n  Bad rule\n"), Err: errors.New("exit status 1")}
	want := "iptables-nft-restore --noflush (input line 10): iptables-nft-restore: line 10 failed: Bad rule\ninput:\n" +
		"      7  line 7 of the input\n" +
		"      8  line 8 of the input\n" +
		"      9  line 9 of the input\n" +
		">    10  line 10 of the input\n" +
		"     11  line 11 of the input\n" +
		"     12  line 12 of the input\n" +
		"     13  line 13 of the input"
	assert.Equal(t, want, e.Error())

	// Without a line, the start of the input and the runner's error.
	e = &RestoreError{Argv: []string{"ipset", "restore"}, Input: numbered(20), Err: errors.New("signal: killed")}
	text := e.Error()
	assert.True(t, strings.HasPrefix(text, "ipset restore: signal: killed\ninput:\n      1  line 1 of the input\n"), text)
	assert.True(t, strings.HasSuffix(text, "\n      7  line 7 of the input"), "no newline at the end: %q", text)
	assert.NotContains(t, text, "line 8 ")

	// Near the start, and with no input at all.
	e.Line = 1
	assert.Equal(t, ">     1  line 1 of the input\n      2  line 2 of the input\n      3  line 3 of the input\n      4  line 4 of the input\n", e.Excerpt())
	e.Input = nil
	assert.Equal(t, "ipset restore (input line 1): signal: killed", e.Error())
}

// The excerpt and the message are capped, whatever the input and output.
func TestRestoreErrorIsCapped(t *testing.T) {
	long := strings.Repeat("é", 300) // two bytes each
	input := strings.Repeat(long+"\n", 1000)
	e := &RestoreError{Argv: []string{"x"}, Input: []byte(input), Line: 500, Stderr: []byte(strings.Repeat("y ", 5000))}
	ex := e.Excerpt()
	assert.Equal(t, 7, strings.Count(ex, "\n"))
	for l := range strings.Lines(ex) {
		assert.LessOrEqual(t, len(l), 9+excerptLineMax+len("…\n"))
		assert.True(t, strings.HasSuffix(l, "…\n"), l)
		assert.True(t, strings.ToValidUTF8(l, "?") == l, "cut on a rune boundary")
	}
	assert.LessOrEqual(t, len(e.Message()), maxQuoted+len("…"))
	assert.Less(t, len(e.Error()), 8*1024)
}
