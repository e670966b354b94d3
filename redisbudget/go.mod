module github.com/bodo-app/bodo-go/redisbudget

go 1.26.0

require (
	github.com/bodo-app/bodo-go v0.1.0
	github.com/redis/go-redis/v9 v9.23.0
)

require (
	github.com/apapsch/go-jsonmerge/v2 v2.0.0 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/dunglas/httpsfv v1.1.2 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/oapi-codegen/nullable v1.2.0 // indirect
	github.com/oapi-codegen/runtime v1.9.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)
