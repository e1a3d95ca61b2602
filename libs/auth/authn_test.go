package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/google/go-cmp/cmp"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func bearer(token string) *http.Request {
	r := httptest.NewRequest("GET", "/v1/workloads", nil)
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	return r
}

const tokens = `alice-token,alice,uid-a,"team-a,devs"
bob-token,bob,uid-b,team-b
`

func TestTokenFile(t *testing.T) {
	a, err := New(t.Context(), Options{TokenAuthFile: writeFile(t, "tokens.csv", tokens)})
	if err != nil {
		t.Fatal(err)
	}
	u, err := a.Authenticate(bearer("alice-token"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(User{Name: "alice", UID: "uid-a", Groups: []string{"team-a", "devs", GroupAuthenticated}}, u); diff != "" {
		t.Errorf("(-want,+got)\n%s", diff)
	}
	for name, r := range map[string]*http.Request{
		"wrong token":   bearer("alice-token2"),
		"no credential": bearer(""),
		"not bearer":    func() *http.Request { r := bearer(""); r.Header.Set("Authorization", "Basic YWxpY2U6eA=="); return r }(),
		"huge token":    bearer(strings.Repeat("a", MaxTokenBytes)),
	} {
		if _, err := a.Authenticate(r); !errors.Is(err, ErrUnauthenticated) {
			t.Errorf("%s: err = %v, want ErrUnauthenticated", name, err)
		}
	}
}

func TestAnonymous(t *testing.T) {
	a, err := New(t.Context(), Options{Anonymous: true, TokenAuthFile: writeFile(t, "tokens.csv", tokens)})
	if err != nil {
		t.Fatal(err)
	}
	u, err := a.Authenticate(bearer(""))
	if err != nil || u.Name != UserAnonymous || !u.InGroup(GroupUnauthenticated) || u.InGroup(GroupAuthenticated) {
		t.Errorf("no credential under --anonymous: %+v, %v", u, err)
	}
	// A wrong credential is refused, never downgraded to anonymous.
	if _, err := a.Authenticate(bearer("nope")); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("a wrong token under --anonymous: %v, want ErrUnauthenticated", err)
	}
}

func TestNoAuthenticatorRefusesToStart(t *testing.T) {
	if _, err := New(t.Context(), Options{}); !errors.Is(err, ErrNoAuthenticator) {
		t.Errorf("New without authenticators = %v, want ErrNoAuthenticator", err)
	}
	if _, err := New(t.Context(), Options{ClientCAFile: "ca.pem"}); err == nil || !strings.Contains(err.Error(), "--tls-cert-file") {
		t.Errorf("--client-ca-file without TLS = %v", err)
	}
	if _, err := New(t.Context(), Options{OIDC: OIDCOptions{IssuerURL: "http://issuer", ClientID: "c"}}); err == nil || !strings.Contains(err.Error(), "https") {
		t.Errorf("plain http issuer = %v", err)
	}
}

// issuer is a local OIDC provider: discovery and JWKS over TLS, and a
// signer for its tokens.
type issuer struct {
	url, caFile string
	key         *rsa.PrivateKey
}

func newIssuer(t *testing.T) *issuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	iss := &issuer{key: key}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": iss.url, "jwks_uri": iss.url + "/keys",
			"authorization_endpoint": iss.url + "/auth", "token_endpoint": iss.url + "/token",
			"id_token_signing_alg_values_supported": []string{"RS256"}})
	})
	mux.HandleFunc("/keys", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}}})
	})
	srv := httptest.NewTLSServer(mux)
	t.Cleanup(srv.Close)
	iss.url = srv.URL
	iss.caFile = writeFile(t, "issuer-ca.pem", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})))
	return iss
}

