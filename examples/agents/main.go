// Command agents runs many agent goroutines on one API key with a realistic
// mix of calls (reads, searches, counts, creates, updates, deletes, invoices
// and payments) and reports what the key got through.
//
//	go run ./examples/agents -agents 16 -duration 1m
//
// It runs against BODO_BASE_URL with BODO_API_KEY, or against the embedded
// sandbox on loopback when BODO_BASE_URL is unset. On a terminal it shows a
// live progress line; at the end it prints a summary (-json for a machine).
// The client's log goes to stderr: every call the budget has held for 5 s,
// once, at INFO, with the level that holds it and the calls queued behind
// it, and every refusal at WARN (-log warn or -log off for less).
// The same program with a -redis flag, sharing the budget of many
// processes, is redisbudget/examples/agents.
package main

import (
	"log"
	"os"

	"github.com/bodo-app/bodo-go/internal/agents"
)

func main() {
	log.SetFlags(0)
	if err := agents.Main("agents", os.Args[1:], os.Stdout, nil); err != nil {
		log.Fatal(err)
	}
}
