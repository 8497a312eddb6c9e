package main

import (
	"bytes"
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersionString(t *testing.T) {
	stamped := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "true"}}}
	for _, tc := range []struct {
		name, linked string
		info         *debug.BuildInfo
		ok           bool
		want         string
	}{
		{"linked wins", "v1.2.3", stamped, true, "v1.2.3"},
		{"module version", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.9.0"}}, true, "v0.9.0"},
		{"vcs stamp", "", stamped, true, "devel-0123456789ab+dirty (1.26.0)"},
		{"no stamp", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, true, "devel"},
		{"no build info", "", nil, false, "devel"},
	} {
		old := version
		version = tc.linked
		if got := versionString(tc.info, tc.ok); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
		version = old
	}
}

func TestVersionFlagPrintsTheVersion(t *testing.T) {
	var out bytes.Buffer
	rootCmd.SetOut(&out)
	defer rootCmd.SetOut(nil)
	rootCmd.SetArgs([]string{"--version"})
	if err := rootCmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); !strings.HasPrefix(got, "agentd ") || got != "agentd "+rootCmd.Version+"\n" || rootCmd.Version == "" {
		t.Fatalf("--version printed %q (version %q)", got, rootCmd.Version)
	}
}
