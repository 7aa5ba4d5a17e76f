package policy

import (
	"strings"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
)

// Kubernetes' names for ServiceAccount identities.
const (
	serviceAccountUserPrefix  = "system:serviceaccount:"
	serviceAccountsGroup      = "system:serviceaccounts"
	serviceAccountGroupPrefix = "system:serviceaccounts:"
)

// Subject is the caller a decision is made for: a ServiceAccount or a user,
// with the groups the API server reported for it.
type Subject struct {
	// Kind is ServiceAccount or User (a caller is never a Group).
	Kind v1alpha1.SubjectKind
	// Name of the ServiceAccount or the user name.
	Name string
	// Namespace of a ServiceAccount.
	Namespace string
	// Groups the caller belongs to. A ServiceAccount is always in
	// system:serviceaccounts and system:serviceaccounts:<namespace>, listed
	// here or not.
	Groups []string
}

// ServiceAccount is the subject of the ServiceAccount namespace/name.
func ServiceAccount(namespace, name string, groups ...string) Subject {
	return Subject{Kind: v1alpha1.SubjectServiceAccount, Namespace: namespace, Name: name, Groups: groups}
}

// User is the subject of a user name that is not a ServiceAccount's.
func User(name string, groups ...string) Subject {
	return Subject{Kind: v1alpha1.SubjectUser, Name: name, Groups: groups}
}

// SubjectFromUserInfo turns what a TokenReview reports (user name and groups)
// into a Subject: system:serviceaccount:<namespace>:<name> is a ServiceAccount,
// anything else a User.
func SubjectFromUserInfo(username string, groups []string) Subject {
	if ns, name, ok := parseServiceAccountUser(username); ok {
		return ServiceAccount(ns, name, groups...)
	}
	return User(username, groups...)
}

// Username is the name the API server gives the subject.
func (s Subject) Username() string {
	if s.Kind == v1alpha1.SubjectServiceAccount {
		return serviceAccountUserPrefix + s.Namespace + ":" + s.Name
	}
	return s.Name
}

func parseServiceAccountUser(username string) (namespace, name string, ok bool) {
	rest, found := strings.CutPrefix(username, serviceAccountUserPrefix)
	if !found {
		return "", "", false
	}
	namespace, name, found = strings.Cut(rest, ":")
	if !found || namespace == "" || name == "" || strings.Contains(name, ":") {
		return "", "", false
	}
	return namespace, name, true
}

// subjectKeyKind says what a subjectKey names.
type subjectKeyKind uint8

const (
	keyUser subjectKeyKind = iota + 1
	keyServiceAccount
	keyGroup
	// keyServiceAccountsOf is the group system:serviceaccounts:<namespace>,
	// kept apart so a caller's namespace needs no string building.
	keyServiceAccountsOf
)

// subjectKey is how policies are indexed by subject and how a caller is
// looked up, without building strings per decision.
type subjectKey struct {
	kind subjectKeyKind
	// namespace of a ServiceAccount or of system:serviceaccounts:<namespace>.
	namespace string
	// name of a user, ServiceAccount or group.
	name string
}

// keyOfPolicySubject normalizes a policy's subject: a User subject that names
// a ServiceAccount's user name is that ServiceAccount, a Group subject
// system:serviceaccounts:<ns> is the namespace's ServiceAccounts.
func keyOfPolicySubject(s v1alpha1.Subject) subjectKey {
	switch s.Kind {
	case v1alpha1.SubjectServiceAccount:
		return subjectKey{kind: keyServiceAccount, namespace: s.Namespace, name: s.Name}
	case v1alpha1.SubjectGroup:
		return groupKey(s.Name)
	default:
		if ns, name, ok := parseServiceAccountUser(s.Name); ok {
			return subjectKey{kind: keyServiceAccount, namespace: ns, name: name}
		}
		return subjectKey{kind: keyUser, name: s.Name}
	}
}

func groupKey(group string) subjectKey {
	if ns, ok := strings.CutPrefix(group, serviceAccountGroupPrefix); ok && ns != "" {
		return subjectKey{kind: keyServiceAccountsOf, namespace: ns}
	}
	return subjectKey{kind: keyGroup, name: group}
}

// appendKeys appends every key the caller is known by to keys. Keys may
// repeat.
func (s Subject) appendKeys(keys []subjectKey) []subjectKey {
	kind, ns, name := s.Kind, s.Namespace, s.Name
	if kind != v1alpha1.SubjectServiceAccount {
		if n, nm, ok := parseServiceAccountUser(s.Name); ok {
			kind, ns, name = v1alpha1.SubjectServiceAccount, n, nm
		}
	}
	if kind == v1alpha1.SubjectServiceAccount {
		keys = append(keys,
			subjectKey{kind: keyServiceAccount, namespace: ns, name: name},
			subjectKey{kind: keyGroup, name: serviceAccountsGroup},
			subjectKey{kind: keyServiceAccountsOf, namespace: ns})
	} else {
		keys = append(keys, subjectKey{kind: keyUser, name: name})
	}
	for _, g := range s.Groups {
		k := groupKey(g)
		if kind == v1alpha1.SubjectServiceAccount && (k == keys[1] || k == keys[2]) {
			continue // the implicit groups, listed by the API server too
		}
		keys = append(keys, k)
	}
	return keys
}

// celValue is the subject as `when` conditions see it.
func (s Subject) celValue() map[string]any {
	groups := make([]string, 0, len(s.Groups)+2)
	groups = append(groups, s.Groups...)
	if s.Kind == v1alpha1.SubjectServiceAccount {
		groups = appendMissing(groups, serviceAccountsGroup)
		groups = appendMissing(groups, serviceAccountGroupPrefix+s.Namespace)
	}
	return map[string]any{
		"kind":      string(s.Kind),
		"name":      s.Name,
		"namespace": s.Namespace,
		"username":  s.Username(),
		"groups":    groups,
	}
}

func appendMissing(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}
