package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// WriteSecretVolume writes files into dir the way the kubelet updates a
// Secret volume (its AtomicWriter): the files live in a timestamped
// directory, `..data` points at it, each name is a symlink through `..data`,
// and an update swaps `..data` with one rename and removes the old
// directory. A certificate renewed by cert-manager reaches the adapter so.
func WriteSecretVolume(dir string, files map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	ts := fmt.Sprintf("..%s", time.Now().UTC().Format("2006_01_02_15_04_05.000000000"))
	if err := os.Mkdir(filepath.Join(dir, ts), 0o700); err != nil {
		return err
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, ts, name), data, 0o600); err != nil {
			return err
		}
	}
	old, _ := os.Readlink(filepath.Join(dir, "..data"))
	tmp := filepath.Join(dir, "..data_tmp")
	_ = os.Remove(tmp)
	if err := os.Symlink(ts, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		return err
	}
	for name := range files {
		link := filepath.Join(dir, name)
		if _, err := os.Lstat(link); os.IsNotExist(err) {
			if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
				return err
			}
		}
	}
	if old != "" {
		return os.RemoveAll(filepath.Join(dir, old))
	}
	return nil
}
