// Package gen is the low-level client generated from openapi.json by
// oapi-codegen. Use package bodo instead: it wraps every request with the
// retry discipline, the budget and typed errors.
package gen

//go:generate go tool oapi-codegen -config config.yaml ../../openapi.json
