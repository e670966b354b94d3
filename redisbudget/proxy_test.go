package redisbudget

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// netProxy is a TCP proxy between the clients and a redis-server: the
// network of the tests. Cut makes Redis unreachable without losing what it
// holds (a request sent then never arrives), and Delay holds each reply
// back, longer than a client's timeout when the test wants its reply lost
// after Redis ran the command.
type netProxy struct {
	Addr     string
	upstream string
	ln       net.Listener

	mu    sync.Mutex
	cut   bool
	delay func() time.Duration
	conns map[net.Conn]bool
}

func startProxy(t *testing.T, upstream string) *netProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &netProxy{Addr: ln.Addr().String(), upstream: upstream, ln: ln, conns: map[net.Conn]bool{}}
	go p.serve()
	t.Cleanup(func() {
		ln.Close()
		p.Cut(true)
	})
	return p
}

// Cut makes Redis unreachable (true): every connection through the proxy
// is closed, with what was on its way, and new ones are closed at once.
func (p *netProxy) Cut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for c := range p.conns {
			c.Close()
		}
		clear(p.conns)
	}
}

// Delay holds every reply back by what f returns (nil: none).
func (p *netProxy) Delay(f func() time.Duration) {
	p.mu.Lock()
	p.delay = f
	p.mu.Unlock()
}

func (p *netProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.pipe(c)
	}
}

func (p *netProxy) pipe(c net.Conn) {
	p.mu.Lock()
	if p.cut {
		p.mu.Unlock()
		c.Close()
		return
	}
	up, err := net.DialTimeout("tcp", p.upstream, time.Second)
	if err != nil {
		p.mu.Unlock()
		c.Close()
		return
	}
	p.conns[c], p.conns[up] = true, true
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.conns, c)
		delete(p.conns, up)
		p.mu.Unlock()
		c.Close()
		up.Close()
	}()
	go func() {
		_, _ = io.Copy(up, c)
		up.Close()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := up.Read(buf)
		if n > 0 {
			p.mu.Lock()
			delay := p.delay
			p.mu.Unlock()
			if delay != nil {
				time.Sleep(delay())
			}
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
