// Command agents is examples/agents with a -redis flag: processes started
// with the same -redis address share one budget for their key.
//
//	go run ./examples/agents -redis localhost:6379 -agents 16 -duration 1m
package main

import (
	"flag"
	"log"
	"os"
	"time"

	"github.com/bodo-app/bodo-go"
	"github.com/bodo-app/bodo-go/internal/agents"
	"github.com/bodo-app/bodo-go/redisbudget"
	"github.com/redis/go-redis/v9"
)

func main() {
	log.SetFlags(0)
	if err := agents.Main("agents", os.Args[1:], os.Stdout, withRedis); err != nil {
		log.Fatal(err)
	}
}

func withRedis(fs *flag.FlagSet) func() ([]bodo.Option, error) {
	addr := fs.String("redis", "", "Redis address (host:port) to share the budget through; empty: this process's budget only")
	leaseTTL := fs.Duration("lease-ttl", 0, "how long a call may hold its slot before Redis frees it (0: the client's default)")
	return func() ([]bodo.Option, error) {
		if *addr == "" {
			return nil, nil
		}
		rdb := redis.NewClient(&redis.Options{Addr: *addr, DialTimeout: 200 * time.Millisecond,
			ReadTimeout: 300 * time.Millisecond, WriteTimeout: 300 * time.Millisecond, MaxRetries: -1})
		var opts []redisbudget.Option
		if *leaseTTL > 0 {
			opts = append(opts, redisbudget.WithLeaseTTL(*leaseTTL))
		}
		return []bodo.Option{bodo.WithSharedBudget(redisbudget.New(rdb, opts...))}, nil
	}
}