// token signs claims with key (the issuer's unless another is given).
func (iss *issuer) token(t *testing.T, claims map[string]any, key *rsa.PrivateKey) string {
	t.Helper()
	if key == nil {
		key = iss.key
	}
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key}, (&jose.SignerOptions{}).WithHeader("kid", "k1").WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	base := map[string]any{"iss": iss.url, "sub": "s-123", "aud": "jetqueue", "exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix()}
	for k, v := range claims {
		base[k] = v
	}
	raw, err := jwt.Signed(sig).Claims(base).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func TestOIDC(t *testing.T) {
	iss := newIssuer(t)
	a, err := New(t.Context(), Options{OIDC: OIDCOptions{IssuerURL: iss.url, ClientID: "jetqueue", CAFile: iss.caFile,
		UsernameClaim: "email", GroupsClaim: "groups"}})
	if err != nil {
		t.Fatal(err)
	}
	good := iss.token(t, map[string]any{"email": "carol@example.com", "email_verified": true, "groups": []string{"team-a"}}, nil)
	u, err := a.Authenticate(bearer(good))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(User{Name: "carol@example.com", UID: "s-123", Groups: []string{"team-a", GroupAuthenticated}}, u); diff != "" {
		t.Errorf("(-want,+got)\n%s", diff)
	}
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	for name, tok := range map[string]string{
		"expired":          iss.token(t, map[string]any{"email": "c@x", "exp": time.Now().Add(-time.Minute).Unix()}, nil),
		"wrong audience":   iss.token(t, map[string]any{"email": "c@x", "aud": "someone-else"}, nil),
		"wrong issuer":     iss.token(t, map[string]any{"email": "c@x", "iss": "https://evil.example"}, nil),
		"foreign key":      iss.token(t, map[string]any{"email": "c@x"}, other),
		"unverified email": iss.token(t, map[string]any{"email": "c@x", "email_verified": false}, nil),
		"no email":         iss.token(t, nil, nil),
	} {
		if u, err := a.Authenticate(bearer(tok)); !errors.Is(err, ErrUnauthenticated) {
			t.Errorf("%s: %+v, %v; want ErrUnauthenticated", name, u, err)
		}
	}
}

func TestOIDCUsernamePrefix(t *testing.T) {
	iss := newIssuer(t)
	a, err := New(t.Context(), Options{OIDC: OIDCOptions{IssuerURL: iss.url, ClientID: "jetqueue", CAFile: iss.caFile}})
	if err != nil {
		t.Fatal(err)
	}
	u, err := a.Authenticate(bearer(iss.token(t, nil, nil)))
	if err != nil || u.Name != iss.url+"#s-123" {
		t.Errorf("sub claim: %+v, %v; want the issuer-prefixed sub", u, err)
	}
}

// pki makes a CA and the certificates it signs.
type pki struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  string
}

func newCA(t *testing.T, cn string) *pki {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &pki{cert: cert, key: key, pem: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))}
}

// issue returns a PEM certificate and key for subject.
func (ca *pki) issue(t *testing.T, subject pkix.Name, usage x509.ExtKeyUsage, dns ...string) (string, string) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: subject, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{usage}, KeyUsage: x509.KeyUsageDigitalSignature, DNSNames: dns}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}))
}

