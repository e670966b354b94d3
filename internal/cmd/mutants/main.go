// Command mutants deletes the branches of a package's if statements one at
// a time (each condition made false) and runs a test command against each
// such copy; it prints the branches whose deletion no test noticed.
//
//	go run ./internal/cmd/mutants -dir internal/budget -- go test -vet=off -count=1 ./internal/budget
//
// Run it from the module's root. Each worker mutates its own copy of the
// module in a temporary directory, so the tree is never changed. A
// survivor is a branch that no test holds: the tests miss what it does, or
// it does nothing that matters. A mutant whose tests run past -timeout
// counts as noticed (a hang is a failure).
//
// With -only, only the branches that a previous run's output lists are
// tried, matched by file and condition, so that its survivors are checked
// again in minutes after the code moved:
//
//	go run ./internal/cmd/mutants -dir internal/budget -only survivors.txt -- go test ...
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

func main() {
	log.SetFlags(0)
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		log.Fatal(err)
	}
}

// mutant is one if statement's condition, made false.
type mutant struct {
	file       string // relative to the module's root
	line       int
	start, end int    // the condition's byte offsets in the file
	cond       string // the condition as written
}

func run(args []string, out, progress io.Writer) error {
	fl := flag.NewFlagSet("mutants", flag.ContinueOnError)
	dir := fl.String("dir", "", "the package directory whose if statements are mutated, relative to the module's root")
	workers := fl.Int("workers", 2, "mutants tested at once, each in its own copy of the module")
	timeout := fl.Duration("timeout", 2*time.Minute, "how long one mutant's tests may run")
	only := fl.String("only", "", "a previous run's output: try only the branches it lists")
	if err := fl.Parse(args); err != nil {
		return err
	}
	test := fl.Args()
	if *dir == "" || len(test) == 0 {
		return errors.New("usage: mutants -dir DIR [-workers N] [-timeout D] -- TEST COMMAND")
	}
	if _, err := os.Stat("go.mod"); err != nil {
		return errors.New("run mutants from the module's root (no go.mod here)")
	}
	ms, sources, err := find(*dir)
	if err != nil {
		return err
	}
	if *only != "" {
		listed, err := os.ReadFile(*only)
		if err != nil {
			return err
		}
		ms = listedIn(ms, string(listed))
	}
	fmt.Fprintf(progress, "%d branches in %s\n", len(ms), *dir)

	jobs := make(chan mutant)
	var (
		mu        sync.Mutex
		survivors []mutant
		done      int
		firstErr  error
	)
	var wg sync.WaitGroup
	for range max(*workers, 1) {
		root, err := copyModule()
		if err != nil {
			return err
		}
		defer os.RemoveAll(root)
		wg.Go(func() {
			for m := range jobs {
				survived, err := try(root, m, sources[m.file], test, *timeout)
				mu.Lock()
				done++
				if err != nil && firstErr == nil {
					firstErr = err
				}
				if survived {
					survivors = append(survivors, m)
				}
				fmt.Fprintf(progress, "\r%d of %d, %d survived", done, len(ms), len(survivors))
				mu.Unlock()
			}
		})
	}
	for _, m := range ms {
		jobs <- m
	}
	close(jobs)
	wg.Wait()
	fmt.Fprintln(progress)
	if firstErr != nil {
		return firstErr
	}
	slices.SortFunc(survivors, func(a, b mutant) int {
		if c := strings.Compare(a.file, b.file); c != 0 {
			return c
		}
		return a.line - b.line
	})
	fmt.Fprintf(out, "%d of %d branches survived their deletion (%s)\n", len(survivors), len(ms), strings.Join(test, " "))
	for _, m := range survivors {
		fmt.Fprintf(out, "%s:%d: if %s\n", m.file, m.line, m.cond)
	}
	return nil
}

// find lists the conditions of the if statements of the non-test files in
// dir, and returns each file's source.
func find(dir string) ([]mutant, map[string][]byte, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	var ms []mutant
	sources := map[string][]byte{}
	fset := token.NewFileSet()
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		path := filepath.Join(dir, name)
		src, err := os.ReadFile(path)
		if err != nil {
			return nil, nil, err
		}
		f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
		if err != nil {
			return nil, nil, err
		}
		sources[path] = src
		ast.Inspect(f, func(n ast.Node) bool {
			if s, ok := n.(*ast.IfStmt); ok {
				start, end := fset.Position(s.Cond.Pos()), fset.Position(s.Cond.End())
				ms = append(ms, mutant{file: path, line: start.Line, start: start.Offset, end: end.Offset,
					cond: string(src[start.Offset:end.Offset])})
			}
			return true
		})
	}
	return ms, sources, nil
}

// listedIn keeps the mutants that out, the output of a run, lists as
// survivors (lines "file:line: if cond"), whatever their line now.
func listedIn(ms []mutant, out string) []mutant {
	listed := map[string]bool{}
	for line := range strings.Lines(out) {
		file, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if _, cond, found := strings.Cut(rest, ": if "); ok && found {
			listed[file+"\x00"+cond] = true
		}
	}
	return slices.DeleteFunc(ms, func(m mutant) bool { return !listed[m.file+"\x00"+m.cond] })
}

// try writes m into the copy at root, runs test there and puts the file
// back; it reports whether the tests passed.
func try(root string, m mutant, src []byte, test []string, timeout time.Duration) (bool, error) {
	path := filepath.Join(root, m.file)
	var b bytes.Buffer
	b.Write(src[:m.start])
	b.WriteString("false && (")
	b.Write(src[m.start:m.end])
	b.WriteString(")")
	b.Write(src[m.end:])
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return false, err
	}
	defer os.WriteFile(path, src, 0o644)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, test[0], test[1:]...)
	cmd.Dir = root
	cmd.WaitDelay = 5 * time.Second
	return cmd.Run() == nil, nil
}

// copyModule copies the module's files, without .git, into a new
// temporary directory.
func copyModule() (string, error) {
	root, err := os.MkdirTemp("", "mutants-")
	if err != nil {
		return "", err
	}
	err = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(root, path), 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(root, path), src, 0o644)
	})
	if err != nil {
		os.RemoveAll(root)
		return "", err
	}
	return root, nil
}
