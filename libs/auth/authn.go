package auth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	"k8s.io/apiserver/pkg/authentication/token/tokenfile"
)

// Options are the authentication and authorization flags, named as
// kube-apiserver names them.
type Options struct {
	// TokenAuthFile is kube-apiserver's static token CSV:
	// token,user,uid,"group1,group2". It is read once, at start.
	TokenAuthFile string
	OIDC          OIDCOptions
	// ClientCAFile verifies client certificates: the subject's CN is the
	// user, its O entries the groups. It needs TLS.
	ClientCAFile string
	// TLSCertFile and TLSPrivateKeyFile serve the API over TLS; a
	// changed pair on disk is picked up at the next handshake.
	TLSCertFile       string
	TLSPrivateKeyFile string
	// Anonymous lets a request without credentials act as
	// system:anonymous (group system:unauthenticated). Without it, such a
	// request gets 401.
	Anonymous bool
	// AuthorizationPolicyFile holds RBAC Roles, ClusterRoles and their
	// bindings (package rbac). Without one, every identified caller may
	// do everything.
	AuthorizationPolicyFile string
}

// OIDCOptions configure OIDC bearer tokens (kube-apiserver's --oidc-*).
type OIDCOptions struct {
	IssuerURL      string
	ClientID       string
	CAFile         string
	UsernameClaim  string
	UsernamePrefix string
	GroupsClaim    string
	GroupsPrefix   string
}

// RegisterFlags declares the authentication and authorization flags.
func RegisterFlags(fs *flag.FlagSet, o *Options) {
	fs.StringVar(&o.TokenAuthFile, "token-auth-file", "", "static bearer tokens, kube-apiserver's CSV: token,user,uid,\"group1,group2\" (read at start)")
	fs.StringVar(&o.OIDC.IssuerURL, "oidc-issuer-url", "", "https URL of the OIDC issuer whose ID tokens are accepted as bearer tokens")
	fs.StringVar(&o.OIDC.ClientID, "oidc-client-id", "", "the audience every OIDC token must be issued for")
	fs.StringVar(&o.OIDC.CAFile, "oidc-ca-file", "", "CA bundle that verifies the OIDC issuer's certificate (empty: the system roots)")
	fs.StringVar(&o.OIDC.UsernameClaim, "oidc-username-claim", "sub", "the OIDC claim that names the user")
	fs.StringVar(&o.OIDC.UsernamePrefix, "oidc-username-prefix", "", "prefix of OIDC user names (empty: the issuer URL and # unless the claim is email; - for none)")
	fs.StringVar(&o.OIDC.GroupsClaim, "oidc-groups-claim", "", "the OIDC claim that lists the user's groups (a string or a list of strings)")
	fs.StringVar(&o.OIDC.GroupsPrefix, "oidc-groups-prefix", "", "prefix of the groups taken from OIDC tokens")
	fs.StringVar(&o.ClientCAFile, "client-ca-file", "", "CA bundle that verifies client certificates (CN: user, O: groups); needs --tls-cert-file")
	fs.StringVar(&o.TLSCertFile, "tls-cert-file", "", "serve the HTTP API over TLS with this certificate (reloaded when it changes on disk)")
	fs.StringVar(&o.TLSPrivateKeyFile, "tls-private-key-file", "", "the private key of --tls-cert-file")
	fs.BoolVar(&o.Anonymous, "anonymous", false, "local experiments only: a request without credentials acts as system:anonymous instead of getting 401")
	fs.StringVar(&o.AuthorizationPolicyFile, "authorization-policy-file", "", "RBAC policy: rbac.authorization.k8s.io/v1 Roles, ClusterRoles and bindings (empty: every identified caller may do everything)")
}

// MaxTokenBytes bounds a bearer token: an OIDC ID token is a few KiB.
const MaxTokenBytes = 16 << 10

// ErrUnauthenticated is returned for a request without a valid
// credential; the wrapped message says why, for the server's log.
var ErrUnauthenticated = errors.New("unauthenticated")

// ErrNoAuthenticator is returned by New when no way to authenticate is
// configured and --anonymous is not given either: the server would be
// open to anyone without anyone having chosen so.
var ErrNoAuthenticator = errors.New("no authentication configured: give --token-auth-file, --oidc-issuer-url, " +
	"or --client-ca-file (with --tls-cert-file), or --anonymous to let unauthenticated requests in on purpose")

// ErrDiscovery is returned by New when the OIDC issuer's discovery
// document could not be fetched: unlike the other errors of New, trying
// again later may succeed.
var ErrDiscovery = errors.New("OIDC discovery failed")

// Authenticator identifies the caller of an HTTP request.
type Authenticator struct {
	bearer    *bearertoken.Authenticator
	clientCA  bool
	anonymous bool
	tls       *tls.Config
}

