package main

// The quickstart's exchanges with the sandbox are checked against
// openapi.json.
import _ "github.com/bodo-app/bodo-go/internal/sandbox/speccheck"
