package scopedtoken

import (
	"errors"
	"strings"
	"testing"
	"time"
)

var secret = []byte(strings.Repeat("k", MinSecretLen))

func TestMintThenVerify(t *testing.T) {
	s, err := NewSigner(secret)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_000_000, 0)
	want := Claims{Namespace: "team-a", Name: "sb", UID: "uid-1", IssuedAt: now.Unix(), Expires: now.Add(time.Hour).Unix()}
	tok, err := s.Mint(want)
	if err != nil {
		t.Fatal(err)
	}
	if !IsScoped(tok) {
		t.Fatalf("token %q lacks the %q prefix", tok, Prefix)
	}
	got, err := s.Verify(tok, now)
	if err != nil || got != want {
		t.Fatalf("Verify = %+v, %v; want %+v", got, err, want)
	}
}

// signed returns a token over an arbitrary payload, as a holder of the secret could have minted
// before the claims gained a field.
func signed(s *Signer, payload string) string {
	body := Prefix + b64([]byte(payload))
	return body + "." + b64(s.sign(body))
}

func TestVerifyRefuses(t *testing.T) {
	s, _ := NewSigner(secret)
	other, _ := NewSigner([]byte(strings.Repeat("x", MinSecretLen)))
	now := time.Unix(1_000_000, 0)
	claims := func(name string, exp time.Time) Claims {
		return Claims{Namespace: "ns", Name: name, UID: "uid-1", Expires: exp.Unix()}
	}
	good, _ := s.Mint(claims("sb", now.Add(time.Minute)))
	forged, _ := other.Mint(claims("sb", now.Add(time.Minute)))
	wider, _ := s.Mint(claims("everything", now.Add(time.Hour)))
	expired, _ := s.Mint(claims("sb", now))
	body, sig, _ := strings.Cut(strings.TrimPrefix(good, Prefix), ".")
	widerBody, _, _ := strings.Cut(strings.TrimPrefix(wider, Prefix), ".")
	cases := []struct {
		name  string
		token string
		want  error
	}{
		{"signed with another secret", forged, ErrSignature},
		{"expired at its expiry second", expired, ErrExpired},
		{"another payload under a valid signature", Prefix + widerBody + "." + sig, ErrSignature},
		{"a truncated signature", good[:len(good)-4], ErrSignature},
		{"no signature", Prefix + body, ErrMalformed},
		{"no prefix", strings.TrimPrefix(good, Prefix), ErrMalformed},
		{"signature not base64", Prefix + body + ".!!", ErrMalformed},
		{"empty", "", ErrMalformed},
		{"minted before UIDs were bound", signed(s, `{"ns":"ns","name":"sb","exp":2000000}`), ErrUnbound},
		{"an empty UID", signed(s, `{"ns":"ns","name":"sb","uid":"","exp":2000000}`), ErrUnbound},
	}
	for _, c := range cases {
		if _, err := s.Verify(c.token, now); !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
		}
	}
}

func TestSignedButMeaninglessPayloadsAreMalformed(t *testing.T) {
	s, _ := NewSigner(secret)
	for _, payload := range []string{"not json", "{}", `{"uid":"u","exp":2000000}`} {
		if _, err := s.Verify(signed(s, payload), time.Unix(0, 0)); !errors.Is(err, ErrMalformed) {
			t.Errorf("payload %q: err = %v, want ErrMalformed", payload, err)
		}
	}
}

func TestMintRefusesIncompleteClaims(t *testing.T) {
	s, _ := NewSigner(secret)
	full := Claims{Namespace: "ns", Name: "sb", UID: "uid-1", IssuedAt: 100, Expires: 200}
	cases := []struct {
		name   string
		modify func(*Claims)
	}{
		{"no namespace", func(c *Claims) { c.Namespace = "" }},
		{"no name", func(c *Claims) { c.Name = "" }},
		{"no UID", func(c *Claims) { c.UID = "" }},
		{"no expiry", func(c *Claims) { c.Expires = 0 }},
		{"issued at its expiry", func(c *Claims) { c.IssuedAt = c.Expires }},
	}
	for _, tc := range cases {
		c := full
		tc.modify(&c)
		if tok, err := s.Mint(c); err == nil {
			t.Errorf("%s: minted %q, want an error", tc.name, tok)
		}
	}
	if _, err := s.Mint(full); err != nil {
		t.Errorf("complete claims: %v, want a token", err)
	}
}

func TestNewSignerRefusesAShortSecret(t *testing.T) {
	if _, err := NewSigner([]byte("short")); err == nil {
		t.Error("a 5-byte secret was accepted, want at least MinSecretLen bytes")
	}
}
