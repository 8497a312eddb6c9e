// Package clusterpb holds the protobuf messages agentd nodes exchange in
// cluster mode (clusterpb.proto), generated with protoc-gen-go.
package clusterpb

//go:generate protoc --go_out=. --go_opt=paths=source_relative clusterpb.proto
