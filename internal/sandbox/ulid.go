package sandbox

import (
	"crypto/rand"
	"sync"
	"time"
)

// crockford is the Crockford base32 alphabet ULIDs are written in.
const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// ulids makes monotonic ULIDs: 48 bits of Unix milliseconds and 80 random
// bits; within one millisecond (which under synctest is most of them) the
// random part is incremented, so ids sort in creation order.
type ulids struct {
	mu     sync.Mutex
	lastMs uint64
	rnd    [10]byte
}

func (g *ulids) next(t time.Time) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	ms := uint64(max(t.UnixMilli(), 0))
	if ms > g.lastMs {
		g.lastMs = ms
		if _, err := rand.Read(g.rnd[:]); err != nil {
			clear(g.rnd[:])
		}
		g.rnd[0] &= 0x7f // leave room to increment within the millisecond
	} else {
		for i := len(g.rnd) - 1; i >= 0; i-- {
			g.rnd[i]++
			if g.rnd[i] != 0 {
				break
			}
			if i == 0 {
				g.lastMs++
			}
		}
	}
	return encodeULID(g.lastMs, g.rnd)
}

func encodeULID(ms uint64, rnd [10]byte) string {
	var out [26]byte
	for i := 9; i >= 0; i-- {
		out[i] = crockford[ms&31]
		ms >>= 5
	}
	// 80 random bits make exactly 16 characters of 5 bits.
	var acc uint64
	bits := 0
	n := 10
	for _, b := range rnd {
		acc = acc<<8 | uint64(b)
		bits += 8
		for bits >= 5 {
			bits -= 5
			out[n] = crockford[(acc>>bits)&31]
			n++
		}
	}
	return string(out[:])
}

// validID reports whether id is prefix followed by a 26-character ULID.
func validID(id, prefix string) bool {
	if len(id) != len(prefix)+26 || id[:len(prefix)] != prefix {
		return false
	}
	for i := len(prefix); i < len(id); i++ {
		c := id[i]
		if !('0' <= c && c <= '9' || 'A' <= c && c <= 'Z' && c != 'I' && c != 'L' && c != 'O' && c != 'U') {
			return false
		}
	}
	return id[len(prefix)] <= '7'
}
