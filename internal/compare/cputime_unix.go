//go:build unix

package compare

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time the process used so far, user and system; zero
// when the system does not say.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
