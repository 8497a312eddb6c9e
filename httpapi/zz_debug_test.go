package httpapi_test

import (
	"fmt"
	"testing"

	"github.com/agentd/agentd/testkit/daemontest"
	"github.com/agentd/agentd/testkit/openaifake"
)

func TestZZDebugFold(t *testing.T) {
	const win = 8192
	script, _ := summaryScript()
	fake := openaifake.New(openaifake.Options{Window: win, Script: script})
	defer fake.Close()
	d := daemontest.Start(t, daemontest.Config(t.TempDir(), fake.URL(), win), nil)
	c := newChat(t, d, "")
	evs := watchChat(t, d, c.ID)
	prev := chatContext(t, d, c.ID)
	for i := 0; i < 300; i++ {
		send(t, d, c.ID, fmt.Sprintf("Note %d: order %d ships from shelf B-%d.", i, 5000+i, i%40))
		v := chatContext(t, d, c.ID)
		if v.FirstKeptSeq != prev.FirstKeptSeq || v.Factor != prev.Factor {
			t.Logf("turn %d: first kept %d est %d factor %v; before: est %d factor %v recent %+v", i, v.FirstKeptSeq, v.Estimate, v.Factor, prev.Estimate, prev.Factor, prev.RecentRequests[len(prev.RecentRequests)-1])
		}
		prev = v
	}
	t.Logf("%d compacted", len(evs.compacted(t)))
}
