package main

import (
	"testing"

	"github.com/bodo-app/bodo-go/internal/sandbox/speccheck"
)

// TestMain fails the package when an exchange of the tour with the
// bodotest server violated openapi.json.
func TestMain(m *testing.M) { speccheck.Main(m) }
