package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/dunglas/httpsfv"
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
	select {
	case <-time.After(time.Duration(1.5 * 60 / c.scale * float64(time.Second))):
	case <-ctx.Done():
		return ctx.Err()
	}
	fmt.Fprintln(out, "seconds\tbody\theader")
	client := &http.Client{Timeout: watchTimeout}
	start := time.Now()
	answers, differ, dips := 0, 0, 0
	var last [2]int // the bodies of the two answers before
	lowest := -1    // the lower of the body and the header of the one before
	for at := start; time.Since(start) < d; at = later(at.Add(watchEvery), time.Now()) {
		time.Sleep(time.Until(at)) // at most watchEvery: the request after it ends with ctx
		body, header, err := orgRemaining(ctx, client, url)
		if errors.Is(err, errRefused) {
			fmt.Fprintf(out, "%.3f\trefused\n", time.Since(start).Seconds())
			continue
		}
		if err != nil {
			return err
		}
		answers++
		if header >= 0 && body != header {
			differ++
		}
		if answers > 2 && isDip(last[0], lowest, body) {
			dips++
		}
		low := body
		if header >= 0 {
			low = min(low, header)
		}
		last, lowest = [2]int{last[1], body}, low
		fmt.Fprintf(out, "%.3f\t%d\t%d\n", time.Since(start).Seconds(), body, header)
	}
	fmt.Fprintf(out, "%d answers: %d name the org in their header with another remaining than their body; %d dips (the org lower by more than %d than the answer before, and back within %d in the answer after)\n",
		answers, differ, dips, dipDepth, dipBack)
	return nil
}

// watchEvery is how often watchOrg asks; watchTimeout how long it waits
// for an answer. A dip is a fall of more than dipDepth (a take of the
// foreign load's is 27 points at -scale 6, this key's own calls between two
// answers one) that the next answer takes back to within dipBack.
const (
	watchEvery   = 40 * time.Millisecond
	watchTimeout = 2 * time.Second
	dipDepth     = 10
	dipBack      = 2
)

// isDip reports whether an answer whose lower remaining was low, between
// answers whose bodies said before and after, shows a dip.
func isDip(before, low, after int) bool {
	return low < before-dipDepth && after >= before-dipBack
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

var errRefused = errors.New("refused")

// orgRemaining asks the server for the key's status and returns the org's
// remaining from the body and from the RateLimit header (-1 when the
// header names another level).
func orgRemaining(ctx context.Context, client *http.Client, url string) (body, header int, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/v1/rate_limit", nil)
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Authorization", "Bearer "+apiKey)
	resp, err := client.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusTooManyRequests:
		return 0, 0, errRefused
	default:
		return 0, 0, fmt.Errorf("GET /v1/rate_limit: %s", resp.Status)
	}
	var st struct{ Policies []policyStatus }
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&st); err != nil {
		return 0, 0, fmt.Errorf("GET /v1/rate_limit: %w", err)
	}
	i := slices.IndexFunc(st.Policies, func(p policyStatus) bool { return p.Name == "org" })
	if i < 0 {
		return 0, 0, errors.New("GET /v1/rate_limit: no org level in the body")
	}
	return st.Policies[i].Remaining, orgInRateLimit(resp.Header), nil
}

// orgInRateLimit is r of the org's member of the RateLimit field; -1 when
// the field names another level or cannot be read.
func orgInRateLimit(h http.Header) int {
	list, err := httpsfv.UnmarshalList(h.Values("RateLimit"))
	if err != nil {
		return -1
	}
	for _, m := range list {
		item, ok := m.(httpsfv.Item)
		if !ok || item.Value != "org" || item.Params == nil {
			continue
		}
		if r, ok := item.Params.Get("r"); ok {
			if n, ok := r.(int64); ok && n >= 0 {
				return int(n)
			}
		}
	}
	return -1
}

// policyStatus is a level of GET /v1/rate_limit's body.
type policyStatus struct {
	Name      string
	Remaining int
}
