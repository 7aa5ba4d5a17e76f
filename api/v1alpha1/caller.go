package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
)

// CallerLabelValue is the value of CallerLabel on a caller's own Secret:
// the first 40 hex digits (160 bits) of the SHA-256 of the caller's user
// name. A user name may hold what a label value cannot (":", "@", more
// than 63 characters); its digest always fits, and the annotation
// CallerNameAnnotation holds the name itself, which the bridge checks.
func CallerLabelValue(username string) string {
	sum := sha256.Sum256([]byte(username))
	return hex.EncodeToString(sum[:20])
}
