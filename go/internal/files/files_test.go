package files

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Each file that has no end to read to, or is too large, is one line naming the flag and the file, before a
// byte is read; a FIFO with no writer does not block the open.
func TestOnlyARegularFileWithinItsBoundIsRead(t *testing.T) {
	dir := t.TempDir()
	small, large, fifo := filepath.Join(dir, "small"), filepath.Join(dir, "large"), filepath.Join(dir, "fifo")
	if err := os.WriteFile(small, []byte("abc"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(large, make([]byte, 11), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	if data, err := ReadRegular(small, "body-file", 10); err != nil || string(data) != "abc" {
		t.Fatalf("%q, %v", data, err)
	}
	for path, says := range map[string]string{
		large:                      "--body-file " + large + " is 11 bytes; the bound is 10",
		dir:                        "--body-file " + dir + " is a directory, not a file",
		fifo:                       "--body-file " + fifo + " is not a regular file (a device, FIFO or socket), so it has no end to read to",
		"/dev/zero":                "--body-file /dev/zero is not a regular file (a device, FIFO or socket), so it has no end to read to",
		filepath.Join(dir, "none"): "--body-file: cannot read " + filepath.Join(dir, "none") + ": no such file or directory",
	} {
		if _, err := ReadRegular(path, "body-file", 10); err == nil || err.Error() != says {
			t.Errorf("%s: %v, want %q", path, err, says)
		}
	}
}

// A file that is not PEM is named for what it should have been.
func TestTLSFilesThatAreNotPEMAreNamed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "not.pem")
	if err := os.WriteFile(path, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ClientTLS(path, ""); err == nil || !strings.HasPrefix(err.Error(), "--tls-ca "+path+" is not a PEM certificate") {
		t.Errorf("--tls-ca: %v", err)
	}
	if _, err := ServerTLS(path, path); err == nil || !strings.HasPrefix(err.Error(), "--tls-cert "+path+" is not a PEM certificate") {
		t.Errorf("--tls-cert: %v", err)
	}
	if roots, err := Roots(path, "back-ca"); err != nil || roots != nil {
		t.Errorf("Roots of a file with no certificate: %v, %v", roots, err)
	}
}
