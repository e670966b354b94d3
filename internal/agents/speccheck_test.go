package agents

import (
	"testing"

	"github.com/bodo-app/bodo-go/internal/sandbox/speccheck"
)

// TestMain fails the package when a sandbox recorded a violation of
// openapi.json: every exchange of these tests, under every server
// profile, is checked.
func TestMain(m *testing.M) { speccheck.Main(m) }
