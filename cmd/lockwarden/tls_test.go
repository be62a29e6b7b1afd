package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockwarden/lockwarden/integration/redistest"
)

// writeCerts writes a CA and a server certificate for 127.0.0.1 signed by it, as PEM files in dir, and
// returns their paths: the CA's certificate, the server's certificate and the server's key.
func writeCerts(t *testing.T, dir string) (ca, cert, key string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTemplate := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "lockwarden test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	srvTemplate := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTemplate, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, der []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	return write("ca.pem", "CERTIFICATE", caDER), write("server.pem", "CERTIFICATE", srvDER), write("server.key", "EC PRIVATE KEY", keyDER)
}

// TestTLS: the command reaches a redis-server over TLS with --tls-ca, and refuses one whose
// certificate it cannot verify.
func TestTLS(t *testing.T) {
	t.Parallel()
	ca, cert, key := writeCerts(t, t.TempDir())
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tlsPort := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	srv := redistest.Start(t, redistest.WithArgs("--tls-port", strconv.Itoa(tlsPort), "--tls-cert-file", cert,
		"--tls-key-file", key, "--tls-ca-cert-file", ca, "--tls-auth-clients", "no"))
	c := newCoordinator(t, srv.Client(t))
	name := "cli:" + t.Name()
	m := c.Mutex(name)
	if err := m.Lock(t.Context()); err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(tlsPort)
	if out := mustRun(t, "--addr", addr, "--tls-ca", ca, "inspect", name); !strings.Contains(out, "held by "+m.Owner()) {
		t.Fatalf("inspect over TLS:\n%s", out)
	}
	r := lockwarden(t, "", "--addr", addr, "--tls", "--timeout", "2s", "inspect", name) // the CA is not trusted
	if r.code != 1 || !strings.Contains(r.stderr, "cannot reach Redis") || strings.Count(r.stderr, "\n") != 1 {
		t.Fatalf("TLS with an unknown CA: %+v", r)
	}
}
