package main

import (
	"strings"
	"testing"
)

func TestParseRefusesIncompleteFlags(t *testing.T) {
	for args, want := range map[string]string{
		"":                                  "--issuer is required",
		"--issuer https://idp.example.test": "needs --tls-cert-file",
		"--issuer http://10.96.0.80 --tls-cert-file c --tls-key-file k": "an http one neither",
		"--issuer http://10.96.0.80 --tls-cert-file c":                  "go together",
		"--issuer http://127.0.0.1:1 extra":                             "unexpected arguments",
	} {
		_, err := parse(strings.Fields(args))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", args, err, want)
		}
	}
	f, err := parse([]string{"--issuer", "http://10.96.0.80", "--insecure-http", "--console-redirect-uris", "http://10.96.0.81/callback", "--bridge-resources", "http://10.96.0.81"})
	if err != nil || !f.allowInsecure || f.consoleRedirects != "http://10.96.0.81/callback" || f.bridgeResources != "http://10.96.0.81" {
		t.Errorf("%+v %v", f, err)
	}
}
