package sandbox_test

import (
	"testing"

	"github.com/bodo-app/bodo-go/internal/sandbox/speccheck"
)

// TestMain fails the package when any sandbox recorded a violation of
// openapi.json: every exchange of this package's tests is checked.
func TestMain(m *testing.M) { speccheck.Main(m) }
