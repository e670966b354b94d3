package sandbox

import (
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestLanguageOf(t *testing.T) {
	cases := []struct {
		accept []string
		want   lang
	}{
		{nil, german},
		{[]string{""}, german},
		{[]string{"en"}, english},
		{[]string{"EN-gb"}, english},
		{[]string{"de"}, german},
		{[]string{"de-CH, en;q=0.9"}, german},
		{[]string{"en;q=0.5, de;q=0.4"}, english},
		{[]string{"fr, en;q=0.3"}, english},
		{[]string{"fr"}, german},
		{[]string{"*"}, german},
		{[]string{"de;q=0, *"}, english},
		{[]string{"en, de"}, english},
		{[]string{"de, en"}, german},
		{[]string{"en;q=0"}, german},
		{[]string{"en;q=2"}, german},
		{[]string{"en;q=x, de"}, german},
		{[]string{"fr", "en"}, english},
		{[]string{" , ,en ; q=1"}, english},
		{[]string{"english"}, german},
	}
	for _, tc := range cases {
		h := http.Header{}
		for _, v := range tc.accept {
			h.Add("Accept-Language", v)
		}
		if got := languageOf(h); got != tc.want {
			t.Errorf("Accept-Language %q: %s, want %s", tc.accept, got.tag(), tc.want.tag())
		}
	}
}

// TestEnglishProblems checks that the problems follow Accept-Language, with
// a matching Content-Language; the package's TestMain checks the answers
// against openapi.json.
func TestEnglishProblems(t *testing.T) {
	c := newTester(t, New())
	de := c.do("POST", "/v1/contacts", `{"name":"","tags":[1]}`).want(t, http.StatusUnprocessableEntity)
	en := c.do("POST", "/v1/contacts", `{"name":"","tags":[1]}`, "Accept-Language", "en-GB, de;q=0.5").want(t, http.StatusUnprocessableEntity)
	if cl := en.header.Get("Content-Language"); cl != "en" {
		t.Errorf("Content-Language %q, want en", cl)
	}
	if cl := de.header.Get("Content-Language"); cl != "de" {
		t.Errorf("Content-Language %q, want de", cl)
	}
	for _, tc := range []struct {
		r                    *reply
		title, detail, field string
	}{
		{de, "Ungültige Felder", "2 Felder sind ungültig", "muss 1 bis 200 Zeichen lang sein"},
		{en, "Invalid fields", "2 fields are invalid", "must be 1 to 200 characters long"},
	} {
		var p struct {
			Title, Detail string
			Errors        []struct{ Field, Message string }
		}
		tc.r.decode(t, &p)
		if p.Title != tc.title || p.Detail != tc.detail || len(p.Errors) != 2 || p.Errors[0].Message != tc.field {
			t.Errorf("problem %s", tc.r.body)
		}
	}

	// The other problems, and a batch part's, are English too.
	for _, tc := range []struct {
		method, path string
		body         any
		status       int
		detail       string
	}{
		{"GET", "/v1/contacts/con_00000000000000000000000000", nil, http.StatusNotFound, "This resource does not exist."},
		{"PUT", "/v1/contacts", nil, http.StatusMethodNotAllowed, "This path takes GET, POST, not PUT."},
		{"GET", "/v1/contacts?limit=0", nil, http.StatusBadRequest, "limit must be a whole number from 1 to 100."},
		{"POST", "/v1/batch", `{"requests":[{"method":"GET","path":"/v1/nowhere"}]}`, http.StatusOK, ""},
	} {
		r := c.do(tc.method, tc.path, tc.body, "Accept-Language", "en").want(t, tc.status)
		if tc.status == http.StatusOK {
			if !strings.Contains(string(r.body), `"detail":"This resource does not exist."`) {
				t.Errorf("batch part not in English: %s", r.body)
			}
			continue
		}
		if p := r.obj(t); p["detail"] != tc.detail || r.header.Get("Content-Language") != "en" {
			t.Errorf("%s %s: %s %s", tc.method, tc.path, r.header.Get("Content-Language"), r.body)
		}
	}
	if p := c.as("bodo_test_nobody").do("GET", "/v1/me", nil, "Accept-Language", "en").want(t, http.StatusUnauthorized).obj(t); p["title"] != "Not authenticated" {
		t.Errorf("401: %v", p)
	}
}

// TestMessagesInBothLanguages reads every msg literal of the package: both
// texts are given, they differ, and they take the same arguments.
func TestMessagesInBothLanguages(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	verbs := regexp.MustCompile(`%[-+# 0]*[0-9]*(?:\.[0-9]+)?[a-zA-Z%]`)
	fset := token.NewFileSet()
	n := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		check := func(lit *ast.CompositeLit) {
			if len(lit.Elts) == 0 {
				return // msg{}, the zero value
			}
			texts := make([]string, 0, 2)
			for _, e := range lit.Elts {
				if bl, ok := e.(*ast.BasicLit); ok && bl.Kind == token.STRING {
					s, _ := strconv.Unquote(bl.Value)
					texts = append(texts, s)
				}
			}
			n++
			where := fset.Position(lit.Pos())
			if len(texts) != 2 || texts[0] == "" || texts[1] == "" || texts[0] == texts[1] {
				t.Errorf("%s: msg of %q", where, texts)
				return
			}
			if de, en := verbs.FindAllString(texts[0], -1), verbs.FindAllString(texts[1], -1); !slices.Equal(de, en) {
				t.Errorf("%s: the German text takes %q, the English %q", where, de, en)
			}
		}
		isMsg := func(e ast.Expr) bool { id, ok := e.(*ast.Ident); return ok && id.Name == "msg" }
		ast.Inspect(f, func(node ast.Node) bool {
			lit, ok := node.(*ast.CompositeLit)
			if !ok {
				return true
			}
			// msg{…}, or {…} as a value of a map or slice of msg.
			var elem ast.Expr
			switch typ := lit.Type.(type) {
			case *ast.MapType:
				elem = typ.Value
			case *ast.ArrayType:
				elem = typ.Elt
			}
			switch {
			case isMsg(lit.Type):
				check(lit)
			case elem != nil && isMsg(elem):
				for _, e := range lit.Elts {
					if kv, ok := e.(*ast.KeyValueExpr); ok {
						e = kv.Value
					}
					if v, ok := e.(*ast.CompositeLit); ok && v.Type == nil {
						check(v)
					}
				}
			}
			return true
		})
	}
	if n < 50 {
		t.Errorf("found %d messages; the parser missed some", n)
	}
}
