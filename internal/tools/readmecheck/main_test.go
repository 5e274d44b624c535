package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

const exampleFile = `package x_test

import "fmt"

func Example_hello() {
	msg := "hello"
	if msg != "" {
		fmt.Println(msg)
	}
}
`

func TestSnippetsMatchTheirExamples(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "x_test.go"), []byte(exampleFile), 0o644))
	md := filepath.Join(dir, "README.md")
	good := "# x\n\n<!-- example: x_test.go Example_hello -->\n```go\nmsg := \"hello\"\nif msg != \"\" {\n\tfmt.Println(msg)\n}\n```\n"
	require.NoError(t, os.WriteFile(md, []byte(good), 0o644))
	problems, err := checkFile(md, false)
	require.NoError(t, err)
	require.Empty(t, problems)

	drifted := "<!-- example: x_test.go Example_hello -->\n```go\nmsg := \"bye\"\n```\n" +
		"```go\nunmarked()\n```\n" +
		"<!-- example: x_test.go Example_missing -->\n```go\n```\n" +
		"<!-- example: x.go Example_hello -->\n```go\n```\n"
	require.NoError(t, os.WriteFile(md, []byte(drifted), 0o644))
	problems, err = checkFile(md, false)
	require.NoError(t, err)
	require.Len(t, problems, 4, "%q", problems)
	require.Contains(t, problems[0], "differs from the body of Example_hello")
	require.Contains(t, problems[1], "without a marker")
	require.Contains(t, problems[2], "has no func Example_missing")
	require.Contains(t, problems[3], "not a test file")
	after, err := os.ReadFile(md)
	require.NoError(t, err)
	require.Equal(t, drifted, string(after), "a check writes nothing")

	problems, err = checkFile(md, true)
	require.NoError(t, err)
	require.Len(t, problems, 3, "fix rewrites the drifted block and reports the rest")
	after, err = os.ReadFile(md)
	require.NoError(t, err)
	require.Contains(t, string(after), "```go\nmsg := \"hello\"\nif msg != \"\" {\n\tfmt.Println(msg)\n}\n```\n```go\nunmarked()")
}
