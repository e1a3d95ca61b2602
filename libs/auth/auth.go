// Package auth turns a request into an identity, with kube-apiserver's
// flags and formats: a static token file (--token-auth-file), OIDC bearer
// tokens (--oidc-*), client certificates (--client-ca-file), and an
// explicit --anonymous for local experiments. Package auth/rbac decides
// what an identity may do.
//
//	HTTP request ──Authenticator.Authenticate──▶ User ──WithUser──▶ context
//	NATS message ──(the NATS front door)──────▶ User ──WithUser──▶ context
//	context ──UserFrom──▶ rbac.Policy.Authorize ──▶ allowed | 403
//
// The contract for every front door: put the caller's identity on the
// request's context with WithUser before the request reaches a handler.
// A request whose context holds no user is treated as unauthenticated:
// it is refused (401) unless the server runs with --anonymous, in which
// case it acts as system:anonymous. Nothing else is ever assumed about
// who sent a request.
package auth

import (
	"context"
	"slices"
)

// Well-known names, as Kubernetes spells them.
const (
	// GroupAuthenticated is every authenticated user's group.
	GroupAuthenticated = "system:authenticated"
	// GroupUnauthenticated is the anonymous user's group.
	GroupUnauthenticated = "system:unauthenticated"
	// UserAnonymous is who an unauthenticated request acts as under
	// --anonymous.
	UserAnonymous = "system:anonymous"
	// GroupMasters may do everything, whatever the policy says, as in
	// Kubernetes. jetqueue's own in-process callers (the Kubernetes
	// bridge) act in it; grant it to people with care.
	GroupMasters = "system:masters"
)

// User is an authenticated identity.
type User struct {
	Name   string
	UID    string
	Groups []string
}

// InGroup says whether u is a member of group.
func (u User) InGroup(group string) bool { return slices.Contains(u.Groups, group) }

// Anonymous is the user of an unauthenticated request under --anonymous.
func Anonymous() User {
	return User{Name: UserAnonymous, Groups: []string{GroupUnauthenticated}}
}

// authenticated adds system:authenticated to a user's groups.
func authenticated(u User) User {
	if !u.InGroup(GroupAuthenticated) {
		u.Groups = append(slices.Clip(u.Groups), GroupAuthenticated)
	}
	return u
}

type userKey struct{}

// WithUser returns ctx carrying u as the caller's identity. Every front
// door (HTTP, NATS request/reply, durable submissions) calls it once it
// knows who is calling.
func WithUser(ctx context.Context, u User) context.Context {
	return context.WithValue(ctx, userKey{}, u)
}

// UserFrom returns the identity WithUser put on ctx; false when there is
// none (the caller is unauthenticated).
func UserFrom(ctx context.Context) (User, bool) {
	u, ok := ctx.Value(userKey{}).(User)
	return u, ok
}
