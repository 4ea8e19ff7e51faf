// Package scopedtoken mints and verifies router tokens scoped to one Sandbox: an HMAC-SHA256
// signature over (namespace, name, UID, issue time, expiry) with a secret the controller and the
// router share. The router accepts such a token for that Sandbox object alone, without asking the
// API server, which lets a platform hand one sandbox to a party that has no Kubernetes identity.
// The UID ties the token to one incarnation of the name: a later Sandbox of the same name (the
// claim gone, the name reused) is not opened by it.
//
// Wire form: "sbx1." + base64url(JSON claims) + "." + base64url(signature).
package scopedtoken

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Prefix starts every scoped token, so the router can tell them from Kubernetes tokens.
const Prefix = "sbx1."

// MinSecretLen is the shortest secret accepted (256 bits).
const MinSecretLen = 32

// Claims are what a token grants: one Sandbox, the object with UID, until Expires.
type Claims struct {
	Namespace string `json:"ns"`
	Name      string `json:"name"`
	// UID is the Sandbox's metadata.uid. Tokens minted before it was bound carry none; Verify
	// refuses them.
	UID string `json:"uid"`
	// IssuedAt (Unix seconds) is when the token was minted; its holder renews it when a third of
	// its lifetime, IssuedAt to Expires, is left. Zero when unknown.
	IssuedAt int64 `json:"iat,omitempty"`
	Expires  int64 `json:"exp"` // Unix seconds
}

// Errors of Verify; none of them carries the token.
var (
	ErrMalformed = errors.New("malformed scoped token")
	ErrSignature = errors.New("scoped token signature does not match")
	ErrExpired   = errors.New("scoped token expired")
	// ErrUnbound: a validly signed token that names no Sandbox UID, minted before tokens were
	// bound to one; it could open any later Sandbox of its name, so it opens none.
	ErrUnbound = errors.New("scoped token binds no Sandbox UID")
)

// Signer mints and verifies tokens with one secret.
type Signer struct{ secret []byte }

// NewSigner checks the secret's length.
func NewSigner(secret []byte) (*Signer, error) {
	if len(secret) < MinSecretLen {
		return nil, fmt.Errorf("scoped token secret must be at least %d bytes, got %d", MinSecretLen, len(secret))
	}
	return &Signer{secret: append([]byte(nil), secret...)}, nil
}

// Mint returns a token for c.
func (s *Signer) Mint(c Claims) (string, error) {
	if c.Namespace == "" || c.Name == "" || c.UID == "" || c.Expires == 0 {
		return "", errors.New("scoped token claims need a namespace, a name, a Sandbox UID and an expiry")
	}
	if c.IssuedAt != 0 && c.IssuedAt >= c.Expires {
		return "", errors.New("scoped token must be issued before it expires")
	}
	payload, err := json.Marshal(c)
	if err != nil {
		return "", err
	}
	body := Prefix + b64(payload)
	return body + "." + b64(s.sign(body)), nil
}

// Verify returns the claims of a token signed with this secret and not expired at now.
func (s *Signer) Verify(token string, now time.Time) (Claims, error) {
	if !strings.HasPrefix(token, Prefix) {
		return Claims{}, ErrMalformed
	}
	i := strings.LastIndexByte(token, '.')
	if i <= len(Prefix) {
		return Claims{}, ErrMalformed
	}
	body, sigText := token[:i], token[i+1:]
	sig, err := base64.RawURLEncoding.DecodeString(sigText)
	if err != nil {
		return Claims{}, ErrMalformed
	}
	// Signature first: nothing of an unsigned payload is parsed.
	if !hmac.Equal(sig, s.sign(body)) {
		return Claims{}, ErrSignature
	}
	payload, err := base64.RawURLEncoding.DecodeString(body[len(Prefix):])
	if err != nil {
		return Claims{}, ErrMalformed
	}
	var c Claims
	if err := json.Unmarshal(payload, &c); err != nil || c.Namespace == "" || c.Name == "" {
		return Claims{}, ErrMalformed
	}
	if c.UID == "" {
		return Claims{}, ErrUnbound
	}
	if !now.Before(time.Unix(c.Expires, 0)) {
		return Claims{}, ErrExpired
	}
	return c, nil
}

func (s *Signer) sign(body string) []byte {
	m := hmac.New(sha256.New, s.secret)
	m.Write([]byte(body))
	return m.Sum(nil)
}

// IsScoped reports whether token has the scoped form (it may still be invalid).
func IsScoped(token string) bool { return strings.HasPrefix(token, Prefix) }

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
