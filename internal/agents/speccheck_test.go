package agents

import (
	"fmt"
	"os"
	"testing"

	"github.com/bodo-app/bodo-go/internal/sandbox"
	// Every exchange of these tests with the sandbox, under every server
	// profile, is checked against openapi.json.
	_ "github.com/bodo-app/bodo-go/internal/sandbox/speccheck"
)

// TestMain fails the package when a sandbox recorded a violation of
// openapi.json.
func TestMain(m *testing.M) {
	code := m.Run()
	if vs := sandbox.Violations(); len(vs) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: %d exchanges violated openapi.json, the first:\n", len(vs))
		for _, v := range vs[:min(len(vs), 10)] {
			fmt.Fprintln(os.Stderr, "  ", v)
		}
		code = 1
	}
	os.Exit(code)
}
