package bodo_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/bodo-app/bodo-go/internal/ops"
	"github.com/getkin/kin-openapi/openapi3"
)

func loadSpec(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("openapi.json does not validate: %v", err)
	}
	return doc
}

func TestOpenAPIValidates(t *testing.T) {
	doc := loadSpec(t)
	if doc.OpenAPI != "3.0.3" {
		t.Errorf("openapi = %q, want 3.0.3", doc.OpenAPI)
	}
	scheme := doc.Components.SecuritySchemes["bearerAuth"]
	if scheme == nil || scheme.Value.Type != "http" || scheme.Value.Scheme != "bearer" {
		t.Errorf("no bearer security scheme: %+v", scheme)
	}
	for _, h := range []string{"RequestId", "BodoVersion", "RateLimit", "RateLimitPolicy", "RetryAfter", "ETag", "Location", "IdempotentReplayed"} {
		if doc.Components.Headers[h] == nil {
			t.Errorf("components.headers lacks %s", h)
		}
	}
	for _, p := range []string{"IdempotencyKey", "IdempotencyKeyRequired", "IfNoneMatch", "IfMatch", "BodoVersion"} {
		if doc.Components.Parameters[p] == nil {
			t.Errorf("components.parameters lacks %s", p)
		}
	}
	problem := doc.Components.Schemas["Problem"]
	for _, member := range []string{"type", "title", "status", "detail", "instance", "code", "requestId", "retryAfterMs", "policy", "resetsAt", "errors"} {
		if problem == nil || problem.Value.Properties[member] == nil {
			t.Errorf("Problem lacks the member %s", member)
		}
	}
	classes := map[string]bool{"read": true, "write": true, "delete": true, "money": true, "long-run": true, "batch": true}
	n := 0
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			n++
			switch cost := op.Extensions["x-bodo-cost"].(type) {
			case float64:
			case map[string]any:
				if len(cost) != 1 || cost["sum"] != "parts" || op.Extensions["x-bodo-class"] != "batch" {
					t.Errorf("%s %s: x-bodo-cost %v: the only rule is {\"sum\": \"parts\"}, for a batch", method, path, cost)
				}
			default:
				t.Errorf("%s %s: x-bodo-cost missing", method, path)
			}
			hasVersion := false
			for _, p := range op.Parameters {
				hasVersion = hasVersion || p.Ref == "#/components/parameters/BodoVersion"
			}
			if !hasVersion {
				t.Errorf("%s %s: no Bodo-Version parameter", method, path)
			}
			if c, _ := op.Extensions["x-bodo-class"].(string); !classes[c] {
				t.Errorf("%s %s: x-bodo-class %q", method, path, c)
			}
			for code, resp := range op.Responses.Map() {
				if resp.Value == nil {
					continue
				}
				for _, h := range []string{"Request-Id", "RateLimit", "RateLimit-Policy", "Bodo-Version"} {
					if hdr := resp.Value.Headers[h]; hdr == nil || !hdr.Value.Required {
						t.Errorf("%s %s: response %s lacks the required header %s", method, path, code, h)
					}
				}
				if resp.Value.Content.Get("application/problem+json") != nil {
					if hdr := resp.Value.Headers["Content-Language"]; hdr == nil || !hdr.Value.Required {
						t.Errorf("%s %s: problem response %s lacks the required header Content-Language", method, path, code)
					}
				}
			}
			for _, code := range []string{"400", "401", "405", "429", "500", "503"} {
				if op.Responses.Value(code) == nil {
					t.Errorf("%s %s: no %s response", method, path, code)
				}
			}
		}
	}
	if !ops.Batch.SumOfParts || ops.Batch.Cost != 0 || slices.ContainsFunc(ops.Table, func(o ops.Operation) bool { return o.SumOfParts && o.ID != "batch" }) {
		t.Error(`only batch costs {"sum": "parts"}`)
	}
	if n != len(ops.Table) {
		t.Errorf("openapi.json has %d operations, the generated table %d: run go generate", n, len(ops.Table))
	}
}

// TestOpenAPIMatchesContract checks every operation's method, path, cost and
// class against the table of bodo-api.md, the wire contract, when it is
// beside the repository (as in CI).
func TestOpenAPIMatchesContract(t *testing.T) {
	f, err := os.Open("../shared/bodo-api.md")
	if err != nil {
		t.Skip("../shared/bodo-api.md is not beside this checkout")
	}
	defer f.Close()
	row := regexp.MustCompile("^\\| (\\w+) \\| (GET|POST|PATCH|DELETE) (/v1/[^ `]*)[^|]*\\| ([^|]+) \\| ([\\w-]+) \\|$")
	seen := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := row.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		seen++
		id, method, path, costText, class := m[1], m[2], m[3], strings.TrimSpace(m[4]), m[5]
		op, ok := ops.ByID(id)
		if !ok {
			t.Errorf("%s is in bodo-api.md but not in openapi.json", id)
			continue
		}
		if op.Method != method || op.Path != path || string(op.Class) != class {
			t.Errorf("%s: openapi.json says %s %s %s, bodo-api.md %s %s %s", id, op.Method, op.Path, op.Class, method, path, class)
		}
		base, extra, hasExtra := strings.Cut(costText, ", +")
		if cost, err := strconv.Atoi(base); err == nil && op.Cost != cost {
			t.Errorf("%s: cost %d, bodo-api.md says %d", id, op.Cost, cost)
		}
		if hasExtra {
			n, _ := strconv.Atoi(strings.Fields(extra)[0])
			if op.ParamCosts["q"] != n {
				t.Errorf("%s: q surcharge %d, bodo-api.md says %d", id, op.ParamCosts["q"], n)
			}
		}
	}
	if seen != len(ops.Table) {
		t.Errorf("bodo-api.md lists %d operations, openapi.json %d", seen, len(ops.Table))
	}
}

// TestNoNullableBesideAllOf: OpenAPI 3.0.3, Schema Object (nullable): "A
// true value adds "null" to the allowed types specified by the type
// keyword, only if type is explicitly defined within the same Schema
// Object. Other Schema Object constraints retain their defined behavior,
// and therefore may disallow the use of null as a value." A nullable schema
// beside an allOf, oneOf or $ref of an object schema refuses null in a
// strict validator, so a member the contract writes `x|null` (an
// Operation's result and error) says null with anyOf instead.
func TestNoNullableBesideAllOf(t *testing.T) {
	raw, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if v["nullable"] == true {
				_, all := v["allOf"]
				_, ref := v["$ref"]
				_, one := v["oneOf"]
				if all || ref || one {
					t.Errorf("%s: nullable beside allOf/oneOf/$ref: null is still refused by the referenced schema under OAS 3.0.3", path)
				}
			}
			for k, e := range v {
				walk(path+"/"+k, e)
			}
		case []any:
			for i, e := range v {
				walk(fmt.Sprintf("%s/%d", path, i), e)
			}
		}
	}
	walk("#", doc)
}

// TestTheAPIsProblemsAreGerman: bodo-api.md, Basics: "errors
// application/problem+json (RFC 9457) with Content-Language: de"; only
// bodotest answers en, which info.description may say, but not of the API.
func TestTheAPIsProblemsAreGerman(t *testing.T) {
	raw, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Info struct{ Description string } `json:"info"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if i := strings.Index(doc.Info.Description, "or `en` when the request's `Accept-Language` prefers English"); i >= 0 {
		t.Errorf("info.description promises English problems from the API: %q", doc.Info.Description[max(0, i-80):i+70])
	}
}