// New builds the authenticators the options configure. It reads the token
// file, the CA bundles and the TLS pair, and fetches the OIDC issuer's
// discovery document, so a mistake in any of them stops the start.
func New(ctx context.Context, o Options) (*Authenticator, error) {
	a := &Authenticator{anonymous: o.Anonymous}
	var tokens []authenticator.Token
	if o.TokenAuthFile != "" {
		t, err := tokenfile.NewCSV(o.TokenAuthFile)
		if err != nil {
			return nil, fmt.Errorf("--token-auth-file: %w", err)
		}
		tokens = append(tokens, t)
	}
	if o.OIDC.IssuerURL != "" || o.OIDC.ClientID != "" {
		t, err := newOIDC(ctx, o.OIDC)
		if err != nil {
			return nil, err
		}
		tokens = append(tokens, t)
	}
	if len(tokens) > 0 {
		a.bearer = bearertoken.New(firstOf(tokens))
	}
	if (o.TLSCertFile == "") != (o.TLSPrivateKeyFile == "") {
		return nil, errors.New("--tls-cert-file and --tls-private-key-file go together")
	}
	if o.ClientCAFile != "" && o.TLSCertFile == "" {
		return nil, errors.New("--client-ca-file needs TLS: give --tls-cert-file and --tls-private-key-file")
	}
	if o.TLSCertFile != "" {
		kp := &keyPair{certFile: o.TLSCertFile, keyFile: o.TLSPrivateKeyFile}
		if _, err := kp.get(nil); err != nil {
			return nil, fmt.Errorf("--tls-cert-file/--tls-private-key-file: %w", err)
		}
		a.tls = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: kp.get}
	}
	if o.ClientCAFile != "" {
		pool, err := certPool(o.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("--client-ca-file: %w", err)
		}
		// A client without a certificate may still present a token; one
		// with a certificate the CA did not sign fails the handshake.
		a.tls.ClientCAs, a.tls.ClientAuth, a.clientCA = pool, tls.VerifyClientCertIfGiven, true
	}
	if a.bearer == nil && !a.clientCA && !a.anonymous {
		return nil, ErrNoAuthenticator
	}
	return a, nil
}

// TLSConfig is the server's TLS configuration, or nil to serve plain HTTP.
func (a *Authenticator) TLSConfig() *tls.Config { return a.tls }

// Anonymous says whether unauthenticated requests are let in.
func (a *Authenticator) Anonymous() bool { return a.anonymous }

// Authenticate returns the caller of r. A verified client certificate
// wins; else a bearer token, which must be valid if one is presented
// (even under --anonymous: a wrong credential is never silently
// downgraded); else, under --anonymous, system:anonymous. Anything else
// is ErrUnauthenticated.
func (a *Authenticator) Authenticate(r *http.Request) (User, error) {
	if a.clientCA && r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0 {
		// The chain was verified against --client-ca-file (and for client
		// authentication) during the handshake.
		subject := r.TLS.VerifiedChains[0][0].Subject
		if subject.CommonName != "" {
			return authenticated(User{Name: subject.CommonName, Groups: subject.Organization}), nil
		}
	}
	if h := r.Header.Get("Authorization"); h != "" {
		if len(h) > MaxTokenBytes {
			return User{}, fmt.Errorf("%w: Authorization header of %d bytes (at most %d)", ErrUnauthenticated, len(h), MaxTokenBytes)
		}
		if a.bearer == nil {
			return User{}, fmt.Errorf("%w: no bearer token authenticator is configured", ErrUnauthenticated)
		}
		resp, ok, err := a.bearer.AuthenticateRequest(r)
		if ok {
			info := resp.User
			return authenticated(User{Name: info.GetName(), UID: info.GetUID(), Groups: info.GetGroups()}), nil
		}
		if err == nil {
			err = errors.New("not a bearer token")
		}
		return User{}, fmt.Errorf("%w: %v", ErrUnauthenticated, err)
	}
	if a.anonymous {
		return Anonymous(), nil
	}
	return User{}, fmt.Errorf("%w: no credentials", ErrUnauthenticated)
}

// firstOf asks each token authenticator in turn: the first to recognise
// the token answers. Errors of the others are kept for the log.
type firstOf []authenticator.Token

