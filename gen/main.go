// Command gen turns openapi.json into the Go of package bodo: it has
// oapi-codegen write the models (models_gen.go) and generates what
// oapi-codegen does not: the operation table of package ops (costs, classes, idempotency), a copy of
// the description for the sandbox to serve, and the typed service methods and
// model aliases of package bodo. It runs through go generate in the module
// root, so an operation added to openapi.json becomes a typed method by
// regenerating. Package oapi beside it is oapi-codegen's own low-level
// client, generated with config.yaml and overlay.yaml, for the benchmarks.
//
// Usage (from the module root, as go generate ./... runs it): go run ./gen
package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"go/format"
	"log"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"unicode"

	"github.com/getkin/kin-openapi/openapi3"
)

const (
	specFile     = "openapi.json"
	opsFile      = "internal/ops/ops_gen.go"
	specCopy     = "internal/ops/openapi.json"
	servicesFile = "services_gen.go"
	modelsFile   = "models_gen.go"
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("gen: ")
	raw, err := os.ReadFile(specFile)
	if err != nil {
		log.Fatal(err)
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(raw)
	if err != nil {
		log.Fatalf("%s: %v", specFile, err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		log.Fatalf("%s: %v", specFile, err)
	}
	operations, err := collect(doc)
	if err != nil {
		log.Fatal(err)
	}
	reservePathSegments(operations)
	models, err := generateModels(raw)
	if err != nil {
		log.Fatalf("%s: %v", modelsFile, err)
	}
	writeSource(modelsFile, []byte(models))
	write(opsFile, opsTemplate, operations)
	write(servicesFile, servicesTemplate, servicesData(operations))
	if err := os.WriteFile(specCopy, raw, 0o644); err != nil {
		log.Fatal(err)
	}
}

// operation is what the templates need of one operation.
type operation struct {
	ID, GoName, Method, Path, Summary string
	Description                       string
	Cost                              int
	SumOfParts                        bool // x-bodo-cost is {"sum": "parts"}
	Class                             string
	Idempotent, KeyRequired           bool
	ParamCosts                        map[string]int
	Egress                            string
	Conditional                       bool // a GET that answers an ETag and takes If-None-Match

	Service, MethodName string       // from x-bodo-sdk-method: "Contacts.List" or "Me"
	PathParams          []string     // Go names of the path parameters, in order
	PathChecks          []pathCheck  // what each path parameter must not be, in order
	QueryParams         bool         // the caller passes *<GoName>Params
	Query               []queryParam // the fields of <GoName>Params
	HeaderParams        bool         // gen wants a params struct the layer fills
	Body                string       // request body model, "" for none
	Result              string       // response model, "" for no content
	PageParam           string       // Go field of the cursor parameter when the result pages
	PageItem            string       // model of one page item
}

// pathCheck is one path parameter and the literal segments that, given as
// its value, would make the path another operation's.
type pathCheck struct {
	Name     string
	Reserved []string
}

// reservePathSegments fills the PathChecks of every operation: a parameter
// may not be a literal segment that another operation (of any method) has
// where this one has the parameter, the rest of the path matching, such as
// "count" for the id of /v1/contacts/{id} next to /v1/contacts/count.
func reservePathSegments(ops []operation) {
	for i := range ops {
		o := &ops[i]
		segs := strings.Split(strings.Trim(o.Path, "/"), "/")
		param := 0
		for k, seg := range segs {
			if !isParam(seg) {
				continue
			}
			check := pathCheck{Name: o.PathParams[param]}
			param++
			for _, other := range ops {
				if lit, ok := literalAt(segs, strings.Split(strings.Trim(other.Path, "/"), "/"), k); ok && !slices.Contains(check.Reserved, lit) {
					check.Reserved = append(check.Reserved, lit)
				}
			}
			slices.Sort(check.Reserved)
			o.PathChecks = append(o.PathChecks, check)
		}
	}
}

// literalAt returns the literal segment other has at position k, where segs
// has a parameter, when other matches segs everywhere else.
func literalAt(segs, other []string, k int) (string, bool) {
	if len(other) != len(segs) || isParam(other[k]) {
		return "", false
	}
	for j := range segs {
		if j != k && segs[j] != other[j] && !isParam(segs[j]) && !isParam(other[j]) {
			return "", false
		}
	}
	return other[k], true
}

func isParam(seg string) bool { return strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") }

func collect(doc *openapi3.T) ([]operation, error) {
	var out []operation
	for _, path := range doc.Paths.InMatchingOrder() {
		item := doc.Paths.Value(path)
		for method, op := range item.Operations() {
			o, err := describe(path, method, op)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", method, path, err)
			}
			out = append(out, o)
		}
	}
	slices.SortFunc(out, func(a, b operation) int {
		return cmp.Or(cmp.Compare(a.Path, b.Path), cmp.Compare(methodOrder(a.Method), methodOrder(b.Method)))
	})
	return out, nil
}

func methodOrder(m string) int {
	return slices.Index([]string{"GET", "POST", "PUT", "PATCH", "DELETE"}, m)
}

func describe(path, method string, op *openapi3.Operation) (operation, error) {
	o := operation{
		ID:          op.OperationID,
		GoName:      upperFirst(op.OperationID),
		Method:      method,
		Path:        path,
		Summary:     op.Summary,
		Description: op.Description,
		ParamCosts:  map[string]int{},
		Idempotent:  method == "GET" || method == "HEAD" || method == "PUT" || method == "DELETE",
	}
	if o.ID == "" {
		return o, fmt.Errorf("no operationId")
	}
	var err error
	if o.Cost, o.SumOfParts, err = costExtension(op.Extensions); err != nil {
		return o, err
	}
	class, ok := op.Extensions["x-bodo-class"].(string)
	if !ok {
		return o, fmt.Errorf("x-bodo-class missing or not a string")
	}
	o.Class = class
	if o.SumOfParts != (class == "batch") {
		return o, fmt.Errorf(`x-bodo-cost {"sum": "parts"} is the cost of a batch and only of a batch (x-bodo-class %q)`, class)
	}
	if eg, has := op.Extensions["x-bodo-egress"]; has {
		s, ok := eg.(string)
		if !ok || s != "page" && s != "one" && s != "none" {
			return o, fmt.Errorf("x-bodo-egress must be page, one or none, not %v", eg)
		}
		o.Egress = s
	} else if class == "read" {
		return o, fmt.Errorf("a read needs x-bodo-egress")
	}
	sdk, ok := op.Extensions["x-bodo-sdk-method"].(string)
	if !ok {
		return o, fmt.Errorf("x-bodo-sdk-method missing or not a string")
	}
	if svc, m, found := strings.Cut(sdk, "."); found {
		o.Service, o.MethodName = svc, m
	} else {
		o.MethodName = sdk
	}
	for _, ref := range op.Parameters {
		p := ref.Value
		switch p.In {
		case "path":
			o.PathParams = append(o.PathParams, lowerFirst(goIdent(p.Name)))
		case "query":
			o.QueryParams = true
			q, err := describeQuery(p)
			if err != nil {
				return o, fmt.Errorf("parameter %s: %w", p.Name, err)
			}
			o.Query = append(o.Query, q)
			if p.Name == "cursor" || p.Name == "after" {
				o.PageParam = q.Field
			}
			if _, has := p.Extensions["x-bodo-cost"]; has {
				extra, err := intExtension(p.Extensions, "x-bodo-cost")
				if err != nil {
					return o, fmt.Errorf("parameter %s: %w", p.Name, err)
				}
				o.ParamCosts[p.Name] = extra
			}
		case "header":
			if p.Name == "Bodo-Version" {
				continue // the client's own header, set on every request (client.go)
			}
			o.HeaderParams = true
			if p.Name == "If-None-Match" && method == "GET" {
				o.Conditional = true
			}
			if p.Name == "Idempotency-Key" && p.Required {
				o.KeyRequired = true
			}
		}
	}
	if o.QueryParams && o.HeaderParams {
		return o, fmt.Errorf("query and header parameters on one operation are not supported by the service generator")
	}
	if rb := op.RequestBody; rb != nil {
		mt := rb.Value.Content.Get("application/json")
		if mt == nil || mt.Schema == nil || mt.Schema.Ref == "" {
			return o, fmt.Errorf("request body must be application/json with a $ref schema")
		}
		o.Body = refName(mt.Schema.Ref)
	}
	for _, code := range []string{"200", "201", "202"} {
		resp := op.Responses.Value(code)
		if resp == nil {
			continue
		}
		mt := resp.Value.Content.Get("application/json")
		if mt == nil || mt.Schema == nil || mt.Schema.Ref == "" {
			return o, fmt.Errorf("response %s must be application/json with a $ref schema", code)
		}
		o.Result = refName(mt.Schema.Ref)
		if o.PageParam != "" {
			if data := mt.Schema.Value.Properties["data"]; data != nil && data.Value.Items != nil && data.Value.Items.Ref != "" {
				if _, ok := mt.Schema.Value.Properties["nextCursor"]; ok {
					o.PageItem = refName(data.Value.Items.Ref)
				}
			}
		}
		break
	}
	if o.PageItem == "" {
		o.PageParam = ""
	}
	return o, nil
}

// costExtension reads an operation's x-bodo-cost: a non-negative integer,
// or the rule {"sum": "parts"} (a batch: the sum of its parts' costs, which
// the table records as SumOfParts with Cost 0).
func costExtension(ext map[string]any) (cost int, sumOfParts bool, err error) {
	if rule, ok := ext["x-bodo-cost"].(map[string]any); ok {
		if len(rule) != 1 || rule["sum"] != "parts" {
			return 0, false, fmt.Errorf(`x-bodo-cost must be an integer or {"sum": "parts"}, not %v`, rule)
		}
		return 0, true, nil
	}
	cost, err = intExtension(ext, "x-bodo-cost")
	return cost, false, err
}

func intExtension(ext map[string]any, name string) (int, error) {
	switch v := ext[name].(type) {
	case float64:
		if v < 0 || v != float64(int(v)) {
			return 0, fmt.Errorf("%s must be a non-negative integer, not %v", name, v)
		}
		return int(v), nil
	case json.Number:
		n, err := v.Int64()
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%s must be a non-negative integer, not %v", name, v)
		}
		return int(n), nil
	default:
		return 0, fmt.Errorf("%s missing or not a number", name)
	}
}

func refName(ref string) string { return ref[strings.LastIndex(ref, "/")+1:] }

func upperFirst(s string) string { return string(unicode.ToUpper(rune(s[0]))) + s[1:] }
func lowerFirst(s string) string { return string(unicode.ToLower(rune(s[0]))) + s[1:] }

// goIdent turns "Idempotency-Key" or "id" into "IdempotencyKey" or "Id", as
// oapi-codegen names fields.
func goIdent(name string) string {
	var b strings.Builder
	for part := range strings.FieldsFuncSeq(name, func(r rune) bool { return r == '-' || r == '_' }) {
		b.WriteString(upperFirst(part))
	}
	return b.String()
}

type service struct {
	Name    string
	Methods []operation
}

func servicesData(operations []operation) map[string]any {
	byName := map[string]*service{}
	var top []operation
	for _, o := range operations {
		if o.Service == "" {
			top = append(top, o)
			continue
		}
		if byName[o.Service] == nil {
			byName[o.Service] = &service{Name: o.Service}
		}
		byName[o.Service].Methods = append(byName[o.Service].Methods, o)
	}
	var services []*service
	for _, s := range byName {
		services = append(services, s)
	}
	slices.SortFunc(services, func(a, b *service) int { return cmp.Compare(a.Name, b.Name) })
	return map[string]any{"Services": services, "Top": top}
}

var funcs = template.FuncMap{
	"join":       strings.Join,
	"lowerFirst": lowerFirst,
	"upperFirst": upperFirst,
	"points": func(o operation) string {
		switch {
		case o.SumOfParts:
			return "the sum of its parts' points"
		case o.Cost == 1:
			return "1 point"
		}
		return fmt.Sprintf("%d points", o.Cost)
	},
	"args": func(o operation) string {
		var b strings.Builder
		for _, p := range o.PathParams {
			fmt.Fprintf(&b, ", %s string", p)
		}
		if o.QueryParams {
			fmt.Fprintf(&b, ", params *%sParams", o.GoName)
		}
		if o.Body != "" {
			fmt.Fprintf(&b, ", body %s", o.Body)
		}
		return b.String()
	},
	"wrap":       wrapText,
	"methodName": func(m string) string { return string(m[0]) + strings.ToLower(m[1:]) },
	"doc": func(text, prefix string) string {
		if text == "" {
			return ""
		}
		return prefix + strings.ReplaceAll(text, "\n", "\n"+prefix) + "\n"
	},
	"urlExpr": func(o operation) string {
		var parts []string
		rest := strings.TrimPrefix(o.Path, "/")
		for {
			i := strings.IndexByte(rest, '{')
			if i < 0 {
				break
			}
			j := strings.IndexByte(rest, '}')
			parts = append(parts, strconv.Quote(rest[:i]), "url.PathEscape("+lowerFirst(goIdent(rest[i+1:j]))+")")
			rest = rest[j+1:]
		}
		if rest != "" {
			parts = append(parts, strconv.Quote(rest))
		}
		return "server + " + strings.Join(parts, " + ")
	},
	"receiver": func(o operation) string {
		if o.Service == "" {
			return "c *Client"
		}
		return "s *" + o.Service + "Service"
	},
	"client": func(o operation) string {
		if o.Service == "" {
			return "c"
		}
		return "s.client"
	},
	"allName": func(o operation) string {
		if o.MethodName == "List" {
			return "All"
		}
		return o.MethodName + "All"
	},
}

func write(file string, tmpl *template.Template, data any) {
	var buf bytes.Buffer
	if err := tmpl.Execute(&buf, data); err != nil {
		log.Fatalf("%s: %v", file, err)
	}
	writeSource(file, buf.Bytes())
}

// writeSource formats Go source and writes it to file.
func writeSource(file string, src []byte) {
	formatted, err := format.Source(src)
	if err != nil {
		log.Fatalf("%s: %v\n%s", file, err, src)
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(file, formatted, 0o644); err != nil {
		log.Fatal(err)
	}
}

const header = "// Code generated by gen from openapi.json. DO NOT EDIT.\n\n"

var opsTemplate = template.Must(template.New("ops").Funcs(funcs).Parse(header + `package ops

// Table holds every operation of openapi.json.
var Table = []Operation{
{{- range .}}
	{ID: {{printf "%q" .ID}}, Method: {{printf "%q" .Method}}, Path: {{printf "%q" .Path}}, Cost: {{.Cost}}, Class: {{printf "%q" .Class}}, Idempotent: {{.Idempotent}}, KeyRequired: {{.KeyRequired}}{{if and .Egress (ne .Egress "none")}}, Egress: Egress{{.Egress | upperFirst}}{{end}}{{if .Conditional}}, Conditional: true{{end}}{{if .SumOfParts}}, SumOfParts: true{{end}}{{if .ParamCosts}}, ParamCosts: map[string]int{ {{- range $k, $v := .ParamCosts}}{{printf "%q" $k}}: {{$v}},{{end}} }{{end}}},
{{- end}}
}

// The operations by name, pointing into Table.
var (
{{- range $i, $o := .}}
	{{$o.GoName}} = &Table[{{$i}}] // {{$o.Method}} {{$o.Path}}
{{- end}}
)
`))

var servicesTemplate = template.Must(template.New("services").Funcs(funcs).Parse(header + `package bodo

import (
	"context"
	"iter"
	"net/http"
	"net/url"
	"strconv"

	"github.com/bodo-app/bodo-go/internal/ops"
)

// initServices sets Client's service fields (declared in client.go, so that
// go doc lists them with their doc comments; a service added to
// openapi.json fails to compile here until its field is declared there).
func (c *Client) initServices() {
{{- range .Services}}
	c.{{.Name}} = &{{.Name}}Service{client: c}
{{- end}}
}
{{range .Services}}
// {{.Name}}Service groups the {{.Name}} operations. Use it through Client.{{.Name}}.
type {{.Name}}Service struct{ client *Client }
{{end}}
{{- range .Services}}{{range .Methods}}{{template "params" .}}{{template "method" .}}{{end}}{{end}}
{{- range .Top}}{{template "params" .}}{{template "method" .}}{{end}}

{{- define "params"}}{{if .Query}}
// {{.GoName}}Params are the query parameters of {{.Service}}.{{.MethodName}}; a nil
// *{{.GoName}}Params and absent fields leave them to the server's defaults.
type {{.GoName}}Params struct {
{{- range .Query}}
{{doc .Doc "	// "}}	{{.Field}} Opt[{{.Type}}]
{{- end}}
}

func (p *{{.GoName}}Params) query() url.Values {
	q := url.Values{}
	if p == nil {
		return q
	}
{{- range .Query}}
	if v, ok := p.{{.Field}}.Get(); ok {
		q.Set({{printf "%q" .Name}}, {{.Format}})
	}
{{- end}}
	return q
}
{{end}}{{end}}

{{- define "method"}}
// {{.MethodName}} calls {{.ID}} ({{.Method}} {{.Path}}, {{points .}}{{range $k, $v := .ParamCosts}}, {{$v}} more with {{$k}}{{end}}): {{lowerFirst .Summary}}.
{{- with .Description}}
//
{{wrap . "// "}}
{{- end}}
{{- if .KeyRequired}}
//
// The client sends an Idempotency-Key of its own, the same on every retry,
// unless WithIdempotencyKey gives one.
{{- end}}
{{- if eq .Method "DELETE"}}
//
// A retry answered 404 after an attempt whose answer was lost (the
// connection failed after the request went out, or a proxy answered for the
// API) returns nil: the resource is gone, most likely deleted by that
// attempt. A first attempt answered 404 is ErrNotFound.
{{- end}}
func ({{receiver .}}) {{.MethodName}}(ctx context.Context{{args .}}, opts ...RequestOption) {{if .Result}}(*{{.Result}}, error){{else}}error{{end}} {
	build := func(server string) (*http.Request, error) {
{{- range .PathChecks}}
		if err := checkPathParam({{printf "%q" .Name}}, {{.Name}}{{range .Reserved}}, {{printf "%q" .}}{{end}}); err != nil {
			return nil, err
		}
{{- end}}
		return newRequest(http.Method{{methodName .Method}}, {{urlExpr .}}, {{if .QueryParams}}params.query(){{else}}nil{{end}}, {{if .Body}}body{{else}}nil{{end}})
	}
{{- if .Result}}
	out := new({{.Result}})
	if err := {{client .}}.do(ctx, ops.{{.GoName}}, build, out, opts); err != nil {
		return nil, err
	}
	return out, nil
{{- else}}
	return {{client .}}.do(ctx, ops.{{.GoName}}, build, nil, opts)
{{- end}}
}
{{if .PageItem}}
// {{allName .}} iterates over every {{.PageItem}} that {{.MethodName}} returns, page by page,
// following nextCursor{{if eq .PageParam "After"}} (as after: the id of the
// last {{.PageItem}} read, which is what the API takes there, or nextCursor
// after a page without any){{end}}. Each page is one call; an error ends the iteration.
// A nextCursor the iteration has followed before ends it with an *Error
// (ErrRepeatedCursor), and so do 100 pages in a row without data
// (ErrEmptyPages), so that a server that repeats itself, or answers
// nothing with new cursors, cannot make it loop for ever.
func ({{receiver .}}) {{allName .}}(ctx context.Context{{args .}}, opts ...RequestOption) iter.Seq2[{{.PageItem}}, error] {
	return func(yield func({{.PageItem}}, error) bool) {
		var p {{.GoName}}Params
		if params != nil {
			p = *params
		}
		var cursors pageCursors
		cursors.seen(p.{{.PageParam}}.Value())
		for {
			page, err := {{if .Service}}s{{else}}c{{end}}.{{.MethodName}}(ctx, {{range .PathParams}}{{.}}, {{end}}&p, opts...)
			if err != nil {
				yield({{.PageItem}}{}, err)
				return
			}
			for _, v := range page.Data {
				if !yield(v, nil) {
					return
				}
			}
			next := page.NextCursor.Value()
			if next == "" {
				return
			}
{{- if eq .PageParam "After"}}
			if n := len(page.Data); n > 0 && page.Data[n-1].ID != "" {
				next = page.Data[n-1].ID // after is an id, which the last one read is, whatever the cursor is; without one, the cursor, whose repeats end the iteration
			}
{{- end}}
			if err := cursors.follow(ops.{{.GoName}}.ID, next, len(page.Data) == 0); err != nil {
				yield({{.PageItem}}{}, err)
				return
			}
			p.{{.PageParam}} = String(next)
		}
	}
}
{{end}}
{{- end}}
`))
