package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestABranchNoTestHoldsSurvives runs mutants on a module whose tests
// leave out one of its two branches: that one, and only it, survives, and
// the module's files are as they were.
func TestABranchNoTestHoldsSurvives(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go test twice")
	}
	src := filepath.Join("testdata", "sign")
	dir := t.TempDir()
	for _, name := range []string{"go.mod", "sign.go", "sign_test.go"} {
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	before, _ := os.ReadFile(filepath.Join(dir, "sign.go"))
	t.Chdir(dir)
	t.Setenv("GOWORK", "off")
	var out strings.Builder
	if err := run([]string{"-dir", ".", "--", "go", "test", "-count=1", "-vet=off", "."}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	want := "1 of 2 branches survived their deletion (go test -count=1 -vet=off .)\nsign.go:9: if x == 0\n"
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
	if after, _ := os.ReadFile("sign.go"); string(after) != string(before) {
		t.Error("sign.go was changed")
	}
}

// TestOnlyTriesTheBranchesAPreviousRunListed: with -only, mutants tries
// the branches a previous run printed, found by their condition though
// their line moved, and no other.
func TestOnlyTriesTheBranchesAPreviousRunListed(t *testing.T) {
	ms := []mutant{{file: "sign.go", line: 6, cond: "x < 0"}, {file: "sign.go", line: 12, cond: "x == 0"}, {file: "other.go", line: 9, cond: "x == 0"}}
	listed := "1 of 2 branches survived their deletion (go test .)\nsign.go:9: if x == 0\n"
	got := listedIn(ms, listed)
	if len(got) != 1 || got[0].file != "sign.go" || got[0].line != 12 {
		t.Errorf("got %+v, want sign.go's x == 0 alone", got)
	}
}

// TestUsage: without a directory or a test command, mutants says how to
// call it.
func TestUsage(t *testing.T) {
	for _, args := range [][]string{{"-dir", "x"}, {"--", "go", "test"}} {
		if err := run(args, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "usage") {
			t.Errorf("%q: %v, want the usage", args, err)
		}
	}
}
