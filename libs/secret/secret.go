// Package secret makes the random credentials a local setup keeps on
// disk (jqctl dev's admin token, its NATS passwords).
package secret

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"strings"
)

// Kept reads the secret kept in file, or makes one of the given number of
// random bytes (hex) and keeps it there, readable by its owner only, so
// that a restart finds the same secret.
func Kept(file string, bytes int) (string, error) {
	b, err := os.ReadFile(file)
	if err == nil && len(strings.TrimSpace(string(b))) > 0 {
		return strings.TrimSpace(string(b)), nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	raw := make([]byte, bytes)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	s := hex.EncodeToString(raw)
	return s, os.WriteFile(file, []byte(s+"\n"), 0o600)
}
