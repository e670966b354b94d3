package bodo

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

func TestKeyIDTellsKeysApartWithoutTheKey(t *testing.T) {
	const other = "bodo_test_anothersecretkey"
	a, _ := mockClient(t)
	b, _ := mockClient(t)
	c, _ := mockClient(t, WithAPIKey(other))
	if a.KeyID() != b.KeyID() {
		t.Errorf("two clients of one key: KeyID %q and %q", a.KeyID(), b.KeyID())
	}
	if a.KeyID() == c.KeyID() {
		t.Errorf("two keys share the KeyID %q", a.KeyID())
	}
	sum := sha256.Sum256([]byte(testKey))
	if want := hex.EncodeToString(sum[:])[:16]; a.KeyID() != want {
		t.Errorf("KeyID %q, want %q, the first 16 hex digits of the key's SHA-256", a.KeyID(), want)
	}
	for _, k := range []string{testKey, "secretsecret", other} {
		if strings.Contains(a.KeyID()+c.KeyID(), k) {
			t.Errorf("a KeyID holds %q", k)
		}
	}
}
