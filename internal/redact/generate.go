package redact

//go:generate go run ../../hack/gitleaksgen -out .
