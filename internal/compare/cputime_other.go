//go:build !unix

package compare

import "time"

// cpuTime is zero where the process's CPU time is not available.
func cpuTime() time.Duration { return 0 }
