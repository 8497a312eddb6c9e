package cluster

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/agentd/agentd/actors"
	"github.com/agentd/agentd/configs"
)

func TestJoinFailsClearlyWhenEtcdDoesNotAnswer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	_ = l.Close()
	sys := actors.NewSystem(zerolog.Nop())
	cc := configs.Cluster{Enabled: true, Name: "nobody", Provider: configs.ClusterEtcd, EtcdEndpoints: []string{dead}, Bind: "127.0.0.1:0"}
	_, err = Join(context.Background(), sys, cc, Config{Log: zerolog.Nop()})
	if err == nil || !strings.Contains(err.Error(), "cluster provider etcd at ["+dead+"] does not answer") {
		t.Fatalf("join with etcd down: %v", err)
	}
}
