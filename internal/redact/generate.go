package redact

//go:generate go run ../../hack/gitleaksgen -out .
//go:generate go run ../../hack/tokencorpus -out testdata/bare-tokens.json
