package sandbox_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/bodo-app/bodo-go/internal/sandbox"
	// Every exchange of this package's tests is checked against
	// openapi.json.
	_ "github.com/bodo-app/bodo-go/internal/sandbox/speccheck"
)

// TestMain fails the package when any sandbox recorded a violation of
// openapi.json, even one whose 500 answer a test did not look at.
func TestMain(m *testing.M) {
	code := m.Run()
	if vs := sandbox.Violations(); len(vs) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: %d exchanges violated openapi.json:\n", len(vs))
		for _, v := range vs {
			fmt.Fprintln(os.Stderr, "  ", v)
		}
		code = 1
	}
	os.Exit(code)
}
