// Command apidocs writes the API reference (Markdown) from the generated CRDs,
// so the reference always says what the API server enforces: every field with
// its type, default, bounds and description, and every CEL rule's message.
//
// Usage: go run ./hack/apidocs config/crd/bases > docs/api-reference.md
package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// coreTypes are fields whose schema is a Kubernetes core/v1 type: the
// reference links to the Kubernetes docs instead of repeating hundreds of
// fields.
var coreTypes = map[string]string{
	"spec.workload.env":          "[]core/v1.EnvVar",
	"spec.workload.envFrom":      "[]core/v1.EnvFromSource",
	"spec.workload.resources":    "core/v1.ResourceRequirements",
	"spec.workload.tolerations":  "[]core/v1.Toleration",
	"spec.workload.volumes":      "[]core/v1.Volume",
	"spec.workload.volumeMounts": "[]core/v1.VolumeMount",
	"status.conditions":          "[]meta/v1.Condition",
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: apidocs CRD_DIR")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "apidocs: %v\n", err)
		os.Exit(1)
	}
}

func run(dir string, w io.Writer) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return err
	}
	sort.Strings(files)
	fmt.Fprint(w, "# API reference\n\n"+
		"Generated from the CRDs by `make docs`; do not edit. Group `mcp-operator.dev`, version `v1alpha1`.\n"+
		"A field's validation lists what the API server enforces when the object is applied.\n")
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(data, &crd); err != nil {
			return fmt.Errorf("while reading %s: %w", f, err)
		}
		writeKind(w, &crd)
	}
	return nil
}

func writeKind(w io.Writer, crd *apiextensionsv1.CustomResourceDefinition) {
	for _, v := range crd.Spec.Versions {
		schema := v.Schema.OpenAPIV3Schema
		fmt.Fprintf(w, "\n## %s\n\n", crd.Spec.Names.Kind)
		fmt.Fprintf(w, "%s\n\n", oneLine(schema.Description))
		fmt.Fprintf(w, "- API version: `%s/%s`, scope: %s\n", crd.Spec.Group, v.Name, crd.Spec.Scope)
		if len(crd.Spec.Names.ShortNames) > 0 {
			fmt.Fprintf(w, "- short names: `%s`\n", strings.Join(crd.Spec.Names.ShortNames, "`, `"))
		}
		writeRules(w, "", schema)
		for _, part := range []string{"spec", "status"} {
			prop, ok := schema.Properties[part]
			if !ok {
				continue
			}
			fmt.Fprintf(w, "\n### %s.%s\n\n", crd.Spec.Names.Kind, part)
			writeRules(w, part, &prop)
			fmt.Fprint(w, "\n| field | type | description |\n|---|---|---|\n")
			writeFields(w, part, &prop)
		}
	}
}

// writeRules lists the CEL rules of an object with the message a user gets.
func writeRules(w io.Writer, path string, s *apiextensionsv1.JSONSchemaProps) {
	for _, r := range s.XValidations {
		where := ""
		if path != "" {
			where = " on `" + path + "`"
		}
		fmt.Fprintf(w, "- rule%s: `%s` — rejected with \"%s\"\n", where, r.Rule, r.Message)
	}
}

func writeFields(w io.Writer, path string, s *apiextensionsv1.JSONSchemaProps) {
	names := make([]string, 0, len(s.Properties))
	for name := range s.Properties {
		names = append(names, name)
	}
	sort.Strings(names)
	required := map[string]bool{}
	for _, r := range s.Required {
		required[r] = true
	}
	for _, name := range names {
		prop := s.Properties[name]
		p := path + "." + name
		typ := typeOf(&prop)
		if core, ok := coreTypes[p]; ok {
			typ = core
		}
		desc := oneLine(prop.Description)
		if notes := constraints(&prop, required[name]); notes != "" {
			desc += "<br>" + notes
		}
		fmt.Fprintf(w, "| `%s` | %s | %s |\n", p, typ, desc)
		if _, ok := coreTypes[p]; ok {
			continue
		}
		child := &prop
		if prop.Type == "array" && prop.Items != nil && prop.Items.Schema != nil {
			child = prop.Items.Schema
			p += "[]"
		}
		if len(child.XValidations) > 0 && child != &prop {
			writeRulesInline(w, p, child)
		}
		if child.Type == "object" && len(child.Properties) > 0 {
			writeFields(w, p, child)
		}
	}
}

// writeRulesInline renders the CEL rules of a list item as table rows.
func writeRulesInline(w io.Writer, path string, s *apiextensionsv1.JSONSchemaProps) {
	for _, r := range s.XValidations {
		fmt.Fprintf(w, "| `%s` | rule | `%s` — rejected with \"%s\" |\n", path, escape(r.Rule), escape(r.Message))
	}
}

func typeOf(s *apiextensionsv1.JSONSchemaProps) string {
	switch {
	case s.Type == "array" && s.Items != nil && s.Items.Schema != nil:
		return "[]" + typeOf(s.Items.Schema)
	case s.Type == "object" && s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil:
		return "map[string]" + typeOf(s.AdditionalProperties.Schema)
	case s.XIntOrString:
		return "int or string"
	case s.Type == "":
		return "any"
	}
	return s.Type
}

// constraints renders what the API server checks of one field.
func constraints(s *apiextensionsv1.JSONSchemaProps, required bool) string {
	var out []string
	if required {
		out = append(out, "**required**")
	}
	if s.Default != nil {
		out = append(out, fmt.Sprintf("default: `%s`", string(s.Default.Raw)))
	}
	if len(s.Enum) > 0 {
		vals := make([]string, len(s.Enum))
		for i, e := range s.Enum {
			vals[i] = strings.Trim(string(e.Raw), `"`)
		}
		out = append(out, "one of: `"+strings.Join(vals, "`, `")+"`")
	}
	if s.Minimum != nil {
		out = append(out, fmt.Sprintf("minimum: %v", *s.Minimum))
	}
	if s.Maximum != nil {
		out = append(out, fmt.Sprintf("maximum: %v", *s.Maximum))
	}
	if s.MinLength != nil {
		out = append(out, fmt.Sprintf("min length: %d", *s.MinLength))
	}
	if s.MaxLength != nil {
		out = append(out, fmt.Sprintf("max length: %d", *s.MaxLength))
	}
	if s.MinItems != nil {
		out = append(out, fmt.Sprintf("min items: %d", *s.MinItems))
	}
	if s.MaxItems != nil {
		out = append(out, fmt.Sprintf("max items: %d", *s.MaxItems))
	}
	if s.MaxProperties != nil {
		out = append(out, fmt.Sprintf("max entries: %d", *s.MaxProperties))
	}
	if s.Pattern != "" {
		out = append(out, "pattern: `"+escape(s.Pattern)+"`")
	}
	if s.Items != nil && s.Items.Schema != nil && len(s.Items.Schema.Enum) > 0 {
		out = append(out, "items "+constraints(s.Items.Schema, false))
	}
	for _, r := range s.XValidations {
		out = append(out, "rule: `"+escape(r.Rule)+"` — rejected with \""+escape(r.Message)+"\"")
	}
	return strings.Join(out, "; ")
}

func oneLine(s string) string {
	return escape(strings.Join(strings.Fields(s), " "))
}

// escape keeps table cells in one cell.
func escape(s string) string {
	return strings.ReplaceAll(s, "|", `\|`)
}
