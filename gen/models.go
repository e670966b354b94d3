package main

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"
)

// generateModels has oapi-codegen write the schemas of openapi.json as the
// documented types of package bodo (fields and enum values carry the spec's
// descriptions), then turns every optional or nullable field into an Opt, the
// package's one idiom for values that may be absent or null.
//
// Only the schemas are generated here: parameters are the services' own
// structs (see paramsData), and requests are built by the services, so
// package bodo exports no raw client.
func generateModels(raw []byte) (string, error) {
	doc, err := openapi3.NewLoader().LoadFromData(raw)
	if err != nil {
		return "", err
	}
	doc.Paths = openapi3.NewPaths()
	doc.Components.Parameters = nil
	doc.Components.Responses = nil
	doc.Components.RequestBodies = nil
	doc.Components.Headers = nil
	if err := goSchemas(doc); err != nil {
		return "", err
	}
	src, err := codegen.Generate(doc, codegen.Configuration{
		PackageName: "bodo",
		Generate:    codegen.GenerateOptions{Models: true},
		Compatibility: codegen.CompatibilityOptions{
			AlwaysPrefixEnumValues: true,
			// Lets x-oapi-codegen-only-honour-go-name keep a Go name as
			// goSchemas wrote it.
			AllowUnexportedStructFieldNames: true,
		},
		OutputOptions: codegen.OutputOptions{
			SkipPrune:      true,
			NameNormalizer: string(codegen.NameNormalizerFunctionToCamelCaseWithInitialisms),
			// A missing list and an empty one mean the same to this API.
			PreferSkipOptionalPointerOnContainerTypes: true,
		},
	})
	if err != nil {
		return "", err
	}
	src, err = optFields(src)
	if err != nil {
		return "", err
	}
	return goDoc(src), nil
}

var (
	// A struct field oapi-codegen makes a pointer (optional) or a
	// nullable.Nullable (nullable): name, type, JSON tag.
	pointerField  = regexp.MustCompile("(?m)^(\t\\w+\\s+)\\*(\\S+)(\\s+`json:\"[^\"]+\"`)")
	nullableField = regexp.MustCompile("(?m)^(\t\\w+\\s+)\\*?nullable\\.Nullable\\[(.+)\\](\\s+`json:\"[^\"]+\"`)")
	omitempty     = regexp.MustCompile(`json:"(\w+),omitempty"`)
)

// optFields rewrites pointer and nullable.Nullable fields as Opt fields and
// their omitempty as omitzero, which leaves an absent Opt out of the JSON.
func optFields(src string) (string, error) {
	src = nullableField.ReplaceAllString(src, "${1}Opt[${2}]${3}")
	src = pointerField.ReplaceAllString(src, "${1}Opt[${2}]${3}")
	src = omitempty.ReplaceAllString(src, `json:"${1},omitzero"`)
	src = strings.Replace(src, "\t\"github.com/oapi-codegen/nullable\"\n", "", 1)
	if strings.Contains(src, "nullable.") {
		return "", fmt.Errorf("a nullable field of a shape gen does not rewrite is left in the models: %q", src[strings.Index(src, "nullable."):][:80])
	}
	if m := regexp.MustCompile(`(?m)^\t\w+\s+\*\S+\s+` + "`json").FindString(src); m != "" {
		return "", fmt.Errorf("a pointer field is left in the models: %q", m)
	}
	// oapi-codegen's own header names the build (it differs between
	// commits); the file keeps the one every output of gen has.
	return header + src[strings.Index(src, "package bodo"):], nil
}

// queryParam is one field of an operation's parameter struct.
type queryParam struct {
	Name, Field, Doc string
	Type             string // the Go type inside Opt
	Format           string // Go expression turning v (of Type) into the query's string
}

// describeQuery maps a query parameter to its field: integers are int,
// strings string, and a $ref to an enum schema that schema's type.
func describeQuery(p *openapi3.Parameter) (queryParam, error) {
	q := queryParam{
		Name:  p.Name,
		Field: codegen.ToCamelCaseWithInitialisms(p.Name),
		Doc:   p.Description,
	}
	s := p.Schema
	switch {
	case s == nil:
		return q, fmt.Errorf("no schema")
	case s.Ref != "" && s.Value.Type.Is("string"):
		q.Type, q.Format = refName(s.Ref), "string(v)"
	case s.Value.Type.Is("string"):
		q.Type, q.Format = "string", "v"
	case s.Value.Type.Is("integer"):
		q.Type, q.Format = "int", "strconv.Itoa(v)"
	default:
		return q, fmt.Errorf("a query parameter of type %v is not supported by the service generator", s.Value.Type)
	}
	return q, nil
}
