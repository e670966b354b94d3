package main

import (
	"fmt"

	"github.com/getkin/kin-openapi/openapi3"
)

// handWritten are the schemas package bodo declares itself instead of
// generating them: a problem answer becomes an *Error (errors.go), and a
// rate-limit policy has time.Duration fields with seconds on the wire
// (ratelimitpolicy.go).
var handWritten = []string{"Problem", "RateLimitPolicy"}

// goProperty is what the Go models change of one property of a schema.
type goProperty struct {
	schema, property string
	name             string // the Go field name, when oapi-codegen's is no Go name
	typ              string // the Go type, when the schema's reads worse in Go
	doc              string // the field's doc comment, when Go needs more than the description
	// enumNames name an enum's constants (after the type's name), in
	// the order of its values, where oapi-codegen's are no Go names.
	enumNames []string
}

var goProperties = []goProperty{
	{schema: "BatchRequestItem", property: "method", enumNames: []string{"Get", "Post", "Patch", "Delete"}},
	{schema: "ExportCreate", property: "format", enumNames: []string{"JSONL", "CSV"}},
	{schema: "RateLimitStatus", property: "rejectionsLast60s", name: "RejectionsLast60s"},
	{schema: "Event", property: "data", typ: "json.RawMessage",
		doc: "The resource the event is about, as it was then, as JSON: decode it with json.Unmarshal " +
			"into the type its Type names, a Contact for contact.created and contact.updated (contact.deleted " +
			"carries only the id), an Invoice for invoice.created, invoice.paid and invoice.refunded, an Operation " +
			"for export.succeeded and export.failed."},
}

// goSchemas adapts the schemas of doc to package bodo before oapi-codegen
// sees them: it drops the hand-written ones and sets the Go names, types
// docs and enum constants of goProperties through oapi-codegen's
// extensions.
func goSchemas(doc *openapi3.T) error {
	for _, name := range handWritten {
		if doc.Components.Schemas[name] == nil {
			return fmt.Errorf("the hand-written schema %s is not in openapi.json", name)
		}
		delete(doc.Components.Schemas, name)
	}
	for _, p := range goProperties {
		s := doc.Components.Schemas[p.schema]
		if s == nil || s.Value.Properties[p.property] == nil {
			return fmt.Errorf("%s.%s is not in openapi.json", p.schema, p.property)
		}
		prop := s.Value.Properties[p.property]
		v := *prop.Value // a copy: other schemas may share the value
		v.Extensions = map[string]any{}
		for k, e := range prop.Value.Extensions {
			v.Extensions[k] = e
		}
		if p.name != "" {
			v.Extensions["x-go-name"] = p.name
			v.Extensions["x-oapi-codegen-only-honour-go-name"] = true // as written, not camel-cased again
		}
		if p.typ != "" {
			v.Extensions["x-go-type"] = p.typ
		}
		if p.enumNames != nil {
			if len(p.enumNames) != len(v.Enum) {
				return fmt.Errorf("%s.%s: %d enum names for %d values", p.schema, p.property, len(p.enumNames), len(v.Enum))
			}
			names := make([]any, len(p.enumNames)) // the shape oapi-codegen reads
			for i, n := range p.enumNames {
				names[i] = n
			}
			v.Extensions["x-enum-varnames"] = names
		}
		if p.doc != "" {
			v.Description = p.doc
		}
		s.Value.Properties[p.property] = openapi3.NewSchemaRef("", &v)
	}
	return nil
}
