// Wrapper module: builds toxiproxy's server (github.com/Shopify/toxiproxy/v2/cmd/server) from its published
// module, pinned here, for the chaos run (test/chaos): the TCP fault proxy between operator and API server.
// Made with: go mod init; go get github.com/Shopify/toxiproxy/v2/cmd/server@VERSION. Kept apart from the
// control-plane modules so the graphs do not mix.
module modelpool.test/toxiproxy

go 1.26.0

require (
	github.com/Shopify/toxiproxy/v2 v2.5.0 // indirect
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.1.2 // indirect
	github.com/golang/protobuf v1.5.2 // indirect
	github.com/gorilla/mux v1.8.0 // indirect
	github.com/mattn/go-colorable v0.1.13 // indirect
	github.com/mattn/go-isatty v0.0.16 // indirect
	github.com/matttproud/golang_protobuf_extensions v1.0.1 // indirect
	github.com/prometheus/client_golang v1.13.0 // indirect
	github.com/prometheus/client_model v0.2.0 // indirect
	github.com/prometheus/common v0.37.0 // indirect
	github.com/prometheus/procfs v0.8.0 // indirect
	github.com/rs/xid v1.4.0 // indirect
	github.com/rs/zerolog v1.28.0 // indirect
	golang.org/x/sys v0.0.0-20220909162455-aba9fc2a8ff2 // indirect
	google.golang.org/protobuf v1.28.1 // indirect
	gopkg.in/tomb.v1 v1.0.0-20141024135613-dd632973f1e7 // indirect
)
