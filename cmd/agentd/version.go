package main

import (
	"runtime/debug"
	"strings"
)

// version is set at link time (go build -ldflags "-X main.version=v1.2.3");
// when it is not, the module's version and VCS stamp from the build info
// say what this binary is.
var version = ""

// versionString says what this binary is: the linked version, else the
// module version, else the commit it was built from (with "+dirty" for a
// modified tree), else "devel".
func versionString(info *debug.BuildInfo, ok bool) string {
	if version != "" {
		return version
	}
	if !ok {
		return "devel"
	}
	v := info.Main.Version
	if v != "" && v != "(devel)" {
		return v
	}
	var rev, dirty string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if rev == "" {
		return "devel"
	}
	return "devel-" + rev[:min(12, len(rev))] + dirty + " (" + strings.TrimPrefix(info.GoVersion, "go") + ")"
}

func init() {
	rootCmd.Version = versionString(debug.ReadBuildInfo())
	rootCmd.SetVersionTemplate("agentd {{.Version}}\n")
}
