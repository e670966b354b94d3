package bodo_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestREADMESnippetsCompile compiles every ```go block of
// README.md against the current API. A block of statements is wrapped in a
// function that has ctx, client and id in scope; a block that declares a
// func is kept at top level. "declared and not used" and unused imports are
// ignored: a snippet shows a call, not a whole program.
func TestREADMESnippetsCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program")
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(string(readme), -1)
	if len(blocks) == 0 {
		t.Fatal("no go blocks in README.md")
	}
	root, _ := os.Getwd()
	dir := t.TempDir()
	var src strings.Builder
	src.WriteString(`package readmesnippets

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"os"
	"testing"
	"testing/synctest"

	"github.com/bodo-app/bodo-go"
	"github.com/bodo-app/bodo-go/bodotest"
	"github.com/bodo-app/bodo-go/otelbodo"
	"github.com/bodo-app/bodo-go/redisbudget"
	"github.com/redis/go-redis/v9"
)

// invoiceAndPay is "your code" in the README's bodotest example.
func invoiceAndPay(ctx context.Context, c *bodo.Client, name string, amount int64) (*bodo.Invoice, error) {
	return nil, nil
}
`)
	for i, b := range blocks {
		body := b[1]
		var kept []string
		for _, line := range strings.Split(body, "\n") {
			if strings.HasPrefix(line, "import ") {
				continue
			}
			kept = append(kept, line)
		}
		body = strings.Join(kept, "\n")
		fmt.Fprintf(&src, "\n// README block %d\n", i+1)
		if strings.HasPrefix(strings.TrimSpace(body), "func ") {
			src.WriteString(body)
			continue
		}
		fmt.Fprintf(&src, "func block%d(ctx context.Context, client *bodo.Client, id string) error {\n%s\nreturn nil\n}\n", i+1, body)
	}
	src.WriteString("\nvar _, _, _, _, _, _, _, _, _ = errors.New, fmt.Sprint, log.Print, slog.Default, http.MethodGet, os.Getenv, testing.Short, synctest.Test, bodotest.NewServer\nvar _, _ = otelbodo.WithTelemetry, redisbudget.New\nvar _ = redis.NewClient\nvar _ = json.Unmarshal\n")
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module readmesnippets\n\ngo 1.26.0\n"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "snippets.go"), []byte(src.String()), 0o644))
	work := fmt.Sprintf("go 1.26.0\n\nuse (\n\t%s\n\t%s\n\t%s\n\t%s\n)\n\nreplace github.com/bodo-app/bodo-go v0.1.0 => %s\n",
		dir, root, filepath.Join(root, "otelbodo"), filepath.Join(root, "redisbudget"), root)
	must(os.WriteFile(filepath.Join(dir, "go.work"), []byte(work), 0o644))
	// go.work.sum of the repository holds sums the workspace needs.
	if sum, err := os.ReadFile(filepath.Join(root, "go.work.sum")); err == nil {
		must(os.WriteFile(filepath.Join(dir, "go.work.sum"), sum, 0o644))
	}
	cmd := exec.Command("go", "build", "-o", os.DevNull, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK="+filepath.Join(dir, "go.work"), "GOFLAGS=-gcflags=-e")
	out, _ := cmd.CombinedOutput()
	var problems []string
	for _, line := range strings.Split(string(out), "\n") {
		if line == "" || strings.HasPrefix(line, "#") || strings.Contains(line, "declared and not used") || strings.Contains(line, "imported and not used") {
			continue
		}
		problems = append(problems, line)
	}
	if len(problems) > 0 {
		numbered := strings.Split(src.String(), "\n")
		for i := range numbered {
			numbered[i] = fmt.Sprintf("%4d %s", i+1, numbered[i])
		}
		t.Errorf("README.md's Go snippets do not compile:\n%s\n\nthe generated file:\n%s", strings.Join(problems, "\n"), strings.Join(numbered, "\n"))
	}
}
