package bodo

import "github.com/oapi-codegen/nullable"

// Nullable is a field of a merge patch (ContactUpdate) that can be absent
// (the zero value: keep), null (Null: clear) or set (Value).
type Nullable[T any] = nullable.Nullable[T]

// Value returns a Nullable set to v.
func Value[T any](v T) Nullable[T] { return nullable.NewNullableWithValue(v) }

// Null returns a Nullable that clears the field.
func Null[T any]() Nullable[T] { return nullable.NewNullNullable[T]() }

// Ptr returns a pointer to v, for the optional fields of create models.
func Ptr[T any](v T) *T { return &v }
