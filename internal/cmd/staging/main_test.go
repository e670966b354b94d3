package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestKeepMakesItsDirectory: -keep names a directory that need not exist
// yet; run makes it before any run writes to it.
func TestKeepMakesItsDirectory(t *testing.T) {
	self, err := os.Executable() // any file stands for the staging server here
	if err != nil {
		t.Fatal(err)
	}
	keep := filepath.Join(t.TempDir(), "runs", "today")
	err = run(t.Context(), []string{"-staging", self, "-bin", t.TempDir(), "-keep", keep, "-only", "no-such-variation"}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "no variation") {
		t.Fatalf("run: %v, want no variation to run", err)
	}
	if fi, err := os.Stat(keep); err != nil || !fi.IsDir() {
		t.Errorf("-keep %s: %v", keep, err)
	}
}