func (f firstOf) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	var errs []error
	for _, t := range f {
		resp, ok, err := t.AuthenticateToken(ctx, token)
		if ok {
			return resp, true, nil
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return nil, false, errors.Join(errs...)
}

// oidcTokens verifies OIDC ID tokens with go-oidc: signature by the
// issuer's published keys, issuer, audience (the client id) and expiry.
type oidcTokens struct {
	verifier *oidc.IDTokenVerifier
	o        OIDCOptions
}

func newOIDC(ctx context.Context, o OIDCOptions) (*oidcTokens, error) {
	if o.IssuerURL == "" || o.ClientID == "" {
		return nil, errors.New("--oidc-issuer-url and --oidc-client-id go together")
	}
	u, err := url.Parse(o.IssuerURL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		// A token's signing keys fetched over plain HTTP could be anyone's.
		return nil, fmt.Errorf("--oidc-issuer-url %q: must be an https URL", o.IssuerURL)
	}
	if o.UsernameClaim == "" {
		o.UsernameClaim = "sub"
	}
	if o.UsernamePrefix == "" && o.UsernameClaim != "email" {
		// As kube-apiserver: a user named by an opaque claim cannot clash
		// with a user of another authenticator.
		o.UsernamePrefix = o.IssuerURL + "#"
	}
	if o.UsernamePrefix == "-" {
		o.UsernamePrefix = ""
	}
	client := &http.Client{Timeout: 30 * time.Second}
	if o.CAFile != "" {
		pool, err := certPool(o.CAFile)
		if err != nil {
			return nil, fmt.Errorf("--oidc-ca-file: %w", err)
		}
		client.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	}
	// The key set keeps this context's client (not its deadline) to
	// fetch rotated keys later.
	dctx, cancel := context.WithTimeout(oidc.ClientContext(ctx, client), 30*time.Second)
	defer cancel()
	provider, err := oidc.NewProvider(dctx, o.IssuerURL)
	if err != nil {
		return nil, fmt.Errorf("--oidc-issuer-url: %w: %w", ErrDiscovery, err)
	}
	return &oidcTokens{verifier: provider.Verifier(&oidc.Config{ClientID: o.ClientID}), o: o}, nil
}

func (t *oidcTokens) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	if strings.Count(token, ".") != 2 {
		return nil, false, nil // not a JWT: not ours to judge
	}
	idt, err := t.verifier.Verify(ctx, token)
	if err != nil {
		return nil, false, fmt.Errorf("oidc: %w", err)
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		return nil, false, fmt.Errorf("oidc: claims: %w", err)
	}
	name, ok := claims[t.o.UsernameClaim].(string)
	if !ok || name == "" {
		return nil, false, fmt.Errorf("oidc: claim %q is not a non-empty string", t.o.UsernameClaim)
	}
	if t.o.UsernameClaim == "email" {
		// As kube-apiserver: an email the issuer says it did not verify
		// names nobody.
		if v, present := claims["email_verified"]; present && v != true {
			return nil, false, errors.New("oidc: email_verified is not true")
		}
	}
	info := &userInfo{name: t.o.UsernamePrefix + name, uid: idt.Subject}
	if t.o.GroupsClaim != "" {
		switch g := claims[t.o.GroupsClaim].(type) {
		case nil:
		case string:
			info.groups = []string{t.o.GroupsPrefix + g}
		case []any:
			for _, v := range g {
				s, ok := v.(string)
				if !ok {
					return nil, false, fmt.Errorf("oidc: claim %q holds a non-string", t.o.GroupsClaim)
				}
				info.groups = append(info.groups, t.o.GroupsPrefix+s)
			}
		default:
			return nil, false, fmt.Errorf("oidc: claim %q is neither a string nor a list of strings", t.o.GroupsClaim)
		}
	}
	return &authenticator.Response{User: info}, true, nil
}

// userInfo is the apiserver's user.Info of an OIDC token.
type userInfo struct {
	name, uid string
	groups    []string
}

func (u *userInfo) GetName() string               { return u.name }
func (u *userInfo) GetUID() string                { return u.uid }
func (u *userInfo) GetGroups() []string           { return u.groups }
func (u *userInfo) GetExtra() map[string][]string { return nil }

// maxPEMBytes bounds a CA bundle or certificate file read at start.
const maxPEMBytes = 1 << 20

func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > limit {
		return nil, fmt.Errorf("%s: %d bytes, at most %d", path, st.Size(), limit)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err == nil && int64(len(data)) > limit {
		err = fmt.Errorf("%s: more than %d bytes", path, limit)
	}
	return data, err
}

func certPool(path string) (*x509.CertPool, error) {
	data, err := readBounded(path, maxPEMBytes)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("%s: no PEM certificate", path)
	}
	return pool, nil
}

// keyPair serves a certificate and key from disk, loading them again
// when either file changes, so a rotated certificate (cert-manager, a
// renewed Secret) is served without a restart. A pair that does not load
// (the two files caught mid-rotation) keeps the previous one in service.
type keyPair struct {
	certFile, keyFile string

	mu      sync.Mutex
	cert    *tls.Certificate
	modTime [2]time.Time
}

func (k *keyPair) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	var mod [2]time.Time
	for i, p := range []string{k.certFile, k.keyFile} {
		if st, err := os.Stat(p); err == nil {
			mod[i] = st.ModTime()
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cert != nil && mod == k.modTime {
		return k.cert, nil
	}
	cert, err := tls.LoadX509KeyPair(k.certFile, k.keyFile)
	if err != nil {
		if k.cert != nil {
			return k.cert, nil
		}
		return nil, err
	}
	k.cert, k.modTime = &cert, mod
	return k.cert, nil
}
