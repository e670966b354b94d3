package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"time"
)

// watchOrg starts the server of variation v (foreign-90: its foreign load
// on the org), lets the foreign load fill the org for 1.5 windows, then
// asks GET /v1/rate_limit every 40 ms of real time (25 points a second,
// under the 30 the foreign load leaves at -scale 6) for d and prints each
// answer's real time, the org's remaining in the body and r of its
// RateLimit header (which the server writes after the body's numbers):
// where they differ, the foreign load took between the two; where r rises
// from under a take to one take less the calls in between, it took the
// rest in part.
func watchOrg(ctx context.Context, c config, v variation, d time.Duration, out io.Writer) error {
	cmd, url, log, err := startStaging(ctx, c, v, 1)
	if err != nil {
		return err
	}
	defer func() { cmd.Process.Kill(); <-log.done; cmd.Wait() }()
	time.Sleep(time.Duration(1.5 * 60 / c.scale * float64(time.Second)))
	fmt.Fprintln(out, "seconds\tbody\theader")
	start := time.Now()
	differ := 0
	for at := start; time.Since(start) < d; at = at.Add(40 * time.Millisecond) {
		time.Sleep(time.Until(at))
		body, header, err := orgRemaining(ctx, url)
		if errors.Is(err, errRefused) {
			fmt.Fprintf(out, "%.3f\trefused\n", time.Since(start).Seconds())
			continue
		}
		if err != nil {
			return err
		}
		if body != header {
			differ++
		}
		fmt.Fprintf(out, "%.3f\t%d\t%d\n", time.Since(start).Seconds(), body, header)
	}
	fmt.Fprintf(out, "%d answers whose header differs from their body\n", differ)
	return nil
}

var errRefused = errors.New("refused")

var orgMember = regexp.MustCompile(`"org";r=(\d+)`)

// orgRemaining asks the server for the key's status and returns the org's
// remaining from the body and from the RateLimit header (-1 when the
// header names another level).
func orgRemaining(ctx context.Context, url string) (body, header int, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/v1/rate_limit", nil)
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Authorization", "Bearer "+apiKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusTooManyRequests {
		return 0, 0, errRefused
	}
	var st struct{ Policies []policyStatus }
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&st); err != nil {
		return 0, 0, fmt.Errorf("GET /v1/rate_limit: %d: %w", resp.StatusCode, err)
	}
	i := slices.IndexFunc(st.Policies, func(p policyStatus) bool { return p.Name == "org" })
	if i < 0 {
		return 0, 0, fmt.Errorf("GET /v1/rate_limit: %d: no org level in the body", resp.StatusCode)
	}
	header = -1
	if m := orgMember.FindStringSubmatch(resp.Header.Get("RateLimit")); m != nil {
		header, _ = strconv.Atoi(m[1])
	}
	return st.Policies[i].Remaining, header, nil
}

// policyStatus is a level of GET /v1/rate_limit's body.
type policyStatus struct {
	Name      string
	Remaining int
}
