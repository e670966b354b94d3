// Command staging runs the agents workload against the vendor's staging
// server (bodo-staging, an implementation of the contract whose code is not
// ours) in each of its variations, and prints one table row a run with the
// server's own measurements: goodput over the run and over its first two
// minutes, the refusals the client caused, lockouts, early requests, stalls,
// the most calls in flight and duplicated effects.
//
//	bash scripts/staging.sh ../shared/staging/bodo-staging
//
// The staging server is not part of the project: the command takes its
// path (-staging) and says so when it is missing. Windows are scaled by
// -scale, so a run of -duration real time is -scale times as long in the
// contract's time, in which the table speaks. The Redis rows need
// redis-server on PATH.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

func main() {
	log.SetFlags(0)
	// An interrupt or a SIGTERM (timeout) ends the servers, agents and
	// Redis it started, which would otherwise go on taking CPU from the
	// next measurement.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		log.Fatal(err)
	}
}

type config struct {
	staging  string
	bin      string // the directory of the built agents programs
	scale    float64
	duration time.Duration
	runs     int
	parallel int
	only     []string
	keep     string // a directory for each run's raw stats, server log and agents' report; "" keeps none
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("staging", flag.ContinueOnError)
	var c config
	var only string
	fs.StringVar(&c.staging, "staging", os.Getenv("BODO_STAGING"), "path of the bodo-staging binary (env BODO_STAGING)")
	fs.StringVar(&c.bin, "bin", "", "directory holding the built agents (examples/agents) and redisagents (redisbudget/examples/agents) programs")
	fs.Float64Var(&c.scale, "scale", 6, "bodo-staging's -scale: windows and locks are this many times shorter")
	fs.DurationVar(&c.duration, "duration", 3*time.Minute, "real time of each run")
	fs.IntVar(&c.runs, "runs", 1, "runs of each variation, with seeds 1, 2, …")
	fs.IntVar(&c.parallel, "parallel", 4, "runs at once (each has a server of its own)")
	fs.StringVar(&only, "only", "", "comma-separated variation names; empty: all")
	watch := fs.Duration("watch-org", 0, "instead of the table: start foreign-90's server and print the org's remaining every 40 ms of real time for this long, from the body and the RateLimit header of GET /v1/rate_limit")
	fs.StringVar(&c.keep, "keep", "", "directory to write each run's raw /__stats JSON (NAME-SEED.json), the server's -v log (NAME-SEED.log) and, of a single process's agents, their report and the end of their log but refusals (NAME-SEED.agents.txt) to")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if c.staging == "" {
		return errors.New("no staging server: give -staging PATH (or BODO_STAGING) of the bodo-staging binary, which lives outside the project (../shared/staging/bodo-staging)")
	}
	if _, err := os.Stat(c.staging); err != nil {
		return fmt.Errorf("no staging server at %s (it lives outside the project, in ../shared/staging): %w", c.staging, err)
	}
	if *watch > 0 {
		i := slices.IndexFunc(variations(), func(v variation) bool { return v.name == "foreign-90" })
		if i < 0 || c.scale <= 0 {
			return errors.New("-watch-org: needs the foreign-90 variation and a positive -scale")
		}
		return watchOrg(ctx, c, variations()[i], *watch, out)
	}
	if c.bin == "" {
		return errors.New("-bin: the directory of the built agents programs (scripts/staging.sh builds them)")
	}
	if c.keep != "" {
		if err := os.MkdirAll(c.keep, 0o755); err != nil {
			return fmt.Errorf("-keep: %w", err)
		}
	}
	if only != "" {
		c.only = strings.Split(only, ",")
	}
	var todo []job
	for _, v := range variations() {
		if c.only != nil && !slices.Contains(c.only, v.name) {
			continue
		}
		if v.processes > 1 {
			if _, err := exec.LookPath("redis-server"); err != nil {
				fmt.Fprintf(os.Stderr, "skipping %s: redis-server is not on PATH\n", v.name)
				continue
			}
		}
		for i := range c.runs {
			todo = append(todo, job{v: v, seed: uint64(i + 1)})
		}
	}
	if len(todo) == 0 {
		return errors.New("no variation to run")
	}
	fmt.Fprintf(os.Stderr, "%d runs of %v (%.0f contract minutes each), %d at once\n",
		len(todo), c.duration, c.duration.Minutes()*c.scale, c.parallel)

	sem := make(chan struct{}, max(c.parallel, 1))
	var wg sync.WaitGroup
	for i := range todo {
		j := &todo[i]
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			j.res, j.err = j.v.run(ctx, c, j.seed)
			if j.err != nil {
				fmt.Fprintf(os.Stderr, "%s seed %d: %v\n", j.v.name, j.seed, j.err)
			} else {
				fmt.Fprintf(os.Stderr, "%s seed %d: %s\n", j.v.name, j.seed, j.res.misses(j.v.outage))
			}
		})
	}
	wg.Wait()
	writeTable(out, c, todo)
	for _, j := range todo {
		if j.err != nil {
			return errors.New("some runs failed")
		}
	}
	return nil
}

// job is one run of a variation.
type job struct {
	v    variation
	seed uint64
	res  result
	err  error
}
