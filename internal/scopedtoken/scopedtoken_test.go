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
	want := Claims{Namespace: "team-a", Name: "sb", Expires: now.Add(time.Hour).Unix()}
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

func TestVerifyRefuses(t *testing.T) {
	s, _ := NewSigner(secret)
	other, _ := NewSigner([]byte(strings.Repeat("x", MinSecretLen)))
	now := time.Unix(1_000_000, 0)
	good, _ := s.Mint(Claims{Namespace: "ns", Name: "sb", Expires: now.Add(time.Minute).Unix()})
	forged, _ := other.Mint(Claims{Namespace: "ns", Name: "sb", Expires: now.Add(time.Minute).Unix()})
	wider, _ := s.Mint(Claims{Namespace: "ns", Name: "everything", Expires: now.Add(time.Hour).Unix()})
	expired, _ := s.Mint(Claims{Namespace: "ns", Name: "sb", Expires: now.Unix()})
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
	}
	for _, c := range cases {
		if _, err := s.Verify(c.token, now); !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
		}
	}
}

func TestSignedButMeaninglessPayloadsAreMalformed(t *testing.T) {
	s, _ := NewSigner(secret)
	for _, payload := range []string{"bm90IGpzb24", "e30"} { // "not json", "{}"
		body := Prefix + payload
		tok := body + "." + b64(s.sign(body))
		if _, err := s.Verify(tok, time.Unix(0, 0)); !errors.Is(err, ErrMalformed) {
			t.Errorf("payload %q: err = %v, want ErrMalformed", payload, err)
		}
	}
}

func TestSignerRules(t *testing.T) {
	if _, err := NewSigner([]byte("short")); err == nil {
		t.Error("a 5-byte secret was accepted")
	}
	s, _ := NewSigner(secret)
	if _, err := s.Mint(Claims{Namespace: "ns", Name: "sb"}); err == nil {
		t.Error("a token without expiry was minted")
	}
}
