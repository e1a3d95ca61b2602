package natsconf

import (
	"encoding/json"
	"errors"
	"fmt"
)

// RequestInfoHeader is the header the NATS server sets on a request that
// crossed a service import: the requester's account always, its user when
// the import shares (share: true). The server replaces any value the
// client sent, so only a request that came through an import may be
// believed; Account's own users may not publish requests (see Render).
const RequestInfoHeader = "Nats-Request-Info"

// Requester is who sent a request, as the server says.
type Requester struct {
	Account string
	// User is the user name, the nkey or the JWT's public key.
	User string
	// Name is a JWT user's name (the server's name_tag), else "".
	Name string
}

// ErrNoUser means the request crossed an import that does not share the
// requester's user: the configuration lacks share: true.
var ErrNoUser = errors.New("the request's Nats-Request-Info names no user: the importing account's jq.api.v1.> import needs share: true")

// ParseRequester reads the server's Nats-Request-Info value; ok is false
// when there is none (the request did not cross an import).
func ParseRequester(v string) (r Requester, ok bool, err error) {
	if v == "" {
		return r, false, nil
	}
	// The server's ClientInfo, of which only these fields matter.
	var ci struct {
		Account string `json:"acc"`
		User    string `json:"user"`
		NameTag string `json:"name_tag"`
	}
	if err := json.Unmarshal([]byte(v), &ci); err != nil {
		return r, true, fmt.Errorf("%s: %w", RequestInfoHeader, err)
	}
	if ci.Account == "" {
		return r, true, fmt.Errorf("%s names no account", RequestInfoHeader)
	}
	if ci.User == "" {
		return Requester{Account: ci.Account}, true, ErrNoUser
	}
	return Requester{Account: ci.Account, User: ci.User, Name: ci.NameTag}, true, nil
}
