package hub

import (
	"testing"

	"github.com/agentd/agentd/configs"
)

func TestSoleTenant(t *testing.T) {
	cases := []struct {
		name   string
		tokens []configs.Token
		want   bool
	}{
		{"no tokens: the loopback's default tenant", nil, true},
		{"one token", []configs.Token{{Tenant: "acme", TokenEnv: "A"}}, true},
		{"two tokens of one tenant", []configs.Token{{Tenant: "acme", TokenEnv: "A"}, {Tenant: "acme", TokenEnv: "B"}}, true},
		{"two tenants", []configs.Token{{Tenant: "acme", TokenEnv: "A"}, {Tenant: "beta", TokenEnv: "B"}}, false},
		{"a second tenant last", []configs.Token{{Tenant: "acme", TokenEnv: "A"}, {Tenant: "acme", TokenEnv: "B"}, {Tenant: "beta", TokenEnv: "C"}}, false},
	}
	for _, tc := range cases {
		if got := soleTenant(configs.Auth{Tokens: tc.tokens}); got != tc.want {
			t.Errorf("%s: soleTenant = %v, want %v", tc.name, got, tc.want)
		}
	}
}
