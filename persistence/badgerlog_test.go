package persistence

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

func TestBadgerWarningsReachZerologAtWarn(t *testing.T) {
	var out bytes.Buffer
	l := BadgerLogger(zerolog.New(&out).Level(zerolog.WarnLevel))
	l.Infof("replaying value log %d\n", 3)
	l.Warningf("value log %s is truncated\n", "000001.vlog")
	got := out.String()
	if strings.Contains(got, "replaying") {
		t.Fatalf("an Info line reached the Warn log: %s", got)
	}
	if !strings.Contains(got, `"level":"warn","message":"value log 000001.vlog is truncated"}`) {
		t.Fatalf("warning not logged at warn on one line: %s", got)
	}
}
