package main

import (
	"crypto/tls"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"syscall"
)

// maxPEMBytes bounds a certificate, key or CA bundle file (the system's whole CA bundle is ~200 KB),
// as labkit/files.py's MAX_PEM_BYTES does.
const maxPEMBytes = 1 << 20

// readRegular reads the file a flag names, once it is known to be a regular file of at most max
// bytes: a device (/dev/zero) or FIFO has no end, so it is refused before a byte is read, and at
// most max+1 bytes are read, so a file that grows after the check is refused too. Errors are usage
// errors naming the flag and the file (exit status 2).
func readRegular(path, flagName string, max int64) ([]byte, error) {
	// O_NONBLOCK: opening a FIFO with no writer would wait for one; a regular file ignores it.
	file, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("--%s: cannot read %s: %v", flagName, path, unwrapPath(err))
	}
	defer file.Close()
	info, err := file.Stat()
	if err != nil {
		return nil, fmt.Errorf("--%s: cannot read %s: %v", flagName, path, unwrapPath(err))
	}
	if info.IsDir() {
		return nil, fmt.Errorf("--%s %s is a directory, not a file", flagName, path)
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("--%s %s is not a regular file (a device, FIFO or socket), so it has no end to read to", flagName, path)
	}
	if info.Size() > max {
		return nil, fmt.Errorf("--%s %s is %d bytes; the bound is %d", flagName, path, info.Size(), max)
	}
	data, err := io.ReadAll(io.LimitReader(file, max+1))
	if err != nil {
		return nil, fmt.Errorf("--%s: cannot read %s: %v", flagName, path, unwrapPath(err))
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("--%s %s grew past the bound of %d bytes while it was read", flagName, path, max)
	}
	return data, nil
}

// loadKeyPair reads --tls-cert and --tls-key (regular files, bounded) and says which one is wrong:
// tls.LoadX509KeyPair would read /dev/zero forever, and its errors name neither file.
func loadKeyPair(certPath, keyPath string) (tls.Certificate, error) {
	certPEM, err := readRegular(certPath, "tls-cert", maxPEMBytes)
	if err != nil {
		return tls.Certificate{}, err
	}
	keyPEM, err := readRegular(keyPath, "tls-key", maxPEMBytes)
	if err != nil {
		return tls.Certificate{}, err
	}
	if !holdsPEM(certPEM, "CERTIFICATE") {
		return tls.Certificate{}, fmt.Errorf("--tls-cert %s is not a PEM certificate (no BEGIN CERTIFICATE block)", certPath)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("--tls-key %s is not a valid PEM private key for --tls-cert %s: %v", keyPath, certPath, err)
	}
	return pair, nil
}

// holdsPEM says whether data has a PEM block of this type.
func holdsPEM(data []byte, blockType string) bool {
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return false
		}
		if block.Type == blockType {
			return true
		}
	}
}
