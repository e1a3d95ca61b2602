package e2e

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
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/jetqueue/jetqueue/libs/bus"
	"github.com/jetqueue/jetqueue/libs/embedded"
)

// TestNATSMutualTLS: --nats-ca, --nats-cert and --nats-key reach a server
// that verifies clients; without the client
// certificate the server refuses the connection.
func TestNATSMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca, caKey := newCert(t, dir, "ca", nil, nil, true)
	newCert(t, dir, "server", ca, caKey, false)
	newCert(t, dir, "client", ca, caKey, false)
	file := func(name string) string { return filepath.Join(dir, name) }
	srv, err := embedded.StartNATSFrom(t.TempDir(), "", func(o *server.Options) {
		tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: file("server.pem"), KeyFile: file("server-key.pem"),
			CaFile: file("ca.pem"), Verify: true})
		if err != nil {
			t.Fatal(err)
		}
		o.TLSConfig, o.TLS, o.TLSVerify, o.TLSTimeout = tc, true, true, 2
	})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	id := bus.Identity{CA: file("ca.pem"), Cert: file("client.pem"), Key: file("client-key.pem")}
	nc, err := id.Dial(srv.ClientURL(), "tls")
	if err != nil {
		t.Fatalf("with the client certificate: %v", err)
	}
	if !nc.TLSRequired() {
		t.Error("connected without TLS")
	}
	if err := nc.Flush(); err != nil {
		t.Error(err)
	}
	nc.Close()
	if nc, err := (bus.Identity{CA: file("ca.pem")}).Dial(srv.ClientURL(), "no-cert"); err == nil {
		nc.Close()
		t.Error("a client without a certificate was accepted")
	}
	if _, err := (bus.Identity{CA: file("ca.pem"), Cert: file("client.pem")}).Dial(srv.ClientURL(), "half"); err == nil {
		t.Error("--nats-cert without --nats-key was accepted")
	}
}

// newCert writes name.pem and name-key.pem under dir: a CA when isCA, else
// a certificate for 127.0.0.1 signed by parent.
func newCert(t *testing.T, dir, name string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, isCA bool) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: isCA, BasicConstraintsValid: true}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	write := func(file, typ string, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, file), pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(name+".pem", "CERTIFICATE", der)
	write(name+"-key.pem", "EC PRIVATE KEY", keyDER)
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}
