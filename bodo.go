// Package bodo is the official Go client for the bodo API.
//
// A Client is made once with NewClient and shared by every goroutine. Its
// services (Contacts, Invoices, Exports, Operations, Events) and its methods
// Batch, Me, RateLimit and OpenAPI map one to one onto the operations of
// openapi.json, take a context first and per-call RequestOptions last, and
// return typed models or an error.
//
// Every call passes one layer that knows its operation, its cost in points and
// its class. That layer sends Bodo-Version, User-Agent and an Idempotency-Key
// on every POST and PATCH, retries what the server says may be retried after
// the wait the server asked for (see WithMaxRetries), never lets a key collect
// enough refusals to be locked out, refuses locally what a known exhausted
// quota would refuse, and turns every problem answer into an *Error that
// errors.Is matches against the sentinels ErrRateLimited, ErrNotFound and the
// others.
//
// # Models and optional values
//
// Every model, parameter struct and enum is a type of this package, generated
// from openapi.json with its descriptions: go doc shows what each field
// means. Enums are typed string constants, one type per concept
// (InvoiceStatusOpen, ExportFormatCSV, ...), with a Valid method.
//
// A field the API always sends or always needs is a plain value. A field that
// may be absent or null is an [Opt], in requests and answers alike; this is
// the package's one idiom for optional values (the one openai-go settled on;
// stripe-go and go-github use pointers, which cannot say "null" in a merge
// patch and panic when read carelessly). Set an Opt with [String], [Int],
// [Int64], [Bool] or [Value], clear a field of a merge patch with [Null], and
// leave it zero to leave the field out. Read it with Get, Value or Or, which
// never panic. Lists are plain slices: nil leaves a list out, an empty slice
// sends [].
package bodo

//go:generate go run ./gen

// Version is the version of this SDK, sent in the User-Agent header.
const Version = "0.1.0"

// APIVersion is the API version this SDK was written for, sent as
// Bodo-Version on every request.
const APIVersion = "2026-11-01"
