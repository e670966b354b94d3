package compare

import (
	"testing"

	"github.com/bodo-app/bodo-go/internal/sandbox/speccheck"
)

// TestMain fails the package when a sandbox recorded a violation of
// openapi.json: the clients under test can send, and the sandbox answer,
// only what the description allows.
func TestMain(m *testing.M) { speccheck.Main(m) }
