package mtu_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/mtu"
)

func TestWriteFile(t *testing.T) {
	tests := []struct {
		name   string
		rel    string
		before string // existing content, "" for none
		mtu    int
	}{
		{"new file", "mtu", "", 1450},
		{"replaces a file", "mtu", "1500", 1440},
		{"replaces a longer file", "mtu", "1500\n\n# a long comment that must not survive\n", 1410},
		{"creates parent directories", "var/lib/agent/mtu", "", 8950},
		{"smallest", "mtu", "", mtu.MinMTU},
		{"largest", "mtu", "", mtu.MaxMTU},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			path := filepath.Join(root, tc.rel)
			if tc.before != "" {
				require.NoError(t, os.WriteFile(path, []byte(tc.before), 0o600))
			}
			require.NoError(t, mtu.WriteFile(path, tc.mtu))

			b, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, strconv.Itoa(tc.mtu), string(b), "just the number, no newline")
			st, err := os.Stat(path)
			require.NoError(t, err)
			assert.Equal(t, mtu.FileMode, st.Mode().Perm())
			entries, err := os.ReadDir(filepath.Dir(path))
			require.NoError(t, err)
			require.Len(t, entries, 1, "no temporary file left behind")
			assert.Equal(t, filepath.Base(path), entries[0].Name())

			got, err := mtu.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, tc.mtu, got)
		})
	}
}

func TestWriteFileRelativePath(t *testing.T) {
	t.Chdir(t.TempDir())
	require.NoError(t, mtu.WriteFile("mtu", 1400))
	got, err := mtu.ReadFile("mtu")
	require.NoError(t, err)
	assert.Equal(t, 1400, got)
}

func TestWriteFileBadInput(t *testing.T) {
	dir := t.TempDir()
	existing := filepath.Join(dir, "mtu")
	require.NoError(t, os.WriteFile(existing, []byte("1500"), 0o644))
	tests := []struct {
		name    string
		path    string
		mtu     int
		wantErr error
	}{
		{"zero", existing, 0, mtu.ErrInvalidMTU},
		{"negative", existing, -1450, mtu.ErrInvalidMTU},
		{"below IPv4 minimum", existing, mtu.MinMTU - 1, mtu.ErrInvalidMTU},
		{"above maximum", existing, mtu.MaxMTU + 1, mtu.ErrInvalidMTU},
		{"empty path", "", 1450, fs.ErrInvalid},
		{"directory path", dir + string(filepath.Separator), 1450, fs.ErrInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := mtu.WriteFile(tc.path, tc.mtu)
			require.ErrorIs(t, err, tc.wantErr)
			require.NotErrorIs(t, err, mtu.ErrInvalidOptions, "an argument, not an option")
			b, rerr := os.ReadFile(existing)
			require.NoError(t, rerr)
			assert.Equal(t, "1500", string(b), "nothing changed")
			entries, rerr := os.ReadDir(dir)
			require.NoError(t, rerr)
			assert.Len(t, entries, 1)
		})
	}
}

func TestWriteFileOntoDirectoryFails(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "mtu")
	require.NoError(t, os.Mkdir(target, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(target, "keep"), []byte("x"), 0o644))
	err := mtu.WriteFile(target, 1450)
	require.Error(t, err)
	assert.NotErrorIs(t, err, mtu.ErrInvalidMTU, "an I/O failure is not bad input")
	assert.NotErrorIs(t, err, fs.ErrInvalid)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "the temporary file is removed")
	assert.FileExists(t, filepath.Join(target, "keep"))
}

func TestReadFile(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    int
		wantErr error
	}{
		{name: "plain", content: "1450", want: 1450},
		{name: "with newline", content: "1450\n", want: 1450},
		{name: "with spaces", content: "  9000 \r\n", want: 9000},
		{name: "empty", content: "", wantErr: mtu.ErrInvalidMTU},
		{name: "not a number", content: "fourteen fifty", wantErr: mtu.ErrInvalidMTU},
		{name: "two numbers", content: "1450 1500", wantErr: mtu.ErrInvalidMTU},
		{name: "negative", content: "-1450", wantErr: mtu.ErrInvalidMTU},
		{name: "too small", content: strconv.Itoa(mtu.MinMTU - 1), wantErr: mtu.ErrInvalidMTU},
		{name: "too large", content: strconv.Itoa(mtu.MaxMTU + 1), wantErr: mtu.ErrInvalidMTU},
		{name: "overflow", content: "99999999999999999999999", wantErr: mtu.ErrInvalidMTU},
		{name: "too long", content: "1450" + string(make([]byte, 100)), wantErr: mtu.ErrInvalidMTU},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "mtu")
			require.NoError(t, os.WriteFile(path, []byte(tc.content), 0o644))
			got, err := mtu.ReadFile(path)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				require.NotErrorIs(t, err, mtu.ErrInvalidOptions, "a file, not an option")
				assert.Zero(t, got)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}

	_, err := mtu.ReadFile(filepath.Join(t.TempDir(), "missing"))
	require.ErrorIs(t, err, os.ErrNotExist)
}
