// Package baseline is internal/redact as it was before its bare-token and
// gitleaks rules, so that
// bench/redact measures the new redactor against it in the same run. Its
// code is not kept here: `make bench-redact` takes it from the git history
// (the commit is REDACT_BASELINE in the Makefile) into this directory before
// each run, and git ignores it.
package baseline
