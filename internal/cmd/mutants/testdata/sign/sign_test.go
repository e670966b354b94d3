package sign

import "testing"

// TestSign leaves out zero: the branch for it survives its deletion.
func TestSign(t *testing.T) {
	if Sign(-5) != -1 || Sign(3) != 1 {
		t.Fatal("wrong sign")
	}
}
