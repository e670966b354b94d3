package bodo

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Opt is a field that may be absent, or null, or hold a value: every optional
// or nullable field of a model or parameter struct is an Opt, in requests and
// in answers alike. Fields the API always sends are plain values.
//
// The zero Opt is absent: a request leaves the field out (a merge patch keeps
// what the server has), and an answer did not send it. Set a field with
// [Value] or one of its shortcuts ([String], [Int], [Int64], [Bool]); clear
// it in a merge patch with [Null]. Read it with [Opt.Get], [Opt.Value] or
// [Opt.Or]; reading never panics.
//
//	c, err := client.Contacts.Create(ctx, bodo.ContactCreate{
//		Name:  "Ada Lovelace",
//		Email: bodo.String("ada@example.com"),
//	})
//	fmt.Println(c.Email.Or("(no email)"))
//
//	client.Contacts.Update(ctx, c.ID, bodo.ContactUpdate{Phone: bodo.Null[string]()})
type Opt[T any] struct {
	v     T
	state optState
}

type optState uint8

const (
	optAbsent optState = iota
	optNull
	optSet
)

// Value returns an Opt that holds v.
func Value[T any](v T) Opt[T] { return Opt[T]{v: v, state: optSet} }

// Null returns an Opt that is null: in a merge patch (ContactUpdate) it clears
// the field.
func Null[T any]() Opt[T] { return Opt[T]{state: optNull} }

// String returns an Opt that holds s.
func String(s string) Opt[string] { return Value(s) }

// Int returns an Opt that holds n, for counts such as a page's limit.
func Int(n int) Opt[int] { return Value(n) }

// Int64 returns an Opt that holds n, for amounts in minor units.
func Int64(n int64) Opt[int64] { return Value(n) }

// Bool returns an Opt that holds b.
func Bool(b bool) Opt[bool] { return Value(b) }

// Get returns the value and whether there is one (false when absent or null).
func (o Opt[T]) Get() (T, bool) { return o.v, o.state == optSet }

// Value returns the value, or T's zero value when the field is absent or null.
func (o Opt[T]) Value() T { return o.v }

// Or returns the value, or def when the field is absent or null.
func (o Opt[T]) Or(def T) T {
	if o.state == optSet {
		return o.v
	}
	return def
}

// IsSet reports whether the Opt holds a value.
func (o Opt[T]) IsSet() bool { return o.state == optSet }

// IsNull reports whether the Opt is null (sent as null, or made with [Null]).
func (o Opt[T]) IsNull() bool { return o.state == optNull }

// IsZero reports whether the Opt is absent. encoding/json's omitzero leaves
// absent fields out through it.
func (o Opt[T]) IsZero() bool { return o.state == optAbsent }

// String formats the value, or "null", or "absent".
func (o Opt[T]) String() string {
	switch o.state {
	case optSet:
		return fmt.Sprint(o.v)
	case optNull:
		return "null"
	}
	return "absent"
}

// MarshalJSON encodes the value, or null when the Opt is null or absent (a
// field tagged omitzero leaves an absent Opt out before this runs).
func (o Opt[T]) MarshalJSON() ([]byte, error) {
	if o.state != optSet {
		return []byte("null"), nil
	}
	return json.Marshal(o.v)
}

// UnmarshalJSON decodes null as a null Opt and anything else as its value. A
// field missing from the JSON leaves the Opt absent.
func (o *Opt[T]) UnmarshalJSON(data []byte) error {
	if bytes.Equal(bytes.TrimSpace(data), []byte("null")) {
		*o = Opt[T]{state: optNull}
		return nil
	}
	var v T
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	*o = Opt[T]{v: v, state: optSet}
	return nil
}
