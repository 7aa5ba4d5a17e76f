package devidp

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
)

// Claims reads a JWT's claims without checking its signature: for tests that
// look at what a token issued here says (its subject, its audience, who acted)
// after a party that checks signatures has accepted it.
func Claims(token string) (map[string]any, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, errors.New("not a JWT: want three dot-separated parts")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil, err
	}
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil {
		return nil, err
	}
	return claims, nil
}

// Audience is a token's `aud` claim as a list (a JWT may give one as a string).
func Audience(claims map[string]any) []string {
	switch aud := claims["aud"].(type) {
	case string:
		return []string{aud}
	case []any:
		var out []string
		for _, a := range aud {
			if s, ok := a.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}
