package redisbudget

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisServer is a private redis-server on a free loopback port, without
// persistence, for one test.
type redisServer struct {
	Addr string
	port int
	cmd  *exec.Cmd
}

// startRedis starts a redis-server for t and stops it when t ends. Without
// redis-server on the PATH the test is skipped, except in CI (CI=true),
// where .ci/run installs it and a missing one is a failure.
func startRedis(t *testing.T) *redisServer {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("redis-server is not installed; .ci/run installs Debian's redis-server")
		}
		t.Skip("redis-server is not installed (apt-get install redis-server)")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	s := &redisServer{Addr: "127.0.0.1:" + strconv.Itoa(port), port: port}
	s.Start(t)
	t.Cleanup(s.Stop)
	return s
}

// Start (re)starts the server on its port.
func (s *redisServer) Start(t *testing.T) {
	t.Helper()
	s.cmd = exec.Command("redis-server", "--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning",
		"--enable-debug-command", "local") // DEBUG SLEEP pauses it in the chaos test
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer rdb.Close()
	deadline := time.Now().Add(5 * time.Second)
	for rdb.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("redis-server on %s did not answer", s.Addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop kills the server.
func (s *redisServer) Stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
		s.cmd = nil
	}
}

func (s *redisServer) Client(t *testing.T) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr, DialTimeout: 200 * time.Millisecond,
		ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

var testKeySeq atomic.Int64

func testKey() string {
	return fmt.Sprintf("test.bodo:%d", testKeySeq.Add(1))
}

// storeOnRedis is a Budget on a private Redis, with a client straight to
// that Redis, a key of its own and the prefix of the key's entries there.
func storeOnRedis(t *testing.T) (b *Budget, rdb *redis.Client, key, prefix string) {
	t.Helper()
	rdb = startRedis(t).Client(t)
	key = testKey()
	return New(rdb), rdb, key, DefaultPrefix + "{" + key + "}"
}
