package main

import (
	"bytes"
	"context"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bodo-app/bodo-go/bodotest"
)

// TestRunExportsAndCharts runs 16 agents for three virtual minutes against
// an overloaded bodotest server with -otel stdout, and checks that the
// spans and metrics reach stdout and that the chart is an SVG with its three
// panels. With BODO_CHART set it writes the chart there too (the README's
// docs/agents-otel.svg comes from BODO_CHART=../../../docs/agents-otel.svg).
func TestRunExportsAndCharts(t *testing.T) {
	chart := filepath.Join(t.TempDir(), "agents.svg")
	synctest.Test(t, func(t *testing.T) {
		srv := bodotest.NewServer(bodotest.WithProfile(bodotest.Overloaded))
		defer srv.Close()
		cfg, err := parseFlags([]string{"-duration", "3m", "-otel", "stdout", "-chart", chart, "-profile", "overloaded"})
		if err != nil {
			t.Fatal(err)
		}
		var stdout, stderr bytes.Buffer
		if err := run(context.Background(), cfg, target{url: srv.URL, key: bodotest.APIKey, transport: srv.Client().Transport}, &stdout, &stderr); err != nil {
			t.Fatal(err)
		}
		out := stdout.String()
		for _, want := range []string{`"Name":"createContact"`, `"Key":"url.template"`, `"Name":"http.client.request.duration"`, `"Name":"bodo.client.budget.remaining"`, `"Name":"bodo.client.retries"`} {
			if !strings.Contains(out, want) {
				t.Errorf("stdout has no %s", want)
			}
		}
		if !strings.Contains(stderr.String(), "chart: "+chart) {
			t.Errorf("stderr: %s", stderr.String())
		}
	})
	svg, err := os.ReadFile(chart)
	if err != nil {
		t.Fatal(err)
	}
	d := xml.NewDecoder(bytes.NewReader(svg))
	counts := map[string]int{}
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the chart is no well-formed XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok {
			counts[se.Name.Local]++
		}
	}
	if counts["svg"] != 1 || counts["polyline"] != 2 || counts["line"] != 1 || counts["rect"] < 5 {
		t.Errorf("the chart has %v", counts)
	}
	if path := os.Getenv("BODO_CHART"); path != "" {
		if err := os.WriteFile(path, svg, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestParseFlags(t *testing.T) {
	for _, args := range [][]string{{"-otel", "jaeger"}, {"-agents", "0"}, {"-duration", "0s"}, {"extra"}} {
		if _, err := parseFlags(args); err == nil {
			t.Errorf("parseFlags(%q) took it", args)
		}
	}
	cfg, err := parseFlags(nil)
	if err != nil || cfg.otel != "" || cfg.duration != 3*time.Minute {
		t.Errorf("defaults: %+v, %v", cfg, err)
	}
}
