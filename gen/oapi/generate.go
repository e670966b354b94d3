// Package oapi is the low-level client that oapi-codegen generates from
// openapi.json, without retries, budget or typed errors. The benchmarks
// compare package bodo with it; programs use package bodo instead.
package oapi

//go:generate go tool oapi-codegen -config ../config.yaml ../../openapi.json
