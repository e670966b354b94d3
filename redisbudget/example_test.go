package redisbudget_test

import (
	"context"
	"log"
	"time"

	"github.com/bodo-app/bodo-go"
	"github.com/bodo-app/bodo-go/redisbudget"
	"github.com/redis/go-redis/v9"
)

// Every process that uses the key makes its client with the same Redis:
// together they keep to the key's limits as one process would. The key
// comes from BODO_API_KEY; Redis holds a hash of it, never the key. A
// lease of a process that dies frees its slot after a minute here.
func ExampleNew() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	client, err := bodo.NewClient(
		bodo.WithSharedBudget(redisbudget.New(rdb, redisbudget.WithLeaseTTL(time.Minute))),
		bodo.WithMaxRetries(5),
	)
	if err != nil {
		log.Fatal(err)
	}
	ada, err := client.Contacts.Create(context.Background(), bodo.ContactCreate{Name: "Ada Lovelace"})
	if err != nil {
		log.Fatal(err)
	}
	log.Println("created", ada.ID)
}
