package bodo_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/bodo-app/bodo-go/internal/sandbox"
	// Every exchange with the sandbox in this package's tests is checked
	// against openapi.json: the client can send, and the sandbox answer,
	// only what the description allows.
	_ "github.com/bodo-app/bodo-go/internal/sandbox/speccheck"
)

// TestMain fails the package when a sandbox recorded a violation of
// openapi.json, also one whose 500 answer no test looked at.
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
