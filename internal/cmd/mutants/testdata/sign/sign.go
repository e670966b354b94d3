// Package sign is the module mutants' test runs on.
package sign

// Sign is -1, 0 or 1 as x is negative, zero or positive.
func Sign(x int) int {
	if x < 0 {
		return -1
	}
	if x == 0 {
		return 0
	}
	return 1
}
