// Package files opens the files a user names on labkit-go's command line as labkit/files.py does: a regular
// file (never a device or FIFO) within its kind's bound, every error one line naming the flag and the file.
package files

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"syscall"

	"labkit/go/internal/limits"
	"labkit/go/internal/reason"
)

// ReadRegular reads the file a flag names, once it is known to be a regular file of at most max
// bytes: a device (/dev/zero) or FIFO has no end, so it is refused before a byte is read, and at
// most max+1 bytes are read, so a file that grows after the check is refused too.
func ReadRegular(path, flagName string, max int64) ([]byte, error) {
	file, err := OpenRegular(path, flagName, max)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	data, err := io.ReadAll(io.LimitReader(file, max+1))
	if err != nil {
		return nil, fmt.Errorf("--%s: cannot read %s: %v", flagName, path, reason.Of(err))
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("--%s %s grew past the bound of %d bytes while it was read", flagName, path, max)
	}
	return data, nil
}

// OpenRegular opens the file a flag names once it is known to be a regular file of at most max bytes,
// for a caller that streams it (a hash): it should read no more than max+1 bytes of it.
func OpenRegular(path, flagName string, max int64) (*os.File, error) {
	// O_NONBLOCK: opening a FIFO with no writer would wait for one; a regular file ignores it.
	file, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("--%s: cannot read %s: %v", flagName, path, reason.Of(err))
	}
	info, err := file.Stat()
	switch {
	case err != nil:
		err = fmt.Errorf("--%s: cannot read %s: %v", flagName, path, reason.Of(err))
	case info.IsDir():
		err = fmt.Errorf("--%s %s is a directory, not a file", flagName, path)
	case !info.Mode().IsRegular():
		err = fmt.Errorf("--%s %s is not a regular file (a device, FIFO or socket), so it has no end to read to", flagName, path)
	case info.Size() > max:
		err = fmt.Errorf("--%s %s is %d bytes; the bound is %d", flagName, path, info.Size(), max)
	}
	if err != nil {
		file.Close()
		return nil, err
	}
	return file, nil
}

// KeyPair reads --tls-cert and --tls-key (regular files, bounded) and says which one is wrong:
// tls.LoadX509KeyPair would read /dev/zero forever, and its errors name neither file.
func KeyPair(certPath, keyPath string) (tls.Certificate, error) {
	certPEM, err := ReadRegular(certPath, "tls-cert", limits.MaxPEMBytes)
	if err != nil {
		return tls.Certificate{}, err
	}
	keyPEM, err := ReadRegular(keyPath, "tls-key", limits.MaxPEMBytes)
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

// ServerTLS is the TLS config of a server holding the pair of --tls-cert and --tls-key.
func ServerTLS(certPath, keyPath string) (*tls.Config, error) {
	pair, err := KeyPair(certPath, keyPath)
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, nil
}

// ClientTLS is a TLS client config trusting the roots of the PEM file --tls-ca names, checking serverName
// instead of the host when given.
func ClientTLS(caPath, serverName string) (*tls.Config, error) {
	roots, err := Roots(caPath, "tls-ca")
	if err != nil {
		return nil, err
	}
	if roots == nil {
		return nil, fmt.Errorf("--tls-ca %s is not a PEM certificate (no BEGIN CERTIFICATE block)", caPath)
	}
	return &tls.Config{RootCAs: roots, ServerName: serverName, MinVersion: tls.VersionTLS12}, nil
}

// Roots are the certificates of the PEM file --flagName names; nil when it holds none (the caller says so in
// its flag's words).
func Roots(path, flagName string) (*x509.CertPool, error) {
	pem, err := ReadRegular(path, flagName, limits.MaxPEMBytes)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, nil
	}
	return roots, nil
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