func TestClientCertificates(t *testing.T) {
	ca, rogue := newCA(t, "clients"), newCA(t, "rogue")
	serverCert, serverKey := ca.issue(t, pkix.Name{CommonName: "ingest"}, x509.ExtKeyUsageServerAuth, "127.0.0.1", "localhost")
	a, err := New(t.Context(), Options{ClientCAFile: writeFile(t, "ca.pem", ca.pem),
		TLSCertFile: writeFile(t, "tls.crt", serverCert), TLSPrivateKeyFile: writeFile(t, "tls.key", serverKey)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, err := a.Authenticate(r)
		if err != nil {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		_ = json.NewEncoder(w).Encode(u)
	}))
	srv.TLS = a.TLSConfig()
	srv.StartTLS()
	t.Cleanup(srv.Close)
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	get := func(c *pki, subject pkix.Name) (int, User, error) {
		cfg := &tls.Config{RootCAs: roots, ServerName: "localhost"}
		if c != nil {
			certPEM, keyPEM := c.issue(t, subject, x509.ExtKeyUsageClientAuth)
			pair, err := tls.X509KeyPair([]byte(certPEM), []byte(keyPEM))
			if err != nil {
				t.Fatal(err)
			}
			// Sent whatever CAs the server asks for, as an attacker would.
			cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }
		}
		resp, err := (&http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}).Get(srv.URL)
		if err != nil {
			return 0, User{}, err
		}
		defer resp.Body.Close()
		var u User
		b, _ := io.ReadAll(resp.Body)
		_ = json.Unmarshal(b, &u)
		return resp.StatusCode, u, nil
	}
	// O entries come back in DER's (sorted) order.
	code, u, err := get(ca, pkix.Name{CommonName: "dana", Organization: []string{"team-a", "ops"}})
	if err != nil || code != 200 {
		t.Fatalf("good certificate: %d, %v", code, err)
	}
	if diff := cmp.Diff(User{Name: "dana", Groups: []string{"ops", "team-a", GroupAuthenticated}}, u); diff != "" {
		t.Errorf("(-want,+got)\n%s", diff)
	}
	if code, _, err := get(nil, pkix.Name{}); err != nil || code != http.StatusUnauthorized {
		t.Errorf("no certificate: %d, %v; want 401", code, err)
	}
	if _, _, err := get(rogue, pkix.Name{CommonName: "dana"}); err == nil {
		t.Error("a certificate of another CA was accepted")
	}
}

// TestServingCertificateReloads: a rotated certificate on disk is served
// at the next handshake.
func TestServingCertificateReloads(t *testing.T) {
	ca := newCA(t, "ca")
	c1, k1 := ca.issue(t, pkix.Name{CommonName: "one"}, x509.ExtKeyUsageServerAuth)
	certFile, keyFile := writeFile(t, "tls.crt", c1), writeFile(t, "tls.key", k1)
	kp := &keyPair{certFile: certFile, keyFile: keyFile}
	first, err := kp.get(nil)
	if err != nil {
		t.Fatal(err)
	}
	c2, k2 := ca.issue(t, pkix.Name{CommonName: "two"}, x509.ExtKeyUsageServerAuth)
	later := time.Now().Add(time.Minute)
	for f, data := range map[string]string{certFile: c2, keyFile: k2} {
		if err := os.WriteFile(f, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		_ = os.Chtimes(f, later, later)
	}
	second, err := kp.get(nil)
	if err != nil {
		t.Fatal(err)
	}
	if first.Leaf.Subject.CommonName != "one" || second.Leaf.Subject.CommonName != "two" {
		t.Errorf("served %s then %s, want one then two", first.Leaf.Subject.CommonName, second.Leaf.Subject.CommonName)
	}
}

// TestClientCertificateMustBeVerified: a certificate the TLS stack did not
// verify against --client-ca-file (a listener set up without it) names
// nobody.
func TestClientCertificateMustBeVerified(t *testing.T) {
	ca := newCA(t, "clients")
	serverCert, serverKey := ca.issue(t, pkix.Name{CommonName: "ingest"}, x509.ExtKeyUsageServerAuth)
	a, err := New(t.Context(), Options{ClientCAFile: writeFile(t, "ca.pem", ca.pem),
		TLSCertFile: writeFile(t, "tls.crt", serverCert), TLSPrivateKeyFile: writeFile(t, "tls.key", serverKey)})
	if err != nil {
		t.Fatal(err)
	}
	certPEM, _ := newCA(t, "rogue").issue(t, pkix.Name{CommonName: "mallory", Organization: []string{"ops"}}, x509.ExtKeyUsageClientAuth)
	block, _ := pem.Decode([]byte(certPEM))
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	r := bearer("")
	r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}}
	if u, err := a.Authenticate(r); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("an unverified certificate authenticated %+v", u)
	}
}
