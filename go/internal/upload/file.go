package upload

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"labkit/go/internal/files"
	"labkit/go/internal/limits"
	"labkit/go/internal/pyrandom"
	"labkit/go/internal/reason"
)

// block is the size of each randbytes call of the Python make_file: the same calls make the same bytes.
const block = 1 << 20

// File is what `labkit-go upload-file` is told (labkit/echo/upload_agent.py make_file and file_facts): the
// file of `labkit upload` on this host, generated with Size bytes from Seed when Generate (--size given).
type File struct {
	Path       string
	Size, Seed int64
	Generate   bool
}

// Facts generates the file unless it is there, then hashes it: the agent's one JSON line (event "file": path,
// bytes, sha256, and generated when asked to generate). The bytes are CPython's random.Random(seed).randbytes,
// so a file is the same whichever twin made it.
func (f File) Facts() (map[string]any, error) {
	if f.Path == "" {
		return nil, fmt.Errorf("--path is required")
	}
	if f.Generate && (f.Size < 1 || f.Size > limits.MaxFileBytes) {
		return nil, fmt.Errorf("file size must be between 1 byte and %d, not %d", limits.MaxFileBytes, f.Size)
	}
	facts := map[string]any{"event": "file", "path": f.Path}
	var err error
	if f.Generate {
		if facts["generated"], err = f.make(); err != nil {
			return nil, err
		}
	}
	if facts["bytes"], facts["sha256"], err = hashFile(f.Path); err != nil {
		return nil, err
	}
	return facts, nil
}

// make writes the seeded bytes unless a file of that size is there (the caller names files by size and seed),
// through a temporary name, so a file of the right size is the right file.
func (f File) make() (bool, error) {
	if info, err := os.Stat(f.Path); err == nil && info.Mode().IsRegular() && info.Size() == f.Size {
		return false, nil
	}
	if err := os.MkdirAll(filepath.Dir(f.Path), 0o755); err != nil {
		return false, fmt.Errorf("cannot write %s: %v", f.Path, reason.Of(err))
	}
	tmp := fmt.Sprintf("%s.tmp-%d", f.Path, os.Getpid())
	if err := writeSeeded(tmp, f.Size, f.Seed); err != nil {
		os.Remove(tmp)
		return false, fmt.Errorf("cannot write %s: %v", f.Path, reason.Of(err))
	}
	if err := os.Rename(tmp, f.Path); err != nil {
		return false, fmt.Errorf("cannot write %s: %v", f.Path, reason.Of(err))
	}
	return true, nil
}

func writeSeeded(path string, size, seed int64) error {
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	rng := pyrandom.New(seed)
	bytes := make([]byte, block)
	for left := size; left > 0; left -= int64(len(bytes)) {
		bytes = bytes[:min(left, block)]
		rng.Fill(bytes)
		if _, err := out.Write(bytes); err != nil {
			out.Close()
			return err
		}
	}
	return out.Close()
}

// hashFile is the size and SHA-256 of a file: a regular file within the upload bound (a one-line error
// if it is missing, a device such as /dev/zero, or larger), hashed no further than the bound.
func hashFile(path string) (int64, string, error) {
	source, err := files.OpenRegular(path, "path", limits.MaxFileBytes)
	if err != nil {
		return 0, "", err
	}
	defer source.Close()
	digest := sha256.New()
	size, err := io.Copy(digest, io.LimitReader(source, limits.MaxFileBytes+1))
	if err != nil {
		return 0, "", fmt.Errorf("cannot read %s: %v", path, reason.Of(err))
	}
	if size > limits.MaxFileBytes {
		return 0, "", fmt.Errorf("--path %s grew past the bound of %d bytes while it was read", path, limits.MaxFileBytes)
	}
	return size, hex.EncodeToString(digest.Sum(nil)), nil
}
