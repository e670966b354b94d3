package sandbox

import "testing"

// The test binary imports speccheck (speccheck_test.go), so every Server
// of these tests checks its exchanges against openapi.json.
func TestServersValidateUnderTest(t *testing.T) {
	if !New().validating() {
		t.Error("a Server under go test does not check its exchanges")
	}
	if New(WithValidation(false)).validating() {
		t.Error("WithValidation(false) is ignored")
	}
}
