package wireguard

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// KeyFileMode is the permission of the private key file: readable and
// writable by its owner only.
const KeyFileMode fs.FileMode = 0o600

// ReadKeyFile reads the private key stored at path (base64, as WriteKeyFile
// writes it and `wg genkey` prints it). A missing file wraps fs.ErrNotExist;
// a file that holds no valid key wraps ErrInvalidKey; both wrap ErrKeyFile.
// A file readable by others is reported the same way as a valid one: the
// caller (the Manager) tightens it with os.Chmod.
func ReadKeyFile(path string) (PrivateKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return PrivateKey{}, fmt.Errorf("%w: %w", ErrKeyFile, err)
	}
	k, err := ParsePrivateKey(string(b))
	if err != nil {
		return PrivateKey{}, fmt.Errorf("%w %s: %w", ErrKeyFile, path, err)
	}
	return k, nil
}

// WriteKeyFile stores k at path atomically with mode KeyFileMode: it writes
// a temporary file in the same directory (created 0600, so the key is never
// readable by others, not even for a moment), syncs it, renames it over
// path and syncs the directory. The directory must exist. Errors wrap
// ErrKeyFile.
func WriteKeyFile(path string, k PrivateKey) (err error) {
	if path == "" {
		return fmt.Errorf("%w: empty path", ErrKeyFile)
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("%w: %w", ErrKeyFile, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	if err = f.Chmod(KeyFileMode); err != nil {
		return fmt.Errorf("%w: %w", ErrKeyFile, err)
	}
	if _, err = f.WriteString(k.Base64() + "\n"); err != nil {
		return fmt.Errorf("%w: %w", ErrKeyFile, err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("%w: %w", ErrKeyFile, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("%w: %w", ErrKeyFile, err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return fmt.Errorf("%w: %w", ErrKeyFile, err)
	}
	if d, derr := os.Open(dir); derr == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}

// isNotExist reports whether err says the key file does not exist.
func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
