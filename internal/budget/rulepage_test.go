package budget

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	pageTest   = regexp.MustCompile(`\bTest[A-Z]\w*`)
	pageFile   = regexp.MustCompile(`\b\w+\.go\b`)
	pageMember = regexp.MustCompile(`\b([A-Za-z]\w*)\.([A-Za-z]\w*)\b`)
	pageName   = regexp.MustCompile(`\b[a-z]+[A-Z]\w*\b`)
	// pageExported is an exported Go name on the page (a header's name,
	// RateLimit, is the only such word that is not one).
	pageExported = regexp.MustCompile(`\b[A-Z][a-z]+[A-Z]\w*\b`)
)

// TestTheRulePageNamesWhatExists: every test, file, method and unexported
// name that the package doc gives as the place of a rule exists, so the
// page cannot name code or tests that are gone.
func TestTheRulePageNamesWhatExists(t *testing.T) {
	page := packageDoc(t)
	declared := declaredIn(t, ".")
	root := declaredIn(t, filepath.Join("..", ".."))
	tests := repoTests(t)
	for _, name := range pageTest.FindAllString(page, -1) {
		if !tests[name] {
			t.Errorf("the page names %s, which no test file of the repository declares", name)
		}
	}
	for _, name := range pageFile.FindAllString(page, -1) {
		if !declared[name] && !root[name] {
			t.Errorf("the page names %s, which is neither in this package nor in package bodo", name)
		}
	}
	for _, m := range pageMember.FindAllStringSubmatch(page, -1) {
		if m[2] == "go" {
			continue
		}
		if !declared[m[0]] {
			t.Errorf("the page names %s, which this package does not declare", m[0])
		}
	}
	for _, name := range pageName.FindAllString(page, -1) {
		if !declared[name] && !declaredMember(declared, name) {
			t.Errorf("the page names %s, which this package does not declare", name)
		}
	}
	for _, name := range pageExported.FindAllString(page, -1) {
		if !declared[name] && !declaredMember(declared, name) && !root[name] && !strings.HasPrefix(name, "Test") && name != "RateLimit" {
			t.Errorf("the page names %s, which neither this package nor package bodo declares", name)
		}
	}
}

// declaredIn is what the Go files of dir but its tests declare, and their
// names.
func declaredIn(t *testing.T, dir string) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	declared := map[string]bool{}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		declared[filepath.Base(path)] = true
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			for _, n := range declNames(d) {
				declared[n] = true
			}
		}
	}
	return declared
}

// packageDoc is the package doc comment of doc.go.
func packageDoc(t *testing.T) string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "doc.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil || f.Doc == nil {
		t.Fatalf("doc.go has no package doc: %v", err)
	}
	return f.Doc.Text()
}

// declNames are the names d declares: functions, Type.Method, types, their
// fields as Type.Field, constants and variables.
func declNames(d ast.Decl) []string {
	var names []string
	switch d := d.(type) {
	case *ast.FuncDecl:
		if d.Recv == nil || len(d.Recv.List) == 0 {
			return append(names, d.Name.Name)
		}
		recv := d.Recv.List[0].Type
		if star, ok := recv.(*ast.StarExpr); ok {
			recv = star.X
		}
		if id, ok := recv.(*ast.Ident); ok {
			names = append(names, id.Name+"."+d.Name.Name)
		}
	case *ast.GenDecl:
		for _, s := range d.Specs {
			switch s := s.(type) {
			case *ast.TypeSpec:
				names = append(names, s.Name.Name)
				if st, ok := s.Type.(*ast.StructType); ok {
					for _, f := range st.Fields.List {
						for _, n := range f.Names {
							names = append(names, s.Name.Name+"."+n.Name)
						}
					}
				}
			case *ast.ValueSpec:
				for _, n := range s.Names {
					names = append(names, n.Name)
				}
			}
		}
	}
	return names
}

// declaredMember reports whether name is a method or field of a type of
// the package (the page names a method without its type where the type is
// plain from the sentence).
func declaredMember(declared map[string]bool, name string) bool {
	for d := range declared {
		if strings.HasSuffix(d, "."+name) {
			return true
		}
	}
	return false
}

// repoTests are the names of the test functions of every test file of the
// repository (package bodo and redisbudget hold some of the rules' tests).
func repoTests(t *testing.T) map[string]bool {
	t.Helper()
	tests := map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(filepath.Join("..", ".."), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "Test") {
				tests[fn.Name.Name] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tests
}
