package compare

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// allocBreakdown makes n calls of bc's client with every allocation
// sampled, and returns the allocations per call under each function of
// package bodo (and of the libraries it calls) that accounts for at least
// one allocation per call, most first.
func allocBreakdown(t *testing.T, bc benchClient, n int) []FuncAllocs {
	srv, id := benchSandbox(t)
	get, _ := bc.make(t, srv, fmt.Sprintf("allocs-%s-%d.bench.test", bc.name, runSeq.Add(1)))
	ctx := context.Background()
	if err := get(ctx, id); err != nil {
		t.Fatal(err)
	}
	old := runtime.MemProfileRate
	runtime.MemProfileRate = 1
	defer func() { runtime.MemProfileRate = old }()
	before := memProfile()
	for range n {
		if err := get(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.GC() // a profile is published after the second GC
	after := memProfile()

	cum := map[string]int64{}
	for stack, objs := range after {
		d := objs - before[stack]
		if d <= 0 {
			continue
		}
		seen := map[string]bool{}
		for _, fn := range strings.Split(stack, "\n") {
			if !interesting(fn) || seen[fn] {
				continue
			}
			seen[fn] = true
			cum[fn] += d
		}
	}
	var out []FuncAllocs
	for fn, c := range cum {
		if per := float64(c) / float64(n); per >= 1 {
			out = append(out, FuncAllocs{Func: fn, Allocs: per})
		}
	}
	slices.SortFunc(out, func(a, b FuncAllocs) int {
		if a.Allocs != b.Allocs {
			if a.Allocs > b.Allocs {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Func, b.Func)
	})
	return out
}

// interesting reports whether fn belongs to the client side of a call:
// package bodo, its generated client and the header parser it uses.
func interesting(fn string) bool {
	return strings.HasPrefix(fn, "github.com/bodo-app/bodo-go.") ||
		strings.HasPrefix(fn, "github.com/bodo-app/bodo-go/gen.") ||
		strings.HasPrefix(fn, "github.com/dunglas/httpsfv.")
}

// memProfile returns the allocated objects of every stack in the heap
// profile, keyed by the stack's function names.
func memProfile() map[string]int64 {
	var recs []runtime.MemProfileRecord
	n, _ := runtime.MemProfile(nil, true)
	for {
		recs = make([]runtime.MemProfileRecord, n+50)
		var ok bool
		if n, ok = runtime.MemProfile(recs, true); ok {
			recs = recs[:n]
			break
		}
	}
	out := map[string]int64{}
	for _, r := range recs {
		var names []string
		frames := runtime.CallersFrames(r.Stack())
		for {
			f, more := frames.Next()
			names = append(names, f.Function)
			if !more {
				break
			}
		}
		out[strings.Join(names, "\n")] += r.AllocObjects
	}
	return out
}
