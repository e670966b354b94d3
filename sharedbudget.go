package bodo

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"reflect"

	"github.com/bodo-app/bodo-go/budgetstore"
)

// WithSharedBudget shares the key's budget with every process that uses
// the same store, for example redisbudget.New(rdb). All Clients of this
// process on the same key and host use it from then on. A nil store, or a
// nil pointer in the interface, is an error: leave the option out for a
// budget of this process alone.
func WithSharedBudget(b budgetstore.Store) Option {
	return clientOption(func(s *clientSettings) error {
		if v := reflect.ValueOf(b); b == nil || v.Kind() == reflect.Pointer && v.IsNil() {
			return errors.New("WithSharedBudget: the store is nil")
		}
		s.shared = b
		return nil
	})
}

// sharedKey names a key's state in a shared store: the host and a hash of
// the API key, never the key itself.
func sharedKey(host, apiKey string) string {
	sum := sha256.Sum256([]byte("bodo-go shared budget\x00" + apiKey))
	return host + ":" + hex.EncodeToString(sum[:16])
}
